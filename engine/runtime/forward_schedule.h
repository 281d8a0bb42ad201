// The GPU engine's forward as data: for a model and one forward call (a decode batch or a prefill chunk),
// the ordered ops it runs, each an OpId of core/op_names.h at a layer. GpuModel (gpu_model.h) iterates
// exactly this list, opening each op's NVTX range and dispatching it to the code that runs it; the list is
// CUDA-free, so a CPU test checks it against the op graph (tests/engine/runtime/forward_schedule_test.cpp): the
// names the engine emits are the graph's, with each fused op under its host (Op::runs_inside) and the graph's
// engine-only ranges (OpGraph::engine_only) added. On one rank of a TP/EP layout the graph's collectives are in the
// list at the graph's positions (the engine issues them through its communicator); on one GPU there are none.
#pragma once

#include "core/model_config.h"
#include "core/op_names.h"
#include "core/scenario.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace k3::runtime {

// The shapes one GpuModel serves; its workspace is sized for them.
struct ModelRunShape {
  int max_batch = 1;                   // decode sequences per step
  int max_chunk_tokens = 4096;         // prefill tokens per forward call
  int64_t max_prefill_context = 4096;  // prefix + chunk tokens an MLA prefill attends (expanded K/V buffers)
  int page_tokens = 64;                // the cache's (CacheShape)
  int64_t max_context_tokens = 4096;   // the cache's
};

// One forward call: T tokens of a prefill chunk or a decode batch.
struct ForwardPass {
  int64_t tokens = 0;   // T
  bool decode = false;  // a decode batch (one token per sequence in slots 0..T−1) or a prefill chunk
  int sequence = 0;     // prefill: the slot
  int64_t start = 0;    // prefill: tokens cached before this chunk
  bool logits = false;  // prefill: the chunk holds the prompt's last token
};

enum class Sublayer { attention, mlp };
// The sublayer an op belongs to: KDA and MLA ops the attention, dense MLP and MoE ops the MLP; none for
// the residual stream's ops (mixers, norms, residual adds), the embedding and the head.
std::optional<Sublayer> sublayer_of(OpId id);

// True when the sublayer's last GEMM adds its output into the residual stream itself (beta = 1), so that
// no residual op follows: plain residuals (Kimi Linear), untapped and on one GPU (a rank's partial sum is
// all-reduced before the add), except a MoE without latent projections (its routed sum leaves through a
// conversion, not a GEMM). Block AttnRes never folds: f(x) goes through a buffer and then into the partial sum
// (attn.residual, mlp.residual).
bool folds_residual(const ModelConfig& config, int layer, Sublayer sublayer, bool tapped, bool tensor_parallel = false);

// The ops of one forward call, in the order they run; a decode pass ends with decode.advance (the step's
// position update). `tapped`: a forward with a tap (GpuModel::set_tap), whose sublayers never fold.
// `parallelism`: the layout the rank runs in (without pipeline or sequence parallelism): its collectives as the op
// graph places them — embed.all_reduce, attn.all_reduce and mlp.all_reduce after the row-parallel outputs at
// tp > 1, moe.dispatch / moe.combine around the experts at ep > 1, moe.expert_all_reduce after them at moe_tp > 1,
// head.all_gather after the lm_head at tp > 1.
std::vector<OpRef> forward_schedule(const ModelConfig& config, const ForwardPass& pass, bool tapped,
                                    const Parallelism& parallelism = {});

}  // namespace k3::runtime
