#include "gui/model/timeline_index.h"

#include "core/error.h"
#include "core/op_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <unordered_map>

namespace k3::gui {
namespace {

using profiler::EventKind;
using profiler::kNone;

bool is_gpu(EventKind k) { return k == EventKind::kernel || k == EventKind::memcpy || k == EventKind::memset; }

const std::string kUnattributed = "unattributed";

TimelineTrack make_track(TrackKind kind, std::string label, std::int32_t device = kNone, std::int32_t stream = kNone) {
  TimelineTrack t;
  t.kind = kind;
  t.label = std::move(label);
  t.device = device;
  t.stream = stream;
  return t;
}

}  // namespace

TimelineIndex::TimelineIndex(std::shared_ptr<const profiler::Trace> trace, const PredictionData* prediction)
    : trace_(std::move(trace)) {
  K3_CHECK(trace_ != nullptr, "a timeline needs a trace");
  K3_CHECK(trace_->is_sorted(), "the trace must be sorted by start");
  names_ = trace_->names();
  const profiler::Trace& t = *trace_;
  begin_ns_ = std::numeric_limits<std::int64_t>::max();
  end_ns_ = std::numeric_limits<std::int64_t>::min();
  for (int pass = 0; pass < 2 && begin_ns_ > end_ns_; ++pass) {  // GPU work's extent, else every event's
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (pass == 0 && !is_gpu(t.kind[i])) continue;
      begin_ns_ = std::min(begin_ns_, t.start_ns[i]);
      end_ns_ = std::max(end_ns_, t.end_ns[i]);
    }
  }
  if (begin_ns_ > end_ns_) begin_ns_ = end_ns_ = 0;

  tracks_.push_back(make_track(TrackKind::steps, "steps"));
  tracks_.push_back(make_track(TrackKind::predicted, "predicted"));
  build_op_tracks();
  build_stream_tracks();
  build_steps_track();
  set_prediction(prediction);
}

std::uint32_t TimelineIndex::intern(const std::string& s) {
  const std::int32_t found = find_name(s);
  if (found != kNone) return static_cast<std::uint32_t>(found);
  names_.push_back(s);
  return static_cast<std::uint32_t>(names_.size() - 1);
}

std::int32_t TimelineIndex::find_name(const std::string& name) const {
  // Names are few (kernels and ops, not events): a scan is cheaper than keeping a second map.
  const auto it = std::find(names_.begin(), names_.end(), name);
  return it == names_.end() ? kNone : static_cast<std::int32_t>(it - names_.begin());
}

void TimelineIndex::finish(TimelineTrack* t) {
  t->max_end_ns.resize(t->size());
  std::int64_t m = std::numeric_limits<std::int64_t>::min();
  for (std::size_t i = 0; i < t->size(); ++i) t->max_end_ns[i] = m = std::max(m, t->end_ns[i]);
}

