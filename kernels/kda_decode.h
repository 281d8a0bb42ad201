// kda_decode: one recurrent KDA step (K3-SPEC §3.5) for a batch of sequences, the state updated in place. Per
// sequence b and head h, with S = state[b, h] ([d_k, d_v], key index first, as ref::kda_recurrent's S[h](i, j)):
//   S ← Diag(exp(g)) S  (row i scaled by exp(g_i): decay along the key dimension)
//   u = β (v − Sᵀ k);  S ← S + k uᵀ;  o = Sᵀ q
// Shapes: q, k, v, g, out [batch, heads·d] fp32, row-major, head h in columns [h·d, (h+1)·d) (q already L2-normalised
// and scaled by d^-1/2, k L2-normalised, g = log decay ≤ 0); beta [batch, heads] fp32; state [batch, heads, d, d]
// row-major, fp32 or bf16 (bf16 storage, fp32 arithmetic, rounded to nearest on the write). d = d_k = d_v = head_dim,
// a multiple of 16 up to 128 (K3: 96 heads × 128). Every buffer dense; out must not alias the inputs.
// Versions (KdaDecodeAlgorithm; memory-bound by design: the state moves exactly once each way):
//   column_per_thread — one block per (sequence, head, 32 value columns; 16 when d is not a multiple of 32), one
//     thread per value column j holding S[:, j] in registers; a warp's access to a row of S is 32 consecutive
//     columns; q, k, exp(g) and exp(g)⊙k in shared memory.
//   column_pair_split_key — 2 columns per thread (float2 / bf16x2 state loads), the key dimension split over 2 lanes
//     (both dots summed by one xor shuffle), 64 columns per block: half the blocks and load instructions. Needs d a
//     multiple of 32 and the state 16-byte aligned.
// automatic: column_pair_split_key from batch kKdaDecodeSplitKeyMinBatch on where it applies (its fewer, wider loads
// win once the batch fills the SMs), else column_per_thread (below that the step's fixed latency binds).
// Measurements and history: bench/results/kernel-notes.md (kda_decode).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace k3::kernels {

enum class KdaDecodeAlgorithm { automatic, column_per_thread, column_pair_split_key };

inline constexpr int kKdaDecodeSplitKeyMinBatch = 8;

cudaError_t kda_decode_step_f32state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                     float* state, float* out, int batch, int heads, int head_dim, cudaStream_t stream,
                                     KdaDecodeAlgorithm algorithm = KdaDecodeAlgorithm::automatic);
cudaError_t kda_decode_step_bf16state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                      __nv_bfloat16* state, float* out, int batch, int heads, int head_dim,
                                      cudaStream_t stream,
                                      KdaDecodeAlgorithm algorithm = KdaDecodeAlgorithm::automatic);

}  // namespace k3::kernels
