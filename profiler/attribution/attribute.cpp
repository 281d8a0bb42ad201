#include "profiler/attribution/attribute.h"

#include "core/error.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>

namespace k3::profiler {

namespace {

struct Range {
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = std::numeric_limits<std::int64_t>::max();  // until closed
  std::int64_t thread = 0;
};

// The NVTX ranges of one host thread, sorted by start, each with the latest-started range still
// open when it began (its parent), so the innermost range at a time is found by walking parents
// from the last range started by then: O(depth) per query for nested ranges.
class ThreadRanges {
 public:
  void add(std::size_t range_index, const Range& r) { order_.push_back({r.start_ns, range_index}); }

  void finish(const std::vector<Range>& ranges) {
    std::stable_sort(order_.begin(), order_.end());
    parent_.assign(order_.size(), -1);
    for (std::size_t i = 0; i < order_.size(); ++i) {
      parent_[i] = enclosing(static_cast<long>(i) - 1, ranges[order_[i].second].start_ns, ranges);
    }
  }

  // The innermost range open at `t` (start <= t < end), as an index into the ranges, or -1.
  long innermost(std::int64_t t, const std::vector<Range>& ranges) const {
    const auto after = std::upper_bound(
        order_.begin(), order_.end(), std::pair<std::int64_t, std::size_t>{t, std::numeric_limits<std::size_t>::max()});
    const long k = enclosing(static_cast<long>(after - order_.begin()) - 1, t, ranges);
    return k < 0 ? -1 : static_cast<long>(order_[k].second);
  }

 private:
  long enclosing(long k, std::int64_t t, const std::vector<Range>& ranges) const {
    while (k >= 0 && ranges[order_[k].second].end_ns <= t) k = parent_[k];
    return k;
  }

