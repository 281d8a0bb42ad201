// kda_gate_proj: the KDA layer's gate projections at decode (K3-SPEC §3.2–3.3) for T ≤ 8 tokens, in place of three
// GEMMs (f_a, f_b, b_proj), with the numerics of the GEMM path it replaces:
//   fa = bf16(x · W_faᵀ)      the forget gate's rank-r intermediate, fp32 sums rounded once to bf16
//   f  = fa · W_fbᵀ           fp32 (the gate pre-activation before dt_bias; kda_preprocess applies the gate)
//   b  = x · W_bᵀ             fp32 (β's logit; kda_preprocess takes the sigmoid)
// Shapes: x [tokens, hidden] bf16 with row stride x_stride; W_fa [rank, hidden], W_fb [projection, rank],
// W_b [heads, hidden] bf16 row-major; fa [tokens, rank] bf16, f [tokens, projection] fp32, b [tokens, heads] fp32,
// all dense. 1 ≤ tokens ≤ kKdaGateProjMaxTokens; hidden, x_stride and rank multiples of 8 (16-byte loads), rank ≤ 256;
// x and the three weights 16-byte aligned. K3: hidden 7168, rank 128, projection 12288, heads 96.
// Versions: kda_gate_proj_warp_per_row (the only one; the engine keeps cuBLASLt for more tokens) — two launches:
//   A (low rank and β): the rank + heads rows of [W_fa; W_b] as one matrix, two rows per 256-thread block and four
//     warps per row, each warp summing an interleaved quarter of the 16-byte weight chunks against x held in shared
//     memory as bf16 (dynamic, tokens·hidden·2 bytes); warp sums by shuffles, the four quarters in a fixed order.
//   B (f_b): fa staged in shared memory as fp32; a group of the next power of two ≥ rank/8 lanes per W_fb row, one
//     16-byte chunk per lane, four rows per group (16 groups of 16 lanes and 64 rows per block at K3: 192 blocks).
// Every weight byte is read once with 16-byte loads; no host synchronisation (CUDA-graph capturable).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kKdaGateProjMaxTokens = 8;
inline constexpr int kKdaGateProjMaxRank = 256;

// Whether kda_gate_proj_bf16 takes these sizes and pointers (otherwise it returns cudaErrorInvalidValue).
bool kda_gate_proj_supported(const __nv_bfloat16* x, int64_t x_stride, const __nv_bfloat16* w_fa,
                             const __nv_bfloat16* w_fb, const __nv_bfloat16* w_b, int tokens, int hidden, int rank,
                             int projection, int heads);

cudaError_t kda_gate_proj_bf16(const __nv_bfloat16* x, int64_t x_stride, const __nv_bfloat16* w_fa,
                               const __nv_bfloat16* w_fb, const __nv_bfloat16* w_b, int tokens, int hidden, int rank,
                               int projection, int heads, __nv_bfloat16* fa, float* f, float* b, cudaStream_t stream);

}  // namespace k3::kernels
