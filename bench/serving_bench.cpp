// Serving simulation speed (docs/serving.md#speed): the Mooncake conversation trace (12,031 requests)
// through the hybrid prefix cache and the serving simulation, and a capacity-plan search over 1,080
// configurations. Targets: <= 2 s for the trace, <= 10 s for 1,000 configurations.
#include "sim/plan/plan.h"
#include "sim/serving/serving_config.h"
#include "sim/serving/simulator.h"
#include "sim/serving/trace_workload.h"

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace {

const std::string kSource = K3PERF_SOURCE_DIR;

k3::DataPaths data() { return k3::DataPaths::resolve(kSource + "/scenarios"); }

void BM_ReadMooncakeTrace(benchmark::State& state) {
  const k3::serving::ServingScenario s =
      k3::serving::load_serving_scenario(kSource + "/scenarios/serving/k3-h200x16-mooncake.yaml", data());
  for (auto _ : state) {
    std::vector<k3::workload::Request> r = k3::serving::read_trace_requests(s.requests);
    benchmark::DoNotOptimize(r.data());
  }
}
BENCHMARK(BM_ReadMooncakeTrace)->Unit(benchmark::kMillisecond);

// The prefix cache alone over the trace (read once).
void BM_MooncakeTracePrefixCache(benchmark::State& state) {
  const k3::serving::ServingScenario s =
      k3::serving::load_serving_scenario(kSource + "/scenarios/serving/k3-h200x16-mooncake.yaml", data());
  const std::vector<k3::workload::Request> requests = k3::serving::read_trace_requests(s.requests);
  for (auto _ : state) {
    const k3::serving::TraceWorkload t = k3::serving::trace_workload(s, requests);
    benchmark::DoNotOptimize(t.cache_summary.hit_tokens);
  }
}
BENCHMARK(BM_MooncakeTracePrefixCache)->Unit(benchmark::kMillisecond);

// The trace (read once) through the cache, then the replica model built and the simulation run;
// argument 0 turns the decode-step memo off (every unit evaluated on every step, the same results).
void BM_MooncakeTraceCacheAndServing(benchmark::State& state) {
  const k3::serving::ServingScenario s =
      k3::serving::load_serving_scenario(kSource + "/scenarios/serving/k3-h200x16-mooncake.yaml", data());
  const std::vector<k3::workload::Request> requests = k3::serving::read_trace_requests(s.requests);
  int64_t iterations = 0;
  for (auto _ : state) {
    const k3::serving::TraceWorkload t = k3::serving::trace_workload(s, requests);
    k3::serving::ReplicaModel model(s.deployment, s.options.limits.max_batched_tokens);
    model.step.set_decode_memo(state.range(0) != 0);
    const k3::serving::ServingResult r =
        k3::serving::simulate(t.workload.requests, t.workload.cached_prefix_tokens, model, s.options);
    iterations = r.iterations;
    benchmark::DoNotOptimize(r.ttft_ms.p99);
  }
  state.SetLabel(std::to_string(requests.size()) + " requests, " + std::to_string(iterations) + " iterations");
}
BENCHMARK(BM_MooncakeTraceCacheAndServing)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);

// 3 hardware x 3 attention DP x 3 EP x 5 batch limits x 2 token budgets x (aggregated + 3 P:D ratios).
void BM_PlanSearch1080(benchmark::State& state) {
  const k3::serving::ServingScenario s = k3::serving::load_serving_scenario(
      kSource + "/scenarios/serving/k3-h200x16-chat.yaml", data(),
      {"plan.hardware=[h200-sxm, b200, b300]", "plan.attention_dp=[1, 2, 4]", "plan.ep=[8, 16, 32]",
       "plan.max_sequences=[16, 32, 64, 128, 256]", "plan.max_batched_tokens=[4096, 8192]",
       "plan.modes=[aggregated, disaggregated]", "plan.pd_ratios=['1:1', '1:2', '2:1']"});
  const k3::plan::PlanSpace space = k3::plan::read_plan_space(*s.plan, s);
  const k3::serving::Workload w = k3::serving::fixed_rate_workload(s.requests);
  const k3::plan::Prices prices = k3::plan::load_prices(kSource + "/scenarios/prices/gpu-prices.yaml");
  std::size_t candidates = 0, feasible = 0;
  for (auto _ : state) {
    const k3::plan::PlanResult r = k3::plan::run_plan(s, space, w, s.requests.rate_per_s, prices, data());
    candidates = r.candidates.size();
    feasible = r.ranked.size();
    benchmark::DoNotOptimize(r.pareto.data());
  }
  state.SetLabel(std::to_string(candidates) + " configurations, " + std::to_string(feasible) + " feasible");
}
BENCHMARK(BM_PlanSearch1080)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
