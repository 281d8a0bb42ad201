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
// Faster (not done): at small batch the grid is a few warps per SM (batch 1: 384 warps on 132 SMs). Splitting the
// key dimension over 4 threads per column (dots summed through shared memory) was measured on an H200 and was
// slower at batch 1 (12.4 us vs 10.6-11.4 us), so the fixed latency of the step, not load parallelism, is the
// limit there; 2 columns per thread with bf16x2 / float2 loads may still help at mid batches; fusing kda_preprocess and the gated output
// norm into the same launch would save their round trips through global memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace k3::kernels {

cudaError_t kda_decode_step_f32state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                     float* state, float* out, int batch, int heads, int head_dim, cudaStream_t stream);
cudaError_t kda_decode_step_bf16state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                      __nv_bfloat16* state, float* out, int batch, int heads, int head_dim,
                                      cudaStream_t stream);

}  // namespace k3::kernels