  std::vector<std::pair<std::int64_t, std::size_t>> order_;  // (start, range index)
  std::vector<long> parent_;
};

// Pairs markers into ranges: push/pop per thread (LIFO), start/end by id.
std::vector<Range> pair_markers(const std::vector<MarkerActivity>& markers, AttributionReport* report) {
  std::vector<Range> ranges;
  std::unordered_map<std::int64_t, std::vector<std::size_t>> stacks;  // thread -> open pushes
  std::unordered_map<std::uint64_t, std::size_t> open_by_id;
  for (const MarkerActivity& m : markers) {
    switch (m.phase) {
      case MarkerPhase::push:
      case MarkerPhase::start: {
        ranges.push_back(Range{m.name, m.timestamp_ns, std::numeric_limits<std::int64_t>::max(), m.thread});
        if (m.phase == MarkerPhase::push) {
          stacks[m.thread].push_back(ranges.size() - 1);
        } else if (!open_by_id.emplace(m.id, ranges.size() - 1).second) {
          ++report->unmatched_markers;  // a second start with an open id: keep the first
          ranges.pop_back();
        }
        break;
      }
      case MarkerPhase::pop: {
        auto it = stacks.find(m.thread);
        if (it == stacks.end() || it->second.empty()) {
          ++report->unmatched_markers;
          break;
        }
        ranges[it->second.back()].end_ns = std::max(m.timestamp_ns, ranges[it->second.back()].start_ns);
        it->second.pop_back();
        break;
      }
      case MarkerPhase::end: {
        auto it = open_by_id.find(m.id);
        if (it == open_by_id.end()) {
          ++report->unmatched_markers;
          break;
        }
        ranges[it->second].end_ns = std::max(m.timestamp_ns, ranges[it->second].start_ns);
        open_by_id.erase(it);
        break;
      }
    }
  }
  for (const Range& r : ranges) report->unclosed_ranges += r.end_ns == std::numeric_limits<std::int64_t>::max();
  return ranges;
}

// A program's step range: "step N" (the engine's) or "ProfilerStep#N" (PyTorch's profiler); sets *number.
bool parse_step_range(const std::string& name, std::uint64_t* number) {
  for (const std::string_view prefix : {std::string_view("step "), std::string_view("ProfilerStep#")}) {
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string_view digits = std::string_view(name).substr(prefix.size());
    if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    *number = std::stoull(std::string(digits));
    return true;
  }
  return false;
}

// Where a piece of GPU work's op came from: a range (id = range index) or a graph launch
// (id = the launch's correlation id).
struct InstanceKey {
  std::string op;
  bool graph = false;
  std::uint64_t id = 0;
  bool operator<(const InstanceKey& o) const { return std::tie(op, graph, id) < std::tie(o.op, o.graph, o.id); }
};

}  // namespace

void write_report_metadata(const AttributionReport& r, Trace* t) {
  const auto count = [&](const char* key, std::uint64_t n) { t->set_integer(key, static_cast<std::int64_t>(n)); };
  count("kernels", r.kernels);
  count("kernels_attributed_through_ranges", r.attributed_through_ranges);
  count("kernels_attributed_through_graph_nodes", r.attributed_through_graph_nodes);
  count("unattributed_kernels_without_launch_record", r.without_launch_record);
  count("unattributed_kernels_outside_op_ranges", r.outside_op_ranges);
  count("unattributed_kernels_graph_node_not_captured", r.graph_node_not_captured);
  count("unmatched_markers", r.unmatched_markers);
  count("unclosed_ranges", r.unclosed_ranges);
  count("dropped_records", r.dropped_records);
  count("steps", r.steps);
  count("kernels_in_steps", r.kernels_in_steps);
}

Attribution attribute(const ActivityRecords& rec) {
  Attribution out;
  AttributionReport& report = out.report;
  report.dropped_records = rec.dropped_records;

  // Step ranges are not ops: they mark which launches belong to which step (when the program pushes no
  // external correlation ids), and the step track shows them on the GPU's time.
  std::vector<Range> ranges, step_ranges;
  std::vector<std::uint64_t> step_numbers;
  for (Range& r : pair_markers(rec.markers, &report)) {
    std::uint64_t n = 0;
    if (parse_step_range(r.name, &n)) {
      step_ranges.push_back(std::move(r));
      step_numbers.push_back(n);
    } else {
      ranges.push_back(std::move(r));
    }
  }
  std::int64_t last_ns = 0;  // the trace's end, where unclosed ranges are drawn to
  for (const Range& r : ranges) last_ns = std::max(last_ns, r.start_ns);
  for (const auto& k : rec.kernels) last_ns = std::max(last_ns, k.end_ns);
  for (const auto& m : rec.memory) last_ns = std::max(last_ns, m.end_ns);
  for (const auto& a : rec.api_calls) last_ns = std::max(last_ns, a.end_ns);

  std::unordered_map<std::int64_t, ThreadRanges> by_thread, steps_by_thread;
  for (std::size_t i = 0; i < ranges.size(); ++i) by_thread[ranges[i].thread].add(i, ranges[i]);
  for (auto& [thread, tr] : by_thread) tr.finish(ranges);
  for (std::size_t i = 0; i < step_ranges.size(); ++i) steps_by_thread[step_ranges[i].thread].add(i, step_ranges[i]);
  for (auto& [thread, tr] : steps_by_thread) tr.finish(step_ranges);
  std::unordered_map<std::uint64_t, const ApiActivity*> api_by_correlation;
  for (const ApiActivity& a : rec.api_calls) api_by_correlation.emplace(a.correlation, &a);

  // The innermost range open on the thread of the API call with this correlation id, or -1; sets
  // *no_launch when the API record is missing.
  auto range_of_launch = [&](std::uint64_t correlation, bool* no_launch) -> long {
    const auto api = api_by_correlation.find(correlation);
    *no_launch = api == api_by_correlation.end();
    if (*no_launch) return -1;
    const auto tr = by_thread.find(api->second->thread);
    return tr == by_thread.end() ? -1 : tr->second.innermost(api->second->start_ns, ranges);
  };

  for (const GraphNodeCapture& c : rec.graph_node_captures) {
    bool no_launch = false;
    const long r = range_of_launch(c.correlation, &no_launch);
    if (r >= 0) out.graph_node_ops[c.node] = ranges[r].name;
  }
  for (const GraphNodeClone& c : rec.graph_node_clones) {
    const auto it = out.graph_node_ops.find(c.original);
    if (it != out.graph_node_ops.end()) out.graph_node_ops[c.clone] = it->second;
  }

  // First pass: each piece of GPU work's instance key (or none) and the first time seen per key.
  struct Work {
    Event event;
    std::optional<InstanceKey> key;
  };
  std::vector<Work> work;
  work.reserve(rec.kernels.size() + rec.memory.size());
  std::map<InstanceKey, std::int64_t> first_ns;
  auto attribute_one = [&](Event e, bool is_kernel) {
    std::optional<InstanceKey> key;
    if (e.graph_node != 0) {
      const auto it = out.graph_node_ops.find(e.graph_node);
      if (it != out.graph_node_ops.end()) {
        key = InstanceKey{it->second, true, e.correlation};
        if (is_kernel) ++report.attributed_through_graph_nodes;
      } else if (is_kernel) {
        ++report.graph_node_not_captured;
      }
    } else {
      bool no_launch = false;
      const long r = range_of_launch(e.correlation, &no_launch);
      if (r >= 0) {
        key = InstanceKey{ranges[r].name, false, static_cast<std::uint64_t>(r)};
        if (is_kernel) ++report.attributed_through_ranges;
      } else if (is_kernel) {
        ++(no_launch ? report.without_launch_record : report.outside_op_ranges);
      }
    }
    if (key) {
      const std::int64_t t = key->graph ? e.start_ns : ranges[key->id].start_ns;
      auto [it, inserted] = first_ns.emplace(*key, t);
      if (!inserted) it->second = std::min(it->second, t);
    }
    work.push_back({std::move(e), std::move(key)});
  };
  for (const KernelActivity& k : rec.kernels) {
    K3_CHECK(k.end_ns >= k.start_ns, "kernel '{}' ends before it starts", k.name);
    ++report.kernels;
    attribute_one(Event{EventKind::kernel, k.name, k.start_ns, k.end_ns, k.device, k.stream, kNone, k.correlation,
                        k.graph_node, 0, "", kNone},
                  true);
  }
  for (const MemoryActivity& m : rec.memory) {
    attribute_one(Event{m.is_set ? EventKind::memset : EventKind::memcpy, m.name, m.start_ns, m.end_ns, m.device,
                        m.stream, kNone, m.correlation, m.graph_node, m.bytes, "", kNone},
                  false);
  }

  // Instance numbers: per op, its keys in order of first time.
  std::map<std::string, std::vector<std::pair<std::int64_t, InstanceKey>>> per_op;
  for (const auto& [key, t] : first_ns) per_op[key.op].push_back({t, key});
  std::map<InstanceKey, std::int64_t> instance;
  for (auto& [op, keys] : per_op) {
    std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < keys.size(); ++i) instance[keys[i].second] = static_cast<std::int64_t>(i);
  }

