// A MoE sublayer on the GPU: the router (scores, top-k, bucketing by expert, all on the device), the routed
// experts and their weighted sum, the shared expert. K3: MXFP4 experts on a latent (latent_down, grouped
// GEMMs, the latent norm, latent_up); a prefill chunk long enough (dequantized_experts) dequantises each
// active expert to bf16 for one cuBLASLt GEMM per expert, with the expert offsets copied to the host (one
// sync). Kimi Linear: bf16 experts at hidden width, one GEMM per active expert sized on the host (one sync
// per layer). One op of the forward schedule at a time (forward_schedule.h).
#pragma once

#include "engine/runtime/dense_mlp.h"
#include "engine/runtime/device_arena.h"
#include "engine/runtime/forward_context.h"
#include "engine/runtime/forward_schedule.h"
#include "kernels/moe_bucket.h"

#include <vector>

namespace k3::runtime {

// The MoE's own buffers for T tokens (slots = T · top_k, z = the experts' input width); the GLU rows are
// the shared GluScratch.
struct MoeWorkspace {
  float *router_logits = nullptr, *route_weights = nullptr;  // [T, E], [slots]
  int32_t* expert_ids = nullptr;                             // [slots]
  kernels::MoeBuckets buckets{};
  void* bucket_ws = nullptr;
  size_t bucket_ws_bytes = 0;
  bf16* z_in = nullptr;         // [T, latent]
  bf16* gathered = nullptr;     // each slot's input row, expert-major: bf16 experts [slots, h]; MXFP4 [slots, z]
  bf16* expert_bf16 = nullptr;  // MXFP4 experts dequantised at prefill: one expert's weights, [max(2I·z, z·I)]
  float *expert_out = nullptr, *combined = nullptr;  // [slots, z], [T, z]
  bf16* combined_bf16 = nullptr;                     // [T, latent]
  float* shared_gate_up = nullptr;                   // [T, 2S]
  bf16* shared_act = nullptr;                        // [T, S]
  void lay_out(const ModelConfig& config, int64_t tokens, DeviceArena& arena);
};

class MoeLayer {
 public:
  // `iota`: device 0, 1, 2, … (at least T · top_k), the down projection's slot rows.
  MoeLayer(const ForwardContext& context, const MoeWorkspace& workspace, const GluScratch& glu, const int32_t* iota)
      : ctx_(context), w_(workspace), glu_(glu), iota_(iota) {}
  // True when a prefill call of `tokens` tokens runs the MXFP4 routed experts by dequantising each active expert to
  // bf16 and one cuBLASLt GEMM per expert (kernels/mxfp4_grouped_dequantized.h; one host sync per MoE layer): the
  // slots average at least kMxfp4DequantizedMinAverageSlots per expert.
  static bool dequantized_experts(const ModelConfig& config, int64_t tokens);

  // Runs op `id` (a moe.* op) of layer `layer`.
  void run(OpId id, const ForwardPass& pass, int layer, const SublayerIo& io);

 private:
  void bf16_experts(const ForwardPass& pass, int layer, const bf16* x);  // routed experts → expert_out, per slot
  void mxfp4_experts_dequantized(const ForwardPass& pass, int layer);    // routed experts → expert_out, per slot
  void mxfp4_experts_grouped(const ForwardPass& pass, int layer);        // routed experts → expert_out, per slot
  // The routing's expert offsets [E + 1], copied to the host (a stream sync) and checked to cover the slots.
  const std::vector<int32_t>& expert_offsets_on_host(int layer, int64_t slots);

  const ForwardContext& ctx_;
  const MoeWorkspace& w_;
  const GluScratch& glu_;
  const int32_t* iota_;
  std::vector<int32_t> host_expert_offsets_;
};

}  // namespace k3::runtime
