// The work of the verbs with a JSON output, from their arguments to their result and its JSON, shared by the
// `k3perf` CLI (which prints the result and writes the JSON on --json) and the Python module (python/, which returns
// the JSON as dicts and lists): one function builds each JSON, so the two cannot drift. Inputs that are wrong throw
// InputError naming the flag or file, key and value.
#pragma once

#include "core/scenario.h"
#include "profiler/compare/compare.h"
#include "profiler/counters/compare_counters.h"
#include "sim/cache/cache_config.h"
#include "sim/cache/cache_metrics.h"
#include "sim/plan/breakeven.h"
#include "sim/plan/plan.h"
#include "sim/serving/serving_config.h"
#include "sim/serving/trace_workload.h"
#include "sim/workload/request.h"
#include "sim/workload/trace_stats.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace k3::verbs {

// `predict`: a scenario file, or scenario text (YAML, or JSON, which YAML reads: the Python module passes a dict so)
// named `origin` in messages, with `--set` edits.
Scenario load_scenario_text(const std::string& text, const std::string& origin, const DataPaths& data,
                            const std::vector<std::string>& sets);

// `plan`: a serving file (empty: the flags edit scenarios/serving/plan-defaults.yaml), the one-command question,
// --set edits, and prices (a file, empty: scenarios/prices/gpu-prices.yaml; then name=dollars per GPU-hour).
struct PlanRequest {
  std::string scenario;
  plan::PlanQuestion question;
  std::vector<std::string> sets;
  std::string prices_path;
  std::vector<std::string> prices;
};
struct PlanRun {
  serving::ServingScenario scenario;
  plan::PlanSpace space;
  std::optional<serving::TraceWorkload> trace;
  plan::PlanResult result;
};
PlanRun run_plan(const PlanRequest& request, const DataPaths& data,
                 const std::function<void(std::size_t, std::size_t)>& progress = {});
nlohmann::ordered_json plan_json(const PlanRun& run);

// `cache`: a request trace or a synthetic session workload through the hybrid prefix cache.
struct CacheRequest {
  std::string trace, workload, scenario;
  uint64_t seed = 1;
  std::string model = "kimi-k3";
  std::string kda_state = "fp32", kv_cache = "bf16";
  cache::CacheConfig config;
  std::optional<int64_t> checkpoint_interval_tokens;  // policy parameters (--checkpoint-interval, --marconi-alpha)
  std::optional<double> marconi_alpha_requests;
  std::string routing = "session";
  std::optional<double> hbm_gib, hbm_tokens, dram_gib, ssd_gib;
  double dram_gb_per_s = 50, ssd_gb_per_s = 5;
  cache::Prices prices{0.30, 3.00, 0};
  bool curve = false;  // also the hit rate at 1e4 ... 1e9 tokens of the first tier
};
struct CacheRun {
  std::string label;                   // the trace's path, or the workload's with its seed
  std::optional<Scenario> deployment;  // --scenario: it also gives prefill times
  ModelConfig model;
  cache::CacheConfig config;  // the request's, with its tiers and policy parameters filled in
  cache::CacheSizes sizes;
  std::vector<workload::Request> requests;
  workload::TraceStats stats;
  std::vector<cache::RequestOutcome> outcomes;
  cache::CacheSummary summary;
  std::vector<cache::CurvePoint> curve;  // with CacheRequest::curve
};
CacheRun run_cache(const CacheRequest& request, const DataPaths& data);
nlohmann::ordered_json cache_json(const CacheRun& run, const CacheRequest& request);

// `breakeven`: a break-even file with --set edits of its deployment, and optionally an Azure trace whose prompt
// lengths are counted on each metric's losing side.
struct BreakevenRun {
  BreakevenResult result;
  std::string trace;
  std::vector<long long> trace_input_tokens;  // the trace's prompt lengths
};
BreakevenRun run_breakeven(const std::string& file, const std::vector<std::string>& sets, const std::string& trace,
                           const DataPaths& data);
nlohmann::ordered_json breakeven_json(const BreakevenRun& run);

// `compare`: a prediction against a measured trace and/or counters.
struct CompareRequest {
  std::string prediction;       // a prediction JSON file (k3perf predict --json)
  std::string prediction_text;  // or its text (the Python module passes predict()'s dict so); prediction names it
  std::string trace, counters;
  std::string hardware = "h200-sxm";
  bool force = false;  // compare a prediction and a trace of different shapes
};
struct CompareRun {
  std::shared_ptr<const profiler::PredictionFile> prediction;  // the comparisons point into it
  std::vector<std::string> mismatches;                         // shapes that differ (only with force)
  std::optional<profiler::Comparison> trace;
  std::optional<profiler::CounterComparison> counters;
};
CompareRun run_compare(const CompareRequest& request, const DataPaths& data);
// The trace comparison; with counters too, the counter comparison under its key "counters".
nlohmann::ordered_json compare_json(const CompareRun& run);

}  // namespace k3::verbs
