// A dense MLP sublayer on the GPU: gate|up projection (fp32 out), the gated activation, down projection.
// One op of the forward schedule at a time (forward_schedule.h). Also the GLU rows it shares with the MoE
// experts (only one MLP runs at a time).
#pragma once

#include "engine/runtime/device_arena.h"
#include "engine/runtime/forward_context.h"
#include "engine/runtime/forward_schedule.h"

namespace k3::runtime {

// gate|up rows (fp32) and their activation (bf16), sized for every MLP of the model at T tokens: the dense
// MLP's [T, 2I] and, with MoE, the routed slots' [expert_slots, 2I_expert] (T·top_k on one GPU; the rows that may
// arrive under expert parallelism) and T rows of every intermediate.
struct GluScratch {
  float* gate_up = nullptr;
  bf16* act = nullptr;
  void lay_out(const ModelConfig& config, int64_t tokens, int64_t expert_slots, DeviceArena& arena);
};

class DenseMlp {
 public:
  DenseMlp(const ForwardContext& context, const GluScratch& scratch) : ctx_(context), w_(scratch) {}
  // Runs op `id` (mlp.gate_up_proj, mlp.act or mlp.down_proj) of layer `layer`.
  void run(OpId id, const ForwardPass& pass, int layer, const SublayerIo& io) const;

 private:
  const ForwardContext& ctx_;
  const GluScratch& w_;
};

}  // namespace k3::runtime