void TimelineIndex::build_op_tracks() {
  const profiler::Trace& t = *trace_;
  // One span per (device, op, instance), created at its first GPU event: in start order, since rows are.
  std::map<std::int32_t, std::size_t> track_of_device;
  std::unordered_map<std::uint64_t, std::uint32_t> span_of_key;  // lookup only, never iterated
  std::vector<std::uint32_t> span_of_row(t.size(), std::numeric_limits<std::uint32_t>::max());
  std::vector<std::uint32_t> rows_per_span;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!is_gpu(t.kind[i]) || t.op[i] == kNone) continue;
    K3_CHECK(t.device[i] >= 0 && t.device[i] < (1 << 10), "device {} of event {} is out of range", t.device[i], i);
    const std::uint64_t key = (static_cast<std::uint64_t>(t.device[i]) << 54) |
                              (static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.op[i])) << 32) |
                              static_cast<std::uint32_t>(t.op_instance[i]);
    auto [it, inserted] = span_of_key.emplace(key, static_cast<std::uint32_t>(spans_.size()));
    if (inserted) {
      spans_.push_back({static_cast<std::uint32_t>(t.op[i]), t.op[i], t.op_instance[i], 0, 0});
      rows_per_span.push_back(0);
      auto [tr, added] = track_of_device.emplace(t.device[i], 0);
      if (added) {
        tr->second = tracks_.size();
        tracks_.push_back(make_track(TrackKind::ops, fmt::format("GPU {} ops", t.device[i]), t.device[i]));
      }
      TimelineTrack& track = tracks_[tr->second];
      track.start_ns.push_back(t.start_ns[i]);
      track.end_ns.push_back(t.end_ns[i]);
      track.ref.push_back(it->second);
    }
    const std::uint32_t s = it->second;
    span_of_row[i] = s;
    ++rows_per_span[s];
    DerivedSpan& d = spans_[s];
    ++d.kernels;
    d.busy_ns += t.end_ns[i] - t.start_ns[i];
  }
  // Ends: the last GPU event's end of each span (spans are found again through their track position).
  std::vector<std::pair<std::size_t, std::uint32_t>> where(spans_.size());  // span -> (track, position)
  for (std::size_t tr = 0; tr < tracks_.size(); ++tr) {
    for (std::uint32_t k = 0; k < tracks_[tr].size(); ++k) where[tracks_[tr].ref[k]] = {tr, k};
  }
  span_row_offset_.assign(spans_.size() + 1, 0);
  for (std::size_t s = 0; s < spans_.size(); ++s) span_row_offset_[s + 1] = span_row_offset_[s] + rows_per_span[s];
  span_rows_.resize(span_row_offset_.back());
  std::vector<std::uint32_t> fill(span_row_offset_.begin(), span_row_offset_.end() - 1);
  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::uint32_t s = span_of_row[i];
    if (s == std::numeric_limits<std::uint32_t>::max()) continue;
    span_rows_[fill[s]++] = static_cast<std::uint32_t>(i);
    auto& end = tracks_[where[s].first].end_ns[where[s].second];
    end = std::max(end, t.end_ns[i]);
  }
  for (TimelineTrack& tr : tracks_) finish(&tr);
}

void TimelineIndex::build_stream_tracks() {
  const profiler::Trace& t = *trace_;
  std::map<std::pair<std::int32_t, std::int32_t>, std::size_t> track_of_stream;
  // Ops tracks sit before their device's streams: streams go after, in (device, stream) order.
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (is_gpu(t.kind[i])) track_of_stream.emplace(std::make_pair(t.device[i], t.stream[i]), 0);
  }
  std::vector<TimelineTrack> ordered;
  std::vector<TimelineTrack> ops(tracks_.begin() + 2, tracks_.end());
  tracks_.resize(2);
  std::int32_t device = std::numeric_limits<std::int32_t>::min();
  for (auto& [key, index] : track_of_stream) {
    if (key.first != device) {
      device = key.first;
      for (TimelineTrack& o : ops) {
        if (o.device == device) tracks_.push_back(std::move(o));
      }
    }
    index = tracks_.size();
    tracks_.push_back(
        make_track(TrackKind::stream, fmt::format("GPU {} stream {}", key.first, key.second), key.first, key.second));
  }
  std::vector<std::size_t> counts(tracks_.size(), 0);
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (is_gpu(t.kind[i])) ++counts[track_of_stream[{t.device[i], t.stream[i]}]];
  }
  for (std::size_t k = 0; k < tracks_.size(); ++k) {
    if (tracks_[k].kind != TrackKind::stream) continue;
    tracks_[k].start_ns.reserve(counts[k]);
    tracks_[k].end_ns.reserve(counts[k]);
    tracks_[k].ref.reserve(counts[k]);
  }
  std::size_t last = 0;
  std::pair<std::int32_t, std::int32_t> last_key{kNone - 1, kNone - 1};
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!is_gpu(t.kind[i])) continue;
    const std::pair<std::int32_t, std::int32_t> key{t.device[i], t.stream[i]};
    if (key != last_key) last = track_of_stream[key], last_key = key;
    TimelineTrack& tr = tracks_[last];
    tr.start_ns.push_back(t.start_ns[i]);
    tr.end_ns.push_back(t.end_ns[i]);
    tr.ref.push_back(static_cast<std::uint32_t>(i));
  }
  for (TimelineTrack& tr : tracks_) {
    if (tr.kind == TrackKind::stream) finish(&tr);
  }
}

