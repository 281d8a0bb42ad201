#include "sim/workload/trace_stats.h"

#include <algorithm>
#include <unordered_set>

namespace k3::workload {

TraceStats trace_stats(const std::vector<Request>& requests) {
  TraceStats s;
  std::unordered_set<uint64_t> seen;
  int64_t reused = 0;
  for (const Request& r : requests) {
    ++s.requests;
    s.input_tokens += r.input_tokens;
    s.output_tokens += r.output_tokens;
    std::size_t m = 0;
    while (m < r.block_hashes.size() && seen.count(r.block_hashes[m])) ++m;
    reused += std::min<int64_t>(static_cast<int64_t>(m) * r.block_tokens, r.input_tokens);
    seen.insert(r.block_hashes.begin(), r.block_hashes.end());
  }
  if (!requests.empty()) s.duration_ms = requests.back().arrival_ms - requests.front().arrival_ms;
  s.prefix_reuse = s.input_tokens ? double(reused) / double(s.input_tokens) : 0;
  return s;
}

}  // namespace k3::workload
