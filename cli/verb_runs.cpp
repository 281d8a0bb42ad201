#include "cli/verb_runs.h"

#include "core/error.h"
#include "core/yaml_reader.h"
#include "profiler/counters/range_counters.h"
#include "profiler/trace/chrome_json.h"
#include "sim/cache/prefill_time.h"
#include "sim/cache/prefix_cache.h"
#include "sim/plan/plan_report.h"
#include "sim/workload/azure_reader.h"
#include "sim/workload/mooncake_reader.h"
#include "sim/workload/synthetic.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace k3::verbs {

Scenario load_scenario_text(const std::string& text, const std::string& origin, const DataPaths& data,
                            const std::vector<std::string>& sets) {
  return parse_scenario(text, origin, data, sets);
}

namespace {

// Without a serving file the question must be whole: a request shape, a rate and an SLO.
void check_question(const PlanRequest& r) {
  const plan::PlanQuestion& q = r.question;
  if (q.prefix_hit >= 0 && q.input_tokens <= 0) {
    throw InputError("--prefix-hit: give --isl too (the cached tokens are a fraction of the prompt)");
  }
  if (!r.scenario.empty()) return;
  std::vector<std::string> missing;
  if (q.input_tokens <= 0) missing.push_back("--isl");
  if (q.output_tokens <= 0) missing.push_back("--osl");
  if (q.rate_per_s <= 0) missing.push_back("--rate");
  if (q.ttft_ms <= 0 && q.tpot_ms <= 0) missing.push_back("--ttft-ms or --tpot-ms");
  if (missing.empty()) return;
  throw InputError(
      fmt::format("plan: without a serving file give --isl, --osl, --rate and --ttft-ms and/or "
                  "--tpot-ms (missing: {}); or name a serving YAML (docs/plan.md)",
                  fmt::join(missing, ", ")));
}

}  // namespace

PlanRun run_plan(const PlanRequest& request, const DataPaths& data,
                 const std::function<void(std::size_t, std::size_t)>& progress) {
  check_question(request);
  const std::string file = request.scenario.empty() ? plan::plan_defaults_file(data) : request.scenario;
  // The question's values first, then --set: the more specific edit wins.
  std::vector<std::string> sets = request.question.sets();
  sets.insert(sets.end(), request.sets.begin(), request.sets.end());
  PlanRun run{serving::load_serving_scenario(file, data, sets), {}, {}, {}};
  if (!run.scenario.plan) throw InputError(fmt::format("{}: no 'plan:' section (see docs/plan.md)", file));
  run.space = plan::read_plan_space(*run.scenario.plan, run.scenario);
  const serving::Workload w = serving::serving_workload(run.scenario, &run.trace);
  // A trace is planned for at its own mean rate (after time_scale), a stream at its rate_per_s.
  const double rate_per_s = run.trace ? serving::mean_rate_per_s(w.requests) : run.scenario.requests.rate_per_s;
  plan::Prices prices =
      plan::load_prices(!request.prices_path.empty() ? request.prices_path : data.prices_dir + "/gpu-prices.yaml");
  for (const std::string& p : request.prices) {
    const std::size_t eq = p.find('=');
    double value = 0;
    if (eq == std::string::npos || std::sscanf(p.c_str() + eq + 1, "%lf", &value) != 1 || value <= 0) {
      throw InputError(fmt::format("--price '{}': expected name=dollars per GPU-hour", p));
    }
    prices.per_gpu_hour[p.substr(0, eq)] = value;
    prices.source[p.substr(0, eq)] = "--price";
  }
  run.result = plan::run_plan(run.scenario, run.space, w, rate_per_s, prices, data, progress);
  return run;
}

nlohmann::ordered_json plan_json(const PlanRun& run) { return plan::to_json(run.result, run.space); }

namespace {

StorageFormat storage(const std::string& flag, const std::string& value, const std::vector<std::string>& allowed) {
  StorageFormat f;
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end() || !parse_storage_format(value, &f)) {
    throw InputError(fmt::format("{} '{}': expected one of {}", flag, value, fmt::join(allowed, ", ")));
  }
  return f;
}

std::vector<workload::Request> load_requests(const CacheRequest& o, std::string* label) {
  if (o.trace.empty() == o.workload.empty()) {
    throw InputError("cache: give exactly one of --trace FILE or --workload YAML");
  }
  if (!o.workload.empty()) {
    *label = fmt::format("{} (seed {})", o.workload, o.seed);
    return workload::generate_sessions(workload::parse_session_workload(YamlNode::load_file(o.workload)), o.seed);
  }
  *label = o.trace;
  const auto ends_with = [&](const std::string& s) {
    return o.trace.size() >= s.size() && o.trace.compare(o.trace.size() - s.size(), s.size(), s) == 0;
  };
  if (ends_with(".jsonl")) return workload::read_mooncake_trace(o.trace);
  if (ends_with(".csv")) return workload::read_azure_trace(o.trace);
  throw InputError(fmt::format("{}: expected a Mooncake .jsonl or an Azure .csv trace", o.trace));
}

}  // namespace

