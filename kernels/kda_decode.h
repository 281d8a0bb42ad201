// kda_decode: one recurrent KDA step (K3-SPEC §3.5) for a batch of sequences, the state updated in place. Per
// sequence b and head h, with S = state[b, h] ([d_k, d_v], key index first, as ref::kda_recurrent's S[h](i, j)):
//   S ← Diag(exp(g)) S  (row i scaled by exp(g_i): decay along the key dimension)
//   u = β (v − Sᵀ k);  S ← S + k uᵀ;  o = Sᵀ q
// Shapes: q, k, v, g, out [batch, heads·d] fp32, row-major, head h in columns [h·d, (h+1)·d) (q already L2-normalised
// and scaled by d^-1/2, k L2-normalised, g = log decay ≤ 0); beta [batch, heads] fp32; state [batch, heads, d, d]
// row-major, fp32 or bf16 (bf16 storage, fp32 arithmetic, rounded to nearest on the write). d = d_k = d_v = head_dim,
// a multiple of 16 up to 128 (K3: 96 heads × 128). Every buffer dense; out must not alias the inputs.
// Versions: kda_decode_column_per_thread — one block per (sequence, head, 32 value columns; 16 when d is not a
// multiple of 32), one thread per value column j holding S[:, j] (d values) in registers: read once, decay, dot with
// k, rank-1 update, dot with q, written back once, so the state moves exactly once each way (memory-bound by design).
// A warp's access to one row of S is 32 consecutive columns (coalesced); q, k, exp(g) and exp(g)⊙k sit in shared
// memory (broadcast reads).
// kda_decode_column_pair_split_key — 2 columns per thread (float2 / bf16x2 state loads) with the key dimension split
// over 2 lanes (lanes 0-15 rows [0, d/2), lanes 16-31 rows [d/2, d); both dots summed by one xor shuffle), 64 columns
// per block (two warps; one when d is not a multiple of 64): half the blocks of column_per_thread, half the load
// instructions, the same d state values in registers per thread. kda_decode_column_quad_split_key — the same with 4
// columns per thread (float4 / 8-byte bf16 loads) over 4 key parts, 128 columns per block (one block per head at
// d = 128). The split-key versions need d a multiple of 32. automatic (default): column_pair_split_key from batch
// kKdaDecodeSplitKeyMinBatch on when d allows it and the state is 16-byte aligned, else column_per_thread.
// Measured on an H200 before the split-key versions: column_per_thread reaches 80 % of the copy bandwidth at batch 16
// (91 % at 64, 94 % at 256). Splitting the key dimension over 4 threads per column with the dots summed through shared
// memory was slower at batch 1 (12.4 us vs 10.6-11.4 us): there the fixed latency of the step is the limit. Fusing
// kda_preprocess and the gated output norm into the same launch would save their round trips through global memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace k3::kernels {

enum class KdaDecodeAlgorithm { automatic, column_per_thread, column_pair_split_key, column_quad_split_key };

inline constexpr int kKdaDecodeSplitKeyMinBatch = 8;

cudaError_t kda_decode_step_f32state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                     float* state, float* out, int batch, int heads, int head_dim, cudaStream_t stream,
                                     KdaDecodeAlgorithm algorithm = KdaDecodeAlgorithm::automatic);
cudaError_t kda_decode_step_bf16state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                      __nv_bfloat16* state, float* out, int batch, int heads, int head_dim,
                                      cudaStream_t stream,
                                      KdaDecodeAlgorithm algorithm = KdaDecodeAlgorithm::automatic);

}  // namespace k3::kernels
