// Requests for the serving simulation from a trace file (Mooncake JSONL with prefix hashes, Azure
// CSV without), run through the hybrid KV + KDA-state prefix cache of sim/cache (docs/serving.md#traces):
// each request's cached prefix is the cache's hit, so KV and a state checkpoint must both exist at
// the same block boundary; only the rest of the prompt is prefilled. The cache is one pool over the
// replicas that prefill (the `serving.cache:` section; docs/cache.md for the policies), served in
// arrival order; a trace without hashes (Azure) has nothing to match and runs uncached.
//
// Programs that use this also link k3perf_claims, which compiles the cache and its registered policies.
#pragma once

#include "sim/cache/cache_config.h"
#include "sim/cache/cache_metrics.h"
#include "sim/serving/serving_config.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace k3::serving {

// The `serving.cache:` section (absent: the defaults below with unbounded HBM).
struct ServingCacheOptions {
  bool enabled = true;
  cache::CacheConfig config;  // tiers[0] is the pool's HBM, capacity per prefilling replica
};
ServingCacheOptions read_serving_cache(const ServingScenario& s);

// The trace's requests in arrival order: the first `limit` of them, arrivals times `time_scale`,
// ids 0..n-1. Mooncake when the path ends in .jsonl, Azure when in .csv; anything else is an InputError.
std::vector<workload::Request> read_trace_requests(const RequestSource& src);

struct TraceWorkload {
  Workload workload;  // requests and one cached-prefix count per request (serving_workload moves them out)
  int64_t requests = 0, prompt_tokens = 0, output_tokens = 0;  // the trace as read, for the report
  bool cached = false;                // the prefix cache ran (enabled and the trace has hashes)
  cache::CacheConfig cache_config;    // as it ran (nodes, pooled)
  cache::CacheSummary cache_summary;  // hit rates, recomputed tokens (when `cached`)
};

// Reads the trace of `s.requests` and runs the prefix cache over it as `s`'s cache section says.
TraceWorkload trace_workload(const ServingScenario& s);
// The same on requests already read (tests, benchmarks).
TraceWorkload trace_workload(const ServingScenario& s, std::vector<workload::Request> requests);

// Requests per second over the arrivals: (n − 1) / (last − first arrival); an InputError for fewer
// than two requests or arrivals all at one instant.
double mean_rate_per_s(const std::vector<workload::Request>& requests);

// Two lines for the terminal (the trace, and the cache's hit rates) and the same as JSON.
std::string format_trace(const ServingScenario& s, const TraceWorkload& t);
nlohmann::ordered_json to_json(const ServingScenario& s, const TraceWorkload& t);

// What `k3perf serve` and `k3perf plan` replay: the trace through the cache, or the fixed-rate stream. A trace's
// requests are moved into the result without their block hashes (the prefix cache has used them; the serving
// simulation needs only each request's cached prefix), so a 2-million-request trace is held once, not three times;
// *trace keeps the report's figures and an empty workload.
Workload serving_workload(const ServingScenario& s, std::optional<TraceWorkload>* trace = nullptr);

}  // namespace k3::serving
