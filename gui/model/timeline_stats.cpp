#include "gui/model/timeline_stats.h"

#include "core/error.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace k3::gui {
namespace {

using profiler::EventKind;
using profiler::kNone;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Spans of track t that meet [t0, t1]: from the first whose prefix-max end reaches t0 to the last starting before t1.
template <typename F>
void for_each_meeting(const TimelineTrack& t, std::int64_t t0, std::int64_t t1, F&& f) {
  const auto from = std::lower_bound(t.max_end_ns.begin(), t.max_end_ns.end(), t0) - t.max_end_ns.begin();
  const auto to = std::lower_bound(t.start_ns.begin(), t.start_ns.end(), t1) - t.start_ns.begin();
  for (auto k = from; k < to; ++k) {
    if (t.end_ns[static_cast<std::size_t>(k)] >= t0) f(static_cast<std::uint32_t>(k));
  }
}

}  // namespace

RangeStats range_stats(const TimelineIndex& index, std::int64_t t0_ns, std::int64_t t1_ns) {
  RangeStats r;
  r.t0_ns = t0_ns;
  r.t1_ns = t1_ns;
  if (t1_ns <= t0_ns) return r;
  const profiler::Trace& trace = index.trace();
  std::map<std::string, KindTime> by_kind;
  std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::int64_t>>> intervals;  // per device
  for (const TimelineTrack& t : index.tracks()) {
    if (t.kind != TrackKind::stream) continue;
    auto& device = intervals[t.device];
    for_each_meeting(t, t0_ns, t1_ns, [&](std::uint32_t k) {
      const std::uint32_t row = t.ref[k];
      const std::int64_t a = std::max(t.start_ns[k], t0_ns), b = std::min(t.end_ns[k], t1_ns);
      const EventKind kind = trace.kind[row];
      r.kernels += kind == EventKind::kernel;
      r.memcpys += kind == EventKind::memcpy;
      r.memsets += kind == EventKind::memset;
      r.gpu_ns += b - a;
      KindTime& kt = by_kind[index.kind_of(trace.op[row])];
      kt.gpu_ns += b - a;
      ++kt.events;
      device.emplace_back(a, b);
    });
  }
  for (auto& [device, spans] : intervals) {
    ++r.devices;
    std::sort(spans.begin(), spans.end());
    std::int64_t covered_to = t0_ns;
    for (const auto& [a, b] : spans) {
      if (b <= covered_to) continue;
      r.busy_ns += b - std::max(a, covered_to);
      covered_to = b;
    }
  }
  r.idle_ns = static_cast<std::int64_t>(r.devices) * (t1_ns - t0_ns) - r.busy_ns;
  for (auto& [kind, kt] : by_kind) {
    kt.kind = kind;
    r.by_kind.push_back(kt);
  }
  std::stable_sort(r.by_kind.begin(), r.by_kind.end(),
                   [](const KindTime& a, const KindTime& b) { return a.gpu_ns > b.gpu_ns; });
  return r;
}

SearchResult search(const TimelineIndex& index, const std::string& text, std::size_t max_hits) {
  SearchResult result;
  if (text.empty()) return result;
  const std::string needle = lower(text);
  std::vector<char> matches(index.names().size());
  for (std::size_t n = 0; n < matches.size(); ++n) {
    matches[n] = lower(index.names()[n]).find(needle) != std::string::npos;
  }
  const profiler::Trace& trace = index.trace();
  std::vector<std::pair<std::int64_t, SpanRef>> found;
  for (std::size_t tr = 0; tr < index.tracks().size(); ++tr) {
    const TimelineTrack& t = index.tracks()[tr];
    if (t.kind != TrackKind::stream && t.kind != TrackKind::ops) continue;
    for (std::uint32_t k = 0; k < t.size(); ++k) {
      bool hit;
      if (t.kind == TrackKind::stream) {
        const std::uint32_t row = t.ref[k];
        hit = matches[trace.name[row]] || (trace.op[row] != kNone && matches[static_cast<std::size_t>(trace.op[row])]);
      } else {
        hit = matches[index.spans()[t.ref[k]].name];
      }
      if (!hit) continue;
      ++result.total;
      found.push_back({t.start_ns[k], {static_cast<int>(tr), k}});
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t k = 0; k < found.size() && k < max_hits; ++k) result.hits.push_back(found[k].second);
  return result;
}

double quantile(const std::vector<std::int64_t>& ascending, double p) {
  K3_CHECK(!ascending.empty() && p >= 0 && p <= 1, "quantile {} of {} values", p, ascending.size());
  const double pos = p * static_cast<double>(ascending.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, ascending.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return static_cast<double>(ascending[lo]) + frac * static_cast<double>(ascending[hi] - ascending[lo]);
}

OpDistribution op_distribution(const TimelineIndex& index, const std::string& op) {
  OpDistribution d;
  d.op = op;
  const std::int32_t name = index.find_name(op);
  if (name == kNone) return d;
  std::vector<std::pair<std::int64_t, SpanRef>> found;
  for (std::size_t tr = 0; tr < index.tracks().size(); ++tr) {
    const TimelineTrack& t = index.tracks()[tr];
    if (t.kind != TrackKind::ops) continue;
    for (std::uint32_t k = 0; k < t.size(); ++k) {
      if (index.spans()[t.ref[k]].op == name) found.push_back({t.start_ns[k], {static_cast<int>(tr), k}});
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [start, ref] : found) {
    d.instances.push_back(ref);
    const TimelineTrack& t = index.tracks()[static_cast<std::size_t>(ref.track)];
    d.sorted_ns.push_back(t.end_ns[ref.span] - t.start_ns[ref.span]);
  }
  if (d.sorted_ns.empty()) return d;
  std::sort(d.sorted_ns.begin(), d.sorted_ns.end());
  d.min_ns = static_cast<double>(d.sorted_ns.front());
  d.max_ns = static_cast<double>(d.sorted_ns.back());
  d.p10_ns = quantile(d.sorted_ns, 0.10);
  d.p25_ns = quantile(d.sorted_ns, 0.25);
  d.median_ns = quantile(d.sorted_ns, 0.50);
  d.p75_ns = quantile(d.sorted_ns, 0.75);
  d.p90_ns = quantile(d.sorted_ns, 0.90);
  const double iqr_ns = d.p75_ns - d.p25_ns;
  d.high_fence_ns = d.p90_ns + 1.5 * iqr_ns;
  d.low_fence_ns = d.p10_ns - 1.5 * iqr_ns;
  for (const SpanRef& ref : d.instances) {
    const TimelineTrack& t = index.tracks()[static_cast<std::size_t>(ref.track)];
    const auto ns = static_cast<double>(t.end_ns[ref.span] - t.start_ns[ref.span]);
    if (ns > d.high_fence_ns || ns < d.low_fence_ns) d.outliers.push_back(ref);
  }
  return d;
}

}  // namespace k3::gui