void TimelineIndex::build_steps_track() {
  const profiler::Trace& t = *trace_;
  TimelineTrack& steps = tracks_[track_of(TrackKind::steps)];
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] != EventKind::range || t.thread[i] != profiler::kStepTrackThread) continue;
    const std::string& name = t.name_of(i);
    std::int64_t number = static_cast<std::int64_t>(steps.size());
    if (name.rfind("step ", 0) == 0) number = std::strtoll(name.c_str() + 5, nullptr, 10);
    steps.start_ns.push_back(t.start_ns[i]);
    steps.end_ns.push_back(t.end_ns[i]);
    steps.ref.push_back(static_cast<std::uint32_t>(spans_.size()));
    spans_.push_back({t.name[i], kNone, number, 0, 0});
  }
  if (steps.size() == 0) {
    // No step ranges: instance n of every op is step n (an op runs once per step).
    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> extent;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (!is_gpu(t.kind[i]) || t.op[i] == kNone) continue;
      auto [it, added] = extent.emplace(t.op_instance[i], std::make_pair(t.start_ns[i], t.end_ns[i]));
      if (!added) it->second.second = std::max(it->second.second, t.end_ns[i]);
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> by_start;  // (start, instance)
    for (const auto& [instance, e] : extent) by_start.push_back({e.first, instance});
    std::sort(by_start.begin(), by_start.end());
    for (const auto& [start, instance] : by_start) {
      steps.start_ns.push_back(start);
      steps.end_ns.push_back(extent[instance].second);
      steps.ref.push_back(static_cast<std::uint32_t>(spans_.size()));
      spans_.push_back({intern(fmt::format("instance {}", instance)), kNone, instance, 0, 0});
    }
  }
  // Each GPU event counts in the last step that starts at or before it.
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!is_gpu(t.kind[i])) continue;
    const auto it = std::upper_bound(steps.start_ns.begin(), steps.start_ns.end(), t.start_ns[i]);
    if (it == steps.start_ns.begin()) continue;
    const std::size_t k = static_cast<std::size_t>(it - steps.start_ns.begin()) - 1;
    if (t.start_ns[i] >= steps.end_ns[k]) continue;
    DerivedSpan& d = spans_[steps.ref[k]];
    ++d.kernels;
    d.busy_ns += t.end_ns[i] - t.start_ns[i];
  }
  finish(&steps);
  span_row_offset_.resize(spans_.size() + 1, span_row_offset_.empty() ? 0 : span_row_offset_.back());
}

void TimelineIndex::set_prediction(const PredictionData* prediction) {
  predicted_ops_ = prediction ? prediction->ops : std::vector<PredictedOpRow>{};
  set_kinds(prediction);
  build_predicted_track();
}

void TimelineIndex::set_kinds(const PredictionData* prediction) {
  kind_of_name_.assign(names_.size(), "");
  for (std::size_t n = 0; n < names_.size(); ++n) {
    const int p = prediction ? prediction->find(names_[n]) : -1;
    if (p >= 0) {
      kind_of_name_[n] = prediction->ops[static_cast<std::size_t>(p)].kind;
    } else if (const auto ref = parse_op_name(names_[n])) {
      kind_of_name_[n] = to_string(op_info(ref->id).kind);
    } else {
      kind_of_name_[n] = "other";
    }
  }
}

