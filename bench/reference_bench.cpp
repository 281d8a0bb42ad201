// Speed of the CPU reference: a 512-token prefill of the K3 twin (2 of its layers), the forward the reference
// tests run. Its unit test checks the result; its time is this benchmark's (timed tests flake on a loaded machine).
#include "engine/reference/checkpoint_loader.h"
#include "engine/weights/synthetic_checkpoint.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

namespace {

void BM_TwinPrefill512(benchmark::State& state) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("k3perf_reference_bench_{}", ::getpid());
  k3::weights::SyntheticCheckpointOptions o;
  o.config_path = K3PERF_SOURCE_DIR "/scenarios/models/k3-twin.json";
  o.out_dir = dir.string();
  o.seed = 2;
  k3::weights::write_synthetic_checkpoint(o);
  const k3::ref::LoadedModel loaded = k3::ref::load_reference_model(dir.string());
  std::vector<int32_t> tokens(512);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37) % loaded.config.vocab_size);
  for (auto _ : state) {
    k3::ref::ModelState model_state = k3::ref::ModelState::empty(loaded.config);
    benchmark::DoNotOptimize(loaded.model.forward(tokens, model_state));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tokens.size()));
  fs::remove_all(dir);
}
BENCHMARK(BM_TwinPrefill512)->Unit(benchmark::kMillisecond);

}  // namespace
