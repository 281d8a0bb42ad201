// Statistics of a request list that do not depend on any cache: counts, mean lengths, and the
// prefix reuse the trace itself holds (what an unbounded KV cache at the trace's block size hits).
#pragma once

#include "sim/workload/request.h"

#include <vector>

namespace k3::workload {

struct TraceStats {
  int64_t requests = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double duration_ms = 0;  // last arrival - first arrival
  // Prompt tokens in leading blocks whose prefix-chained hash appeared in an earlier request,
  // capped at each prompt's length, over all prompt tokens.
  double prefix_reuse = 0;
  double mean_input_tokens() const { return requests ? double(input_tokens) / requests : 0; }
  double mean_output_tokens() const { return requests ? double(output_tokens) / requests : 0; }
};

TraceStats trace_stats(const std::vector<Request>& requests);

}  // namespace k3::workload
