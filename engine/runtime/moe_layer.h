// A MoE sublayer on the GPU: the router (scores, top-k, bucketing by expert, all on the device), the routed
// experts and their weighted sum, the shared expert. K3: MXFP4 experts on a latent (latent_down, grouped
// GEMMs, the latent norm, latent_up); a prefill chunk long enough (dequantized_experts) dequantises each
// active expert to bf16 for one cuBLASLt GEMM per expert, with the expert offsets copied to the host (one
// sync), except where the grouped kernels' wgmma GEMM is faster (tiled experts on compute capability 9.0, up to
// kMxfp4GroupedWgmmaMaxAverageSlots per expert: an 8 K-token chunk's 146). Kimi Linear: bf16 experts at hidden width,
// one GEMM per active expert sized on the host (one sync per layer). One op of the forward schedule at a time
// (forward_schedule.h).
//
// On one rank of an expert-parallel layout (ep > 1; K3's latent MoE only) the rank routes its share of the T tokens
// (RankShape::routed_first/count) and holds rank().experts of the experts:
//   moe.router       scores and top-k over all T (as the op graph counts it), the share's slots bucketed by expert;
//   moe.latent_down  the share's rows;
//   moe.dispatch     the share's latent rows gathered in expert (= destination rank) order and sent; the rows that
//                    arrive are bucketed by local expert;
//   moe.experts      the grouped GEMMs over the local experts and the rows that arrived;
//   moe.combine      the outputs back in arrival order, returned to the ranks that sent them;
//   weighted sum / latent norm / latent_up on the share's rows (the other rows of the output are zero: the
//   mlp.all_reduce that follows sums the ranks' shares).
// Which rows go to which rank, and which local expert each arriving row is for, is the seeded uniform router's
// (uniform_routing.h: every rank of the group computes the same exchange, so its counts need no exchange and no
// host synchronisation, and a decode step can be captured). The rank's own scores and top-k run for real and order
// the rows it sends; on an emulated group the rows from peers are stand-ins (emulated_communicator.h).
#pragma once

#include "engine/runtime/dense_mlp.h"
#include "engine/runtime/device_arena.h"
#include "engine/runtime/forward_context.h"
#include "engine/runtime/forward_schedule.h"
#include "kernels/moe_bucket.h"

#include <map>
#include <memory>
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
  // Expert parallelism (ep > 1): the rows sent and received, the received rows' buckets by local expert.
  bf16 *dispatch_send = nullptr, *dispatch_recv = nullptr;  // [share · top_k, z], [recv_capacity, z]
  bf16 *combine_send = nullptr, *combine_recv = nullptr;    // [recv_capacity, z], [share · top_k, z]
  float* recv_ones = nullptr;                               // [recv_capacity] 1.0: unit weights of arrived rows
  kernels::MoeBuckets recv_buckets{};
  void* recv_bucket_ws = nullptr;
  size_t recv_bucket_ws_bytes = 0;
  int64_t recv_capacity = 0;  // rows that may arrive at T tokens
  void lay_out(const ModelConfig& config, const parallel::RankShape& rank, int64_t tokens, DeviceArena& arena);
  // The routed slots the rank's experts compute at T tokens: T · top_k on one GPU, recv_capacity under EP.
  static int64_t expert_slots(const ModelConfig& config, const parallel::RankShape& rank, int64_t tokens);
};

class MoeLayer {
 public:
  // `iota`: device 0, 1, 2, … (at least T · top_k), the down projection's slot rows.
  MoeLayer(const ForwardContext& context, const MoeWorkspace& workspace, const GluScratch& glu, const int32_t* iota)
      : ctx_(context), w_(workspace), glu_(glu), iota_(iota) {}
  // True when a prefill call of `tokens` tokens is long enough to run the MXFP4 routed experts by dequantising each
  // active expert to bf16 and one cuBLASLt GEMM per expert (kernels/mxfp4_grouped_dequantized.h; one host sync per
  // MoE layer): the slots average at least kMxfp4DequantizedMinAverageSlots per expert. The engine takes that path
  // unless the wgmma grouped GEMM is faster (tiled experts on compute capability 9.0, fewer than
  // kMxfp4GroupedWgmmaMaxAverageSlots slots per expert).
  static bool dequantized_experts(const ModelConfig& config, int64_t tokens);

  // Runs op `id` (a moe.* op) of layer `layer`.
  void run(OpId id, const ForwardPass& pass, int layer, const SublayerIo& io);

 private:
  void bf16_experts(const ForwardPass& pass, int layer, const bf16* x);  // routed experts → expert_out, per slot
  void mxfp4_experts_dequantized(const ForwardPass& pass, int layer);    // routed experts → expert_out, per slot
  void mxfp4_experts_grouped(const ForwardPass& pass, int layer);        // routed experts → expert_out, per slot
  // The routing's expert offsets [E + 1], copied to the host (a stream sync) and checked to cover the slots.
  const std::vector<int32_t>& expert_offsets_on_host(int layer, int64_t slots);

  // Expert parallelism: one layer's exchange at T tokens (uniform_exchange), with the arrived rows' local experts on
  // the device; made on first use (an eager call: a captured step finds it made).
  struct Exchange {
    parallel::UniformExchange rows;
    int64_t received = 0;
    std::shared_ptr<int32_t> recv_local_expert;  // device [received]
    std::vector<int32_t> expert_offsets;         // host [local experts + 1] of the arrived rows
  };
  const Exchange& exchange(int layer, int64_t tokens);
  void ep_router(const ForwardPass& pass, int layer, const bf16* x);
  void ep_dispatch(const ForwardPass& pass, int layer);
  void ep_experts(const ForwardPass& pass, int layer);
  void ep_combine(const ForwardPass& pass, int layer);

  const ForwardContext& ctx_;
  const MoeWorkspace& w_;
  const GluScratch& glu_;
  const int32_t* iota_;
  std::vector<int32_t> host_expert_offsets_;
  std::map<std::pair<int, int64_t>, Exchange> exchanges_;
  bool ones_filled_ = false;
};

}  // namespace k3::runtime
