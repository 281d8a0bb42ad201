// moe_router: the K3 sigmoid router (K3-SPEC §5.1) on router logits that a GEMM computed (x · W_rᵀ, fp32).
//   s_e    = sigmoid(logit_e)                                  (fp32, computed as ref::sigmoid: in fp64, rounded)
//   chosen = the top_k experts of s_e + bias_e, in order of decreasing s + bias; ties go to the lower expert id
//            (the bias only selects; a NaN choice value ranks as −∞)
//   w      = s_e / (Σ_chosen s + 1e-20) · routed_scaling_factor; with top_k == 1 there is no renormalisation,
//            w = s_e · routed_scaling_factor (as ref::route and the HF KimiMoEGate)
// Shapes: logits [tokens, experts] fp32 dense; bias [experts] fp32 or null (= zeros); expert_ids int32 and weights
// fp32 [tokens, top_k] dense, in the selection order. 1 ≤ experts ≤ 1024, 1 ≤ top_k ≤ min(32, experts).
// Version: moe_route_block_per_token — one 256-thread block per token; thread t
// owns experts t, t+256, t+512, t+768 in registers as 64-bit keys (order-preserving bits of the choice value, then
// 2^32−1−id: one integer compare is the selection order); each warp takes its own top_k by top_k rounds of a warp
// max (two __reduce_max_sync, on the value half and then on the id half of the lanes holding that value), the
// winner's owner zeroing that key; the block's top_k is then merged from the 8 sorted warp lists by rank (a
// candidate's rank = its place in its list plus, per other list, a binary search for the keys above it). The
// weights are normalised in fp64 across one warp.
// Measurements and the version removed: bench/results/kernel-notes.md (moe_router).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kMoeRouterMaxExperts = 1024;
inline constexpr int kMoeRouterMaxTopK = 32;

cudaError_t moe_route_topk_sigmoid(const float* logits, const float* bias, int tokens, int experts, int top_k,
                                   float routed_scaling_factor, int32_t* expert_ids, float* weights,
                                   cudaStream_t stream);

}  // namespace k3::kernels