void TimelineIndex::build_predicted_track() {
  const int p = track_of(TrackKind::predicted);
  TimelineTrack& lane = tracks_[static_cast<std::size_t>(p)];
  // The lane's spans are the last ones of spans_: drop the previous prediction's.
  if (!lane.ref.empty()) {
    spans_.resize(*std::min_element(lane.ref.begin(), lane.ref.end()));
    span_row_offset_.resize(spans_.size() + 1);
  }
  lane = make_track(TrackKind::predicted, "predicted");
  const TimelineTrack& steps = tracks_[static_cast<std::size_t>(track_of(TrackKind::steps))];
  std::vector<std::uint32_t> op_name(predicted_ops_.size());
  for (std::size_t k = 0; k < predicted_ops_.size(); ++k) op_name[k] = intern(predicted_ops_[k].name);
  const std::size_t step_count = std::max<std::size_t>(steps.size(), predicted_ops_.empty() ? 0 : 1);
  for (std::size_t s = 0; s < step_count; ++s) {
    double t_ns = static_cast<double>(steps.size() ? steps.start_ns[s] : begin_ns_);
    const std::int64_t instance = steps.size() ? spans_[steps.ref[s]].instance : 0;
    for (std::size_t k = 0; k < predicted_ops_.size(); ++k) {
      const double exposed_ns = predicted_ops_[k].exposed_us * 1e3;
      if (exposed_ns <= 0) continue;  // overlapped: adds nothing to the step
      lane.start_ns.push_back(std::llround(t_ns));
      lane.end_ns.push_back(std::llround(t_ns + exposed_ns));
      lane.ref.push_back(static_cast<std::uint32_t>(spans_.size()));
      spans_.push_back({op_name[k], static_cast<std::int32_t>(op_name[k]), instance, 0, 0});
      t_ns += exposed_ns;
    }
  }
  finish(&lane);
  span_row_offset_.resize(spans_.size() + 1, span_row_offset_.back());
  kind_of_name_.resize(names_.size(), "other");
  for (std::size_t k = 0; k < predicted_ops_.size(); ++k) kind_of_name_[op_name[k]] = predicted_ops_[k].kind;
}

int TimelineIndex::track_of(TrackKind kind, std::int32_t device) const {
  for (std::size_t k = 0; k < tracks_.size(); ++k) {
    if (tracks_[k].kind == kind && (device == kNone || tracks_[k].device == device)) return static_cast<int>(k);
  }
  return -1;
}

void TimelineIndex::query(int track, std::int64_t t0_ns, std::int64_t t1_ns, double width_px,
                          std::vector<DrawSpan>* out, double min_px) const {
  const TimelineTrack& t = tracks_.at(static_cast<std::size_t>(track));
  if (t1_ns <= t0_ns || width_px <= 0 || t.size() == 0) return;
  const double ns_per_px = static_cast<double>(t1_ns - t0_ns) / width_px;
  const std::int64_t min_ns = std::max<std::int64_t>(1, std::llround(min_px * ns_per_px));
  const auto& start = t.start_ns;
  const auto& end = t.end_ns;
  const auto& max_end = t.max_end_ns;
  const auto first_reaching = [&](std::size_t from, std::size_t to, std::int64_t time) {
    return static_cast<std::size_t>(std::lower_bound(max_end.begin() + static_cast<std::ptrdiff_t>(from),
                                                     max_end.begin() + static_cast<std::ptrdiff_t>(to), time) -
                                    max_end.begin());
  };
  const std::size_t stop =
      static_cast<std::size_t>(std::lower_bound(start.begin(), start.end(), t1_ns) - start.begin());
  // Spans from..to-1 that meet the range: all of them once they start at or after t0.
  const auto meeting = [&](std::size_t from, std::size_t to) {
    std::uint32_t n = 0;
    for (; from < to && start[from] < t0_ns; ++from) n += end[from] >= t0_ns;
    return n + static_cast<std::uint32_t>(to - from);
  };
  std::size_t i = first_reaching(0, stop, t0_ns);
  while (i < stop) {
    if (end[i] < t0_ns) {  // max_end reached t0 through an earlier, longer span
      ++i;
      continue;
    }
    if (end[i] - start[i] >= min_ns) {
      out->push_back({start[i], end[i], 1, static_cast<std::uint32_t>(i)});
      ++i;
      continue;
    }
    // A run of narrow spans: it takes every span that ends within a pixel of its end, then the next narrow span
    // if it starts within a pixel; each round moves the run's end on by at least a pixel. Its end can lie up to
    // a pixel past its last span's (the prefix maximum may hold an earlier span's end).
    DrawSpan run{start[i], end[i], 1, static_cast<std::uint32_t>(i)};
    std::size_t j = i + 1;
    while (j < stop) {
      const std::size_t k = first_reaching(j, stop, run.end_ns + min_ns);
      if (k > j) {
        run.count += meeting(j, k);
        run.end_ns = std::max(run.end_ns, max_end[k - 1]);
        j = k;
      }
      if (j >= stop || end[j] - start[j] >= min_ns || start[j] > run.end_ns + min_ns) break;
      run.count += end[j] >= t0_ns;
      run.end_ns = std::max(run.end_ns, end[j]);
      ++j;
    }
    // max_end can hold an earlier span's end (less than a pixel on): a lone span keeps its own.
    if (run.count == 1) run.end_ns = end[i];
    out->push_back(run);
    i = j;
  }
}