CacheRun run_cache(const CacheRequest& o, const DataPaths& data) {
  CacheRun run;
  run.config = o.config;
  if (o.checkpoint_interval_tokens) run.config.checkpoint_params.set("interval_tokens", *o.checkpoint_interval_tokens);
  if (o.marconi_alpha_requests) run.config.eviction_params.set("alpha_requests", *o.marconi_alpha_requests);
  Precision precision;
  if (!o.scenario.empty()) {
    run.deployment = load_scenario(o.scenario, data);
    run.model = run.deployment->model;
    precision = run.deployment->precision;
  } else {
    run.model = load_model_config_by_name(o.model, data.models_dir);
    precision.kda_state = storage("--kda-state", o.kda_state, {"fp32", "bf16"});
    precision.kv_cache = storage("--kv-cache", o.kv_cache, {"bf16", "fp8"});
  }
  if (o.routing != "session" && o.routing != "round_robin") {
    throw InputError(fmt::format("--routing '{}': expected session or round_robin", o.routing));
  }
  run.sizes = cache::cache_sizes(run.model, precision);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const double inf = std::numeric_limits<double>::infinity();
  if (o.hbm_gib && o.hbm_tokens) throw InputError("cache: give --hbm-gib or --hbm-tokens, not both");
  const double hbm = o.hbm_gib ? *o.hbm_gib * kGiB : o.hbm_tokens ? *o.hbm_tokens * run.sizes.kv_bytes_per_token : inf;
  run.config.tiers = {{"hbm", hbm, 0}};
  if (o.dram_gib) run.config.tiers.push_back({"dram", *o.dram_gib * kGiB, o.dram_gb_per_s * 1e9});
  if (o.ssd_gib) run.config.tiers.push_back({"ssd", *o.ssd_gib * kGiB, o.ssd_gb_per_s * 1e9});
  run.config.routing = o.routing == "round_robin" ? cache::Routing::round_robin : cache::Routing::session;
  cache::validate(run.config);

  run.requests = load_requests(o, &run.label);
  run.stats = workload::trace_stats(run.requests);
  run.outcomes = cache::simulate(run.requests, run.config, run.sizes);
  std::optional<cache::PrefillTimeModel> prefill;
  if (run.deployment) prefill.emplace(*run.deployment);
  run.summary = cache::summarize(run.requests, run.outcomes, o.prices, prefill ? &*prefill : nullptr);
  if (o.curve) {
    const std::vector<double> capacities{1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
    run.curve = cache::hit_rate_curve(run.requests, run.config, run.sizes, capacities);
  }
  return run;
}

nlohmann::ordered_json cache_json(const CacheRun& run, const CacheRequest& request) {
  nlohmann::ordered_json json = cache::to_json(run.config, run.sizes, run.summary);
  json["trace"] = {{"source", run.label},
                   {"requests", run.stats.requests},
                   {"mean_input_tokens", run.stats.mean_input_tokens()},
                   {"mean_output_tokens", run.stats.mean_output_tokens()},
                   {"prefix_reuse", run.stats.prefix_reuse}};
  json["model"] = run.model.name;
  if (request.curve) json["curve"] = cache::to_json(run.curve);
  return json;
}

BreakevenRun run_breakeven(const std::string& file, const std::vector<std::string>& sets, const std::string& trace,
                           const DataPaths& data) {
  BreakevenRun run{solve_breakeven(load_breakeven_spec(file, data, sets)), trace, {}};
  if (!trace.empty()) {
    for (const workload::Request& r : workload::read_azure_trace(trace))
      run.trace_input_tokens.push_back(r.input_tokens);
  }
  return run;
}

nlohmann::ordered_json breakeven_json(const BreakevenRun& run) {
  std::vector<double> shares;
  if (!run.trace.empty()) {
    for (const MetricCurve& c : run.result.curves) shares.push_back(losing_share(c, run.trace_input_tokens));
  }
  nlohmann::ordered_json j = to_json(run.result, shares);
  if (!run.trace.empty()) j["trace"] = {{"source", run.trace}, {"requests", run.trace_input_tokens.size()}};
  return j;
}

CompareRun run_compare(const CompareRequest& o, const DataPaths& data) {
  const Hardware hw = load_hardware_by_name(o.hardware, data.hardware_dir);
  if (o.trace.empty() && o.counters.empty()) throw InputError("compare needs --trace, --counters or both");
  CompareRun run;
  run.prediction = std::make_shared<const profiler::PredictionFile>(
      o.prediction_text.empty() ? profiler::load_prediction(o.prediction)
                                : profiler::parse_prediction(o.prediction_text, o.prediction));
  if (!o.trace.empty()) {
    const profiler::Trace trace = profiler::read_trace(o.trace);
    run.mismatches = profiler::shape_mismatches(*run.prediction, trace.metadata);
    if (!run.mismatches.empty() && !o.force) {
      std::string list;
      for (const std::string& m : run.mismatches) list += "\n  " + m;
      throw InputError(
          fmt::format("{} and {} are of different shapes:{}\n(predict the trace's shape, e.g. "
                      "`k3perf run --dry-run --prediction-json` with the run's flags, or pass --force)",
                      o.prediction, o.trace, list));
    }
    run.trace = profiler::compare(*run.prediction, trace, hw);
  }
  if (!o.counters.empty()) {
    run.counters = profiler::compare_counters(*run.prediction, profiler::read_range_counters(o.counters));
  }
  return run;
}

nlohmann::ordered_json compare_json(const CompareRun& run) {
  if (!run.trace) return profiler::to_json(*run.counters);
  nlohmann::ordered_json json = profiler::to_json(*run.trace);
  if (run.counters) json["counters"] = profiler::to_json(*run.counters);
  return json;
}

}  // namespace k3::verbs