  Trace& t = out.trace;
  t.reserve(work.size() + rec.api_calls.size() + ranges.size());
  for (Work& w : work) {
    if (w.key) {
      w.event.op = w.key->op;
      w.event.op_instance = instance.at(*w.key);
    }
    t.add(w.event);
  }
  for (const ApiActivity& a : rec.api_calls) {
    t.add(Event{EventKind::api, a.name, a.start_ns, std::max(a.end_ns, a.start_ns), kNone, kNone, a.thread,
                a.correlation, 0, 0, "", kNone});
  }
  for (const SyncActivity& w : rec.synchronizations) {  // on the waiting call's thread, as a host event
    const auto api = api_by_correlation.find(w.correlation);
    t.add(Event{EventKind::api, w.name, w.start_ns, std::max(w.end_ns, w.start_ns), kNone, kNone,
                api == api_by_correlation.end() ? 0 : api->second->thread, w.correlation, 0, 0, "", kNone});
  }
  for (const Range& r : ranges) {
    const std::int64_t end =
        r.end_ns == std::numeric_limits<std::int64_t>::max() ? std::max(last_ns, r.start_ns) : r.end_ns;
    t.add(Event{EventKind::range, r.name, r.start_ns, end, kNone, kNone, r.thread, 0, 0, 0, "", kNone});
  }
  // Steps: the span of the GPU work each step's launches made. A launch's step is its external correlation id
  // when the program pushed them, else the step range open on its thread when it was called (graph replays
  // included: their kernels share the launch's correlation id).
  std::unordered_map<std::uint64_t, std::uint64_t> step_of_correlation;
  for (const ExternalCorrelation& x : rec.external_correlations) step_of_correlation[x.correlation] = x.external_id;
  if (step_of_correlation.empty()) {
    for (const auto& [correlation, api] : api_by_correlation) {
      const auto tr = steps_by_thread.find(api->thread);
      const long k = tr == steps_by_thread.end() ? -1 : tr->second.innermost(api->start_ns, step_ranges);
      if (k >= 0) step_of_correlation[correlation] = step_numbers[k];
    }
  }
  std::map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> step_span;
  for (const Work& w : work) {
    const auto it = step_of_correlation.find(w.event.correlation);
    if (w.event.correlation == 0 || it == step_of_correlation.end()) continue;
    auto [span, inserted] = step_span.emplace(it->second, std::pair{w.event.start_ns, w.event.end_ns});
    if (!inserted) {
      span->second.first = std::min(span->second.first, w.event.start_ns);
      span->second.second = std::max(span->second.second, w.event.end_ns);
    }
    report.kernels_in_steps += w.event.kind == EventKind::kernel;
  }
  report.steps = step_span.size();
  for (const auto& [step, span] : step_span) {
    t.add(Event{EventKind::range, "step " + std::to_string(step), span.first, span.second, kNone, kNone,
                kStepTrackThread, 0, 0, 0, "", kNone});
  }
  t.metadata = rec.metadata;
  t.integer_keys = rec.integer_keys;
  write_report_metadata(report, &t);
  t.sort();
  return out;
}

}  // namespace k3::profiler
