// kda_output_gate: the KDA layer's gated output norm (K3-SPEC §3.6), between the delta rule and o_proj:
//   out[t, h·d + i] = o[t, h·d + i] / sqrt(mean_i o[t, h·d + i]² + eps) · w[i] · sigmoid(gate[t, h·d + i])
// As ref::kda_layer step 5. Shapes: o [tokens, heads·d] fp32 (the delta-rule output); w [d] fp32 (o_norm,
// shared by all heads); gate [tokens, heads·d] bf16 (W_g x, before the sigmoid; its own row stride);
// out [tokens, heads·d] bf16 (the o_proj input). fp32 arithmetic; d ≤ 1024.
// Versions (KdaOutputGateAlgorithm):
//   block_per_token_head (automatic below kKdaOutputGateWarpPairs (token, head) pairs): one block of d threads
//     (rounded up to a warp) per (token, head), one block-wide sum of squares: the shorter chain at decode;
//   warp_per_token_head (automatic from kKdaOutputGateWarpPairs pairs): one warp per (token, head), 8 per block; lane l
//     takes channels l + 32j, the sum of squares is a warp sum, and o is read a second time (from the L1) for the
//     output: no block barrier, faster once there are enough pairs to fill the SMs.
// Measurements: bench/results/kernel-notes.md (kda_output_gate).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

enum class KdaOutputGateAlgorithm { automatic, block_per_token_head, warp_per_token_head };
// From this many (token, head) pairs automatic takes warp_per_token_head.
constexpr int64_t kKdaOutputGateWarpPairs = 1024;

cudaError_t kda_output_gate_bf16(const float* o, const float* norm_weight, const __nv_bfloat16* gate,
                                 int64_t gate_row_stride, float eps, __nv_bfloat16* out, int tokens, int heads,
                                 int head_dim, cudaStream_t stream,
                                 KdaOutputGateAlgorithm algorithm = KdaOutputGateAlgorithm::automatic);

}  // namespace k3::kernels
