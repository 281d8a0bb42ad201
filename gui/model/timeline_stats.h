// What the timeline computes over its index: statistics of a time range, search by name, and the distribution
// of one op's instance durations with its outliers. Qt-free.
#pragma once

#include "gui/model/timeline_index.h"

#include <cstdint>
#include <string>
#include <vector>

namespace k3::gui {

struct KindTime {
  std::string kind;  // op kind ("gemm", "moe_experts", ...), "unattributed" for GPU work of no op
  std::int64_t gpu_ns = 0;
  std::size_t events = 0;
};

// The GPU work that meets [t0_ns, t1_ns] (start < t1, end >= t0), its durations clipped to the range.
struct RangeStats {
  std::int64_t t0_ns = 0, t1_ns = 0;
  std::size_t kernels = 0, memcpys = 0, memsets = 0;
  std::int64_t gpu_ns = 0;   // clipped durations summed over every stream
  std::int64_t busy_ns = 0;  // per device the union of its work inside the range, summed over devices
  std::int64_t idle_ns = 0;  // devices × range − busy: no stream of the device runs anything
  int devices = 0;
  std::vector<KindTime> by_kind;  // largest first
};
RangeStats range_stats(const TimelineIndex& index, std::int64_t t0_ns, std::int64_t t1_ns);

struct SpanRef {
  int track = -1;
  std::uint32_t span = 0;
};

// Spans whose name or op contains `text` (ASCII case-insensitive): GPU events by kernel or op name, op spans
// by op name; in start order, at most `max_hits` of them, with `total` counting all.
struct SearchResult {
  std::vector<SpanRef> hits;
  std::size_t total = 0;
};
SearchResult search(const TimelineIndex& index, const std::string& text, std::size_t max_hits = 10000);

// The durations of one op's instances (its spans on the ops tracks: first kernel's start to last one's end).
// Percentiles interpolate linearly between closest ranks. Outliers: slower than p90 + 1.5·IQR or faster than
// p10 − 1.5·IQR (IQR = p75 − p25): the fences sit outside the bulk's own spread, so a steady decode loop with
// sub-microsecond jitter flags only what stands out (a first step that captures graphs, a stalled replay).
struct OpDistribution {
  std::string op;
  std::vector<SpanRef> instances;       // in start order
  std::vector<std::int64_t> sorted_ns;  // durations, ascending
  double min_ns = 0, p10_ns = 0, p25_ns = 0, median_ns = 0, p75_ns = 0, p90_ns = 0, max_ns = 0;
  double low_fence_ns = 0, high_fence_ns = 0;
  std::vector<SpanRef> outliers;  // in start order
  bool empty() const { return sorted_ns.empty(); }
};
OpDistribution op_distribution(const TimelineIndex& index, const std::string& op);

// The p-quantile (0..1) of ascending values, interpolated between closest ranks (numpy's default).
double quantile(const std::vector<std::int64_t>& ascending, double p);

}  // namespace k3::gui
