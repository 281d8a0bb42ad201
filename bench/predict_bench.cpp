// Simulator speed: one full K3 decode-step prediction, and a 10,000-scenario sweep
// (context x batch x TP x hardware). Targets: <= 1 ms per prediction, <= 5 s per sweep.
#include "core/scenario.h"
#include "sim/predict.h"

#include <benchmark/benchmark.h>

#include <vector>

namespace {

k3::Scenario k3_default() {
  const k3::DataPaths data = k3::DataPaths::resolve(std::string(K3PERF_SOURCE_DIR) + "/scenarios");
  return k3::load_scenario(std::string(K3PERF_SOURCE_DIR) + "/scenarios/k3-gb300-tp8-decode-128k.yaml", data);
}

void BM_K3DecodePrediction(benchmark::State& state) {
  const k3::Scenario s = k3_default();
  for (auto _ : state) {
    k3::Prediction p = k3::predict(s);
    benchmark::DoNotOptimize(p.step.step_us);
  }
  state.SetLabel(std::to_string(k3::predict(s).graph.ops.size()) + " ops");
}
BENCHMARK(BM_K3DecodePrediction)->Unit(benchmark::kMicrosecond);

void BM_Sweep10000Scenarios(benchmark::State& state) {
  const k3::DataPaths data = k3::DataPaths::resolve(std::string(K3PERF_SOURCE_DIR) + "/scenarios");
  const k3::Scenario base = k3_default();
  std::vector<k3::Hardware> hardware;
  for (const char* name : {"h100-sxm", "h200-sxm", "b200", "b300", "gb300-nvl72"}) {
    hardware.push_back(k3::load_hardware_by_name(name, data.hardware_dir));
  }
  const int tps[] = {1, 2, 4, 8};
  std::vector<long long> contexts;
  for (long long c = 1024; c <= 1048576 && contexts.size() < 10; c *= 2) contexts.push_back(c);
  std::vector<long long> batches;
  for (long long b = 1; batches.size() < 50; ++b) batches.push_back(b * 4);
  long long count = 0;
  for (auto _ : state) {
    count = 0;
    double total_ms = 0;
    for (const k3::Hardware& hw : hardware) {
      for (int tp : tps) {
        for (long long ctx : contexts) {
          for (long long batch : batches) {
            k3::Scenario s = base;
            s.hardware = hw;
            s.parallelism = k3::Parallelism{tp, 1, tp, 1};
            s.phase = k3::Phase::decode(batch, ctx);
            total_ms += k3::predict(s).step_ms();
            ++count;
          }
        }
      }
    }
    benchmark::DoNotOptimize(total_ms);
  }
  state.counters["scenarios"] = static_cast<double>(count);
}
BENCHMARK(BM_Sweep10000Scenarios)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
