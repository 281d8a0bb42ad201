// A serving scenario: a deployment (the keys of a core scenario, docs/scenarios.md) plus a
// `serving:` section (replicas, batch limits, SLOs, admission, requests) and, for `k3perf plan`, a
// `plan:` section read by sim/plan. The two sections are read here, so core/scenario stays as is:
// their lines are blanked before the rest goes to parse_scenario, which keeps its line numbers.
// Schema: docs/serving.md#the-serving-section.
#pragma once

#include "core/scenario.h"
#include "core/yaml_reader.h"
#include "sim/serving/simulator.h"
#include "sim/workload/request.h"

#include <optional>
#include <string>
#include <vector>

namespace k3::serving {

// Where the requests come from: a trace file, or a fixed-rate stream of one request shape.
struct RequestSource {
  std::string
      trace_path;     // Mooncake JSONL or Azure CSV (relative: to the serving file); empty for the fixed-rate stream
  int64_t limit = 0;  // first N requests of the trace (0 = all)
  double time_scale = 1.0;  // arrival times multiplied by this (0.5 = twice the rate)
  // Fixed-rate stream: `count` requests, one every 1000 / rate_per_s ms, all of one shape.
  int64_t count = 0;
  double rate_per_s = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens of each that the prefix cache already holds
};

struct ServingScenario {
  Scenario deployment;
  ServingOptions options;
  RequestSource requests;
  std::optional<YamlNode> plan;   // the `plan:` section, when present
  std::optional<YamlNode> cache;  // `serving.cache:`, read by sim/serving/trace_workload.h
};

// `sets` ("key.path=value") edit the file before it is read; serving.* and plan.* ones included.
ServingScenario load_serving_scenario(const std::string& path, const DataPaths& data,
                                      const std::vector<std::string>& sets = {});
ServingScenario parse_serving_scenario(const std::string& yaml_text, const std::string& origin, const DataPaths& data,
                                       const std::vector<std::string>& sets = {});

// Requests in arrival order and, per request, the prompt tokens the prefix cache already holds.
struct Workload {
  std::vector<workload::Request> requests;
  std::vector<int64_t> cached_prefix_tokens;  // one per request, or empty (nothing cached)
  bool from_trace = false;                    // recorded arrivals (bursts and all), not an even stream
};
// The fixed-rate stream (what plan uses for a request rate).
Workload fixed_rate_workload(const RequestSource& source);

}  // namespace k3::serving
