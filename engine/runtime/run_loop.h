// `k3perf run`: a K3-family model (or its first N layers) on one GPU with real or random weights —
// prefill `batch` prompts, then decode — timed with CUDA events, per step, and summarised as JSON.
//   1. the memory plan (weights in the device layout, KV pages and KDA state slots, activation
//      workspace) is checked against the free device memory before anything is allocated;
//   2. weights: a checkpoint directory, or "random[:seed]" generated on the GPU;
//   3. each sequence's prompt (seeded random token ids) is prefilled in chunks, after one untimed
//      warm-up prefill of the first prompt;
//   4. with --context C > prompt, each sequence's MLA cache is extended to C tokens with seeded random
//      latents (a synthetic prefix, so that decode at 1 M tokens needs no 1 M-token prefill; the KDA
//      state keeps what the prompt left — its cost does not depend on its values);
//   5. decode: one eager step (warms the GEMM plans), then the step is captured as a CUDA graph and
//      replayed for the remaining steps (or eager throughout with use_cuda_graph = false).
#pragma once

#include "core/model_config.h"
#include "core/scenario.h"
#include "engine/parallel/collective_record.h"
#include "engine/runtime/memory_plan.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace k3::runtime {

struct RunOptions {
  std::string model_path;          // config.json (published form); empty: the checkpoint's config.json
  std::string weights = "random";  // a checkpoint directory, or random[:seed]
  int layers = 0;                  // 0 = every layer of the config; N keeps layers [0, N)
  // "as_published", or "all_mla" / "all_kda": every layer of that attention kind (the simulator's
  // overrides.attention counterfactual, core/model_config.h with_all_attention), random weights only.
  std::string attention = "as_published";
  int64_t prompt_tokens = 128;
  int decode_tokens = 16;  // ≥ 2: one eager step, then graph replays
  int batch = 1;
  int64_t context_tokens = 0;  // 0: decode right after the prompt; C > prompt: synthetic prefix to C
  int chunk_tokens = 4096;     // prefill chunk
  // The untimed warm-up prefill before the timed ones (GEMM plans, kernel loads): -1 the whole first prompt, N its
  // first N tokens (a long prompt's chunk shapes, not its whole length again), 0 none (the first prefill pays).
  int64_t warmup_tokens = -1;
  int page_tokens = 64;
  bool use_cuda_graph = true;
  bool tile_experts = true;  // MXFP4 experts in the tiled layout (DeviceWeights::tile_experts) where they allow it
  uint64_t prompt_seed = 1;
  // One rank of a TP/EP deployment (engine/parallel/rank_shape.h): its shards, its share of the work and every
  // collective of the op graph, recorded by the single-GPU emulated communicator. The default is one GPU.
  Parallelism parallelism;
  int rank = 0;
  std::function<void(const std::string&)> progress;  // progress lines (may be empty)
  // Called right before the first decode step and right after the last (e.g. to start and stop a
  // profiler: the window holds the eager step, the graph capture and every replay). May be empty.
  std::function<void()> before_decode, after_decode;
  // The same around the timed prefills (after the untimed warm-up prefill). May be empty.
  std::function<void()> before_prefill, after_prefill;
  // Called around the launches of each decode step (0 = the eager first step; e.g. to tag them with a
  // profiler's external correlation id). May be empty.
  std::function<void(int step)> begin_step;
  std::function<void()> end_step;
};

struct RunSummary {
  std::string gpu;
  std::string model;
  ModelConfig config;  // as run (sliced to `layers`): the whole model, of which a rank runs its share
  int layers = 0;
  std::string rank;  // RankLayout::describe() of a rank of a TP/EP layout; empty on one GPU
  // At ep > 1: the decode step's tokens this rank routes (its T / tp share) and the most any rank routes. A rank
  // with fewer (rank 0 at batch 1 of TP16) idles through the latent MoE GEMMs that the slowest rank runs.
  int64_t decode_routed_tokens = 0, decode_routed_tokens_max = 0;
  // The collectives one call issued, as recorded by the emulated communicator (not executed): the eager first decode
  // step's and the first timed prefill's (empty on one GPU).
  std::vector<parallel::CollectiveRecord> decode_collectives, prefill_collectives;
  RunOptions options;
  MemoryPlan memory;  // as allocated
  uint64_t free_bytes_before = 0;
  double weights_seconds = 0;          // generating or loading the weights (and tiling the experts)
  int tiled_expert_layers = 0;         // MoE layers whose MXFP4 experts are in the tiled layout
  double warmup_prefill_ms = 0;        // the first prompt once, untimed in prefill_ms (GEMM plans, kernel loads)
  std::vector<double> prefill_ms;      // per sequence (all its chunks)
  double first_decode_step_ms = 0;     // the eager warm-up step
  std::vector<double> decode_step_ms;  // graph replays (or eager steps)
  double median_step_ms = 0, p10_step_ms = 0, p90_step_ms = 0;
  double median_prefill_ms = 0;                 // over prefill_ms
  double decode_tokens_per_s = 0;               // batch / median step
  double prefill_tokens_per_s = 0;              // prompt tokens / prefill time, over all sequences
  std::vector<std::vector<int32_t>> generated;  // per sequence, the greedy tokens
  // What sim/ predicts for the same shapes on a hardware file (filled by the caller; 0 when not).
  std::string predicted_hardware;
  double predicted_step_ms = 0;
  double predicted_prefill_ms = 0;
  double predicted_decode_comm_ms = 0, predicted_prefill_comm_ms = 0;  // their collectives' exposed time
};

// The summary's JSON and text are engine/session/run_session.h's (they need no GPU).
RunSummary run_engine(const RunOptions& options);

}  // namespace k3::runtime