std::int64_t TimelineIndex::span_at(int track, std::int64_t t_ns, std::int64_t tolerance_ns) const {
  const TimelineTrack& t = tracks_.at(static_cast<std::size_t>(track));
  const auto from = std::lower_bound(t.max_end_ns.begin(), t.max_end_ns.end(), t_ns - tolerance_ns);
  const auto to = std::upper_bound(t.start_ns.begin(), t.start_ns.end(), t_ns + tolerance_ns);
  std::int64_t best = -1, best_width = 0, best_distance = 0;
  for (auto k = static_cast<std::size_t>(from - t.max_end_ns.begin());
       k < static_cast<std::size_t>(to - t.start_ns.begin()); ++k) {
    const std::int64_t distance =
        t_ns < t.start_ns[k] ? t.start_ns[k] - t_ns : (t_ns > t.end_ns[k] ? t_ns - t.end_ns[k] : 0);
    if (distance > tolerance_ns) continue;
    const std::int64_t width = t.end_ns[k] - t.start_ns[k];
    if (best < 0 || distance < best_distance || (distance == best_distance && width < best_width)) {
      best = static_cast<std::int64_t>(k), best_width = width, best_distance = distance;
    }
  }
  return best;
}

std::int32_t TimelineIndex::op_of(int track, std::uint32_t i) const {
  const TimelineTrack& t = tracks_.at(static_cast<std::size_t>(track));
  return t.kind == TrackKind::stream ? trace_->op[t.ref[i]] : spans_[t.ref[i]].op;
}

SpanInfo TimelineIndex::info(int track, std::uint32_t i) const {
  const TimelineTrack& t = tracks_.at(static_cast<std::size_t>(track));
  SpanInfo s;
  s.start_ns = t.start_ns.at(i);
  s.end_ns = t.end_ns[i];
  if (t.kind == TrackKind::stream) {
    const std::uint32_t row = t.ref[i];
    s.name = trace_->name_of(row);
    s.op = trace_->op_of(row);
    s.instance = trace_->op_instance[row];
    s.trace_row = row;
    s.event_kind = trace_->kind[row];
  } else {
    const DerivedSpan& d = spans_[t.ref[i]];
    s.name = names_[d.name];
    s.op = d.op == kNone ? std::string() : names_[static_cast<std::size_t>(d.op)];
    s.instance = d.instance;
  }
  return s;
}

const std::string& TimelineIndex::kind_of(std::int32_t op) const {
  if (op == kNone) return kUnattributed;
  return kind_of_name_.at(static_cast<std::size_t>(op));
}

std::size_t TimelineIndex::bytes() const {
  std::size_t b = 0;
  for (const TimelineTrack& t : tracks_) {
    b += (t.start_ns.capacity() + t.end_ns.capacity() + t.max_end_ns.capacity()) * sizeof(std::int64_t) +
         t.ref.capacity() * sizeof(std::uint32_t);
  }
  b += spans_.capacity() * sizeof(DerivedSpan);
  b += (span_row_offset_.capacity() + span_rows_.capacity()) * sizeof(std::uint32_t);
  for (const std::string& n : names_) b += n.capacity();
  return b;
}

}  // namespace k3::gui
