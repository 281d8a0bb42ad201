// kda_preprocess: the KDA layer's element-wise front end (K3-SPEC §3.1-3.4) for T tokens of one sequence (a decode
// step, T = 1, or a prefill chunk), between the projections and the delta rule (kda_decode or a chunked kernel):
//   q, k, v = SiLU(conv(x)): causal depthwise conv of kernel K per channel of x = qkv (channels q | k | v), continuing
//             from conv_state: y[t, c] = silu(Σ_j w[c, j] · x[t − (K−1) + j, c]), inputs before token 0 from the state
//   q ← q / sqrt(Σ q² + 1e-6) · d^-1/2,  k ← k / sqrt(Σ k² + 1e-6)   (sums over the d channels of one token and head)
//   g = lb · sigmoid(exp(A_log[h]) · (f + dt_bias))    kda_preprocess_bounded_sigmoid_gate (K3, lb < 0)
//   g = −exp(A_log[h]) · softplus(f + dt_bias)         kda_preprocess_softplus_gate (Kimi Linear)
//   β = sigmoid(b)
// As ref::short_conv_silu, l2_normalize_rows, kda_gate and kda_layer; fp32 arithmetic (SiLU and the sigmoids with
// the fast exponential and quotient, about 2 ulp).
// Shapes (H heads, d = head_dim ≤ 1024, P = H·d, all dense row-major): qkv [T, 3P] bf16 (the projection outputs);
// f [T, P] (= f_b(f_a x)); b [T, H]; conv_weight [3P, K] (column K−1 multiplies the current token); conv_state
// [3P, K−1], the last K−1 inputs per channel, oldest first, replaced by the last K−1 inputs of this call (unused when
// K = 1); a_log [H] (K3 stores 128 values: pass its first H); dt_bias [P]; outputs q, k, v, g [T, P] and beta [T, H],
// all fp32, none aliasing an input.
// *_decode_batch: one decode step of `sequences` sequences at once — token t is the one new token of sequence t,
// whose conv state is slot t of conv_states [sequences, 3P, K−1]; otherwise the same.
// Versions: kda_preprocess_block_per_token_head (the only one) — one block per (token, head), consecutive blocks
// consecutive tokens of one head, one thread per channel of the head computing its q, k and v convs (K taps, from
// conv_state or qkv) and its g; the two L2 norms are one block-wide sum; with K = 4 (K3, Kimi Linear) and
// 16-byte-aligned weights, a prefill token whose window lies in qkv takes each channel's four weights in one load and
// its taps by pointer steps, with no test for the state (the same bits). Followed by kda_conv_state_shift (one thread
// per channel), a second launch because the blocks of the first K−1 tokens read the state it overwrites.
// Measurements, profiles and the versions tried: bench/results/kernel-notes.md (kda_preprocess).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace k3::kernels {

cudaError_t kda_preprocess_bounded_sigmoid_gate(const __nv_bfloat16* qkv, const float* f, const float* b,
                                                const float* conv_weight, float* conv_state, const float* a_log,
                                                const float* dt_bias, float gate_lower_bound, float* q, float* k,
                                                float* v, float* g, float* beta, int tokens, int heads, int head_dim,
                                                int conv_kernel, cudaStream_t stream);
cudaError_t kda_preprocess_softplus_gate(const __nv_bfloat16* qkv, const float* f, const float* b,
                                         const float* conv_weight, float* conv_state, const float* a_log,
                                         const float* dt_bias, float* q, float* k, float* v, float* g, float* beta,
                                         int tokens, int heads, int head_dim, int conv_kernel, cudaStream_t stream);

cudaError_t kda_preprocess_bounded_sigmoid_gate_decode_batch(const __nv_bfloat16* qkv, const float* f, const float* b,
                                                             const float* conv_weight, float* conv_states,
                                                             const float* a_log, const float* dt_bias,
                                                             float gate_lower_bound, float* q, float* k, float* v,
                                                             float* g, float* beta, int sequences, int heads,
                                                             int head_dim, int conv_kernel, cudaStream_t stream);
cudaError_t kda_preprocess_softplus_gate_decode_batch(const __nv_bfloat16* qkv, const float* f, const float* b,
                                                      const float* conv_weight, float* conv_states, const float* a_log,
                                                      const float* dt_bias, float* q, float* k, float* v, float* g,
                                                      float* beta, int sequences, int heads, int head_dim,
                                                      int conv_kernel, cudaStream_t stream);

}  // namespace k3::kernels
