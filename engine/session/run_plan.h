// A GPU run described by the same Scenario as a prediction (docs/scenarios.md#running-a-scenario-on-the-gpu):
// `k3perf run s.yaml` runs on the GPU what `k3perf predict s.yaml` predicts. plan_run maps the
// scenario onto the engine's RunOptions and names the prediction scenarios the run is compared
// with; it needs no GPU, so the mapping and its errors are tested on the CPU.
//   decode scenario   batch and context as given: the first min(prompt_tokens, context) tokens of
//                     each sequence are prefilled for real, the rest of its MLA cache is a synthetic
//                     prefix (engine/runtime/run_loop.h); CUDA graphs as runtime.cuda_graphs;
//   prefill scenario  one sequence's prompt of workload.new_tokens in chunks of
//                     workload.prefill_chunk_tokens, from an empty cache, then a few decode steps;
//   overrides.layers  the engine keeps the same first N layers the prediction keeps;
//   parallelism       tp / ep > 1: the GPU runs rank knobs.rank of the layout (engine/parallel/rank_shape.h),
//                     its shards of random weights, its heads, experts and token share, with every collective
//                     of the op graph recorded by the emulated communicator; `memory` is its memory plan.
// What the engine cannot run (pp > 1, sequence parallelism, attention_dp > 1, a verify phase, an fp8
// cache, ...) is an InputError naming the scenario key and its value.
#pragma once

#include "core/scenario.h"
#include "engine/runtime/run_loop.h"

#include <cstdint>
#include <string>
#include <vector>

namespace k3::session {

// How the run is carried out, beyond what the scenario asks.
struct EngineKnobs {
  std::string weights = "random";  // a checkpoint directory, or random[:seed]
  int64_t prompt_tokens = 128;     // tokens prefilled for real per sequence (decode scenarios; capped at the context)
  int decode_tokens = 16;          // decode steps per sequence, at least 2
  int chunk_tokens = 4096;         // prefill chunk of a decode scenario's prompts
  int64_t warmup_tokens = -1;      // the untimed warm-up prefill's length: -1 the whole first prompt, 0 none
  int page_tokens = 64;            // MLA cache page size
  uint64_t prompt_seed = 1;
  bool tile_experts = true;  // MXFP4 experts in the tiled decode layout where they allow it
  int rank = 0;              // the rank of the scenario's layout that this GPU runs (--rank)
};

enum class RunPhase { decode, prefill };
std::string to_string(RunPhase p);

struct RunPlan {
  Scenario scenario;                    // the question, as loaded
  runtime::RunOptions options;          // what the engine runs (no callbacks set)
  RunPhase subject = RunPhase::decode;  // the phase the scenario asks about
  Scenario decode;                      // predicted beside the decode steps: the first step's batch and context
  Scenario prefill;                     // predicted beside one sequence's prefill (the engine prefills eagerly)
  // The rank's weights (its checkpoint shards), MLA latent cache and KDA state as the simulator counts them, for
  // the sequences and tokens the run holds (the device plan adds the layout's alignment and the workspace).
  runtime::MemoryPlan memory;
  const Scenario& prediction_for(RunPhase p) const { return p == RunPhase::prefill ? prefill : decode; }
};

// Throws InputError naming the scenario key for what the engine cannot run.
RunPlan plan_run(const Scenario& scenario, const EngineKnobs& knobs);

// The scenario of a run given by flags alone (`k3perf run --model M ...`): a decode step at batch
// 1 on `hardware` after a prompt of knobs' length; other flags edit it as --set assignments.
// An empty `model` is an InputError (the run needs a model: a scenario, --model, or a checkpoint).
std::string shorthand_scenario_yaml(const std::string& model, const std::string& hardware);
Scenario load_run_scenario(const std::string& scenario_path, const std::string& model, const std::string& hardware,
                           const DataPaths& data, const std::vector<std::string>& sets);

}  // namespace k3::session
