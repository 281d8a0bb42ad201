#include "kernels/kda_preprocess.h"

#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

constexpr float kL2NormEps = 1e-6f;  // as ref::kKdaL2NormEps
constexpr int kMaxHeadDim = 1024;
constexpr int kShiftThreads = 256;

enum class Gate { bounded_sigmoid, softplus };

// The exponential and the quotient by the fast hardware paths (ex2.approx and rcp.approx based: about 2 ulp), which
// run the op faster than expf and IEEE division. For a < −87 the quotient flushes to 0 where the exact value is
// below 1e-36.
__device__ __forceinline__ float sigmoid(float a) { return __fdividef(1.0f, 1.0f + __expf(-a)); }
__device__ __forceinline__ float silu(float a) { return __fdividef(a, 1.0f + __expf(-a)); }
__device__ __forceinline__ float softplus(float a) { return fmaxf(a, 0.0f) + log1pf(expf(-fabsf(a))); }

// Input m of channel c's history (K−1 cached inputs, then this call's tokens): m < K−1 from conv_state [C, K−1],
// otherwise token m − (K−1) of x [T, C].
__device__ __forceinline__ float history(const __nv_bfloat16* x, const float* conv_state, int64_t channels, int64_t c,
                                         int64_t m, int kernel) {
  return m < kernel - 1 ? conv_state[c * (kernel - 1) + m] : __bfloat162float(x[(m - (kernel - 1)) * channels + c]);
}

// silu(Σ_j w[c, j] · history(c, t + j)): token t's window is history [t, t + K).
__device__ float conv_silu(const __nv_bfloat16* x, const float* w, const float* conv_state, int64_t channels, int64_t c,
                           int64_t t, int kernel) {
  float acc = 0.0f;
  for (int j = 0; j < kernel; ++j)
    acc = fmaf(w[c * kernel + j], history(x, conv_state, channels, c, t + j, kernel), acc);
  return silu(acc);
}

// The same for kernel 4 when the whole window lies in x (token t ≥ 3 of the call): first_tap = x + (t − 3)·C + c, the
// four weights of the channel one 16-byte load, the products summed in the same order (so the same bits).
__device__ __forceinline__ float conv4_silu_in_x(const __nv_bfloat16* first_tap, int64_t channels,
                                                 const float* channel_weights) {
  const float4 w = __ldg(reinterpret_cast<const float4*>(channel_weights));
  float acc = fmaf(w.x, __bfloat162float(first_tap[0]), 0.0f);
  acc = fmaf(w.y, __bfloat162float(first_tap[channels]), acc);
  acc = fmaf(w.z, __bfloat162float(first_tap[2 * channels]), acc);
  acc = fmaf(w.w, __bfloat162float(first_tap[3 * channels]), acc);
  return silu(acc);
}

// Sums of a and of b over the block, returned to every thread; blockDim.x is a multiple of 32, at most 1024.
__device__ float2 block_sum2(float a, float b) {
  __shared__ float2 partial[32];
  __shared__ float2 total;
  for (int offset = 16; offset > 0; offset /= 2) {
    a += __shfl_xor_sync(0xffffffffu, a, offset);
    b += __shfl_xor_sync(0xffffffffu, b, offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = make_float2(a, b);
  __syncthreads();
  if (warp == 0) {
    const float2 p = lane < int(blockDim.x / 32) ? partial[lane] : make_float2(0.0f, 0.0f);
    a = p.x;
    b = p.y;
    for (int offset = 16; offset > 0; offset /= 2) {
      a += __shfl_xor_sync(0xffffffffu, a, offset);
      b += __shfl_xor_sync(0xffffffffu, b, offset);
    }
    if (lane == 0) total = make_float2(a, b);
  }
  __syncthreads();
  return total;
}

// Block = (token t, head h) = (blockIdx.x, blockIdx.y), so consecutive blocks are consecutive tokens of one head and
// share its conv weights and inputs in the caches; thread i < head_dim is channel c = h·d + i of q, k, v, f, g
// (x channels c, P + c, 2P + c). Threads i ≥ head_dim only pad the block to whole warps for the sums.
// kConv4: kernel 4 with 16-byte-aligned weights, taken by conv4_silu_in_x from token 3 of a prefill call on.
template <Gate kGate, bool kConv4>
__global__ void kda_preprocess_block_per_token_head(const __nv_bfloat16* __restrict__ qkv, const float* __restrict__ f,
                                                    const float* __restrict__ b, const float* __restrict__ conv_weight,
                                                    const float* __restrict__ conv_state,
                                                    const float* __restrict__ a_log, const float* __restrict__ dt_bias,
                                                    float gate_lower_bound, float q_scale, float* __restrict__ q,
                                                    float* __restrict__ k, float* __restrict__ v, float* __restrict__ g,
                                                    float* __restrict__ beta, int heads, int head_dim, int kernel,
                                                    bool token_per_sequence) {
  const int64_t t = blockIdx.x;
  const int h = int(blockIdx.y);
  const int i = int(threadIdx.x);
  const bool active = i < head_dim;
  const int64_t P = int64_t(heads) * head_dim, C = 3 * P;
  const int64_t c = int64_t(h) * head_dim + i;

  // Batched decode: token t is the only new token of sequence t, whose conv state is slot t.
  const __nv_bfloat16* x = token_per_sequence ? qkv + t * C : qkv;
  const float* state = token_per_sequence ? conv_state + t * C * (kernel - 1) : conv_state;
  const int64_t position = token_per_sequence ? 0 : t;
  float qc = 0.0f, kc = 0.0f, vc = 0.0f;
  if (active) {
    if (kConv4 && position >= 3) {
      const __nv_bfloat16* first_tap = x + (position - 3) * C + c;
      qc = conv4_silu_in_x(first_tap, C, conv_weight + c * 4);
      kc = conv4_silu_in_x(first_tap + P, C, conv_weight + (P + c) * 4);
      vc = conv4_silu_in_x(first_tap + 2 * P, C, conv_weight + (2 * P + c) * 4);
    } else {
      qc = conv_silu(x, conv_weight, state, C, c, position, kernel);
      kc = conv_silu(x, conv_weight, state, C, P + c, position, kernel);
      vc = conv_silu(x, conv_weight, state, C, 2 * P + c, position, kernel);
    }
  }
  const float2 sum_sq = block_sum2(qc * qc, kc * kc);
  if (active) {
    const int64_t o = t * P + c;
    q[o] = qc * rsqrtf(sum_sq.x + kL2NormEps) * q_scale;
    k[o] = kc * rsqrtf(sum_sq.y + kL2NormEps);
    v[o] = vc;
    const float a = expf(a_log[h]), z = f[o] + dt_bias[c];
    g[o] = kGate == Gate::bounded_sigmoid ? gate_lower_bound * sigmoid(a * z) : -a * softplus(z);
  }
  if (i == 0) beta[t * heads + h] = sigmoid(b[t * heads + h]);
}

// conv_state [C, K−1] ← history [T, T + K − 1) of each channel. Ascending m reads history index T + m > m, which
// this thread has not overwritten yet, so the shift is safe in place. blockIdx.y is the sequence in the batched
// decode form (one token and one conv-state slot per sequence; gridDim.y = 1 otherwise).
__global__ void kda_conv_state_shift(const __nv_bfloat16* __restrict__ qkv, float* __restrict__ conv_states,
                                     int64_t channels, int64_t tokens, int kernel) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const __nv_bfloat16* x = qkv + blockIdx.y * channels;
  float* conv_state = conv_states + blockIdx.y * channels * (kernel - 1);
  for (int m = 0; m < kernel - 1; ++m)
    conv_state[c * (kernel - 1) + m] = history(x, conv_state, channels, c, tokens + m, kernel);
}

template <Gate kGate>
cudaError_t launch(const __nv_bfloat16* qkv, const float* f, const float* b, const float* conv_weight,
                   float* conv_state, const float* a_log, const float* dt_bias, float gate_lower_bound, float* q,
                   float* k, float* v, float* g, float* beta, int tokens, int heads, int head_dim, int kernel,
                   bool token_per_sequence, cudaStream_t stream) {
  if (tokens < 0 || heads <= 0 || head_dim <= 0 || head_dim > kMaxHeadDim || kernel < 1) return cudaErrorInvalidValue;
  if (kGate == Gate::bounded_sigmoid && !(gate_lower_bound < 0.0f)) return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  const int64_t channels = 3 * int64_t(heads) * head_dim;
  const int64_t shift_blocks = (channels + kShiftThreads - 1) / kShiftThreads;
  if (heads > 65535 || shift_blocks > INT32_MAX) return cudaErrorInvalidValue;
  const float q_scale = float(1.0 / std::sqrt(double(head_dim)));
  const int threads = (head_dim + 31) / 32 * 32;
  const dim3 grid{static_cast<unsigned>(tokens), static_cast<unsigned>(heads)};
  const bool conv4 = kernel == 4 && !token_per_sequence && reinterpret_cast<uintptr_t>(conv_weight) % 16 == 0;
  if (conv4) {
    kda_preprocess_block_per_token_head<kGate, true>
        <<<grid, threads, 0, stream>>>(qkv, f, b, conv_weight, conv_state, a_log, dt_bias, gate_lower_bound, q_scale, q,
                                       k, v, g, beta, heads, head_dim, kernel, token_per_sequence);
  } else {
    kda_preprocess_block_per_token_head<kGate, false>
        <<<grid, threads, 0, stream>>>(qkv, f, b, conv_weight, conv_state, a_log, dt_bias, gate_lower_bound, q_scale, q,
                                       k, v, g, beta, heads, head_dim, kernel, token_per_sequence);
  }
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess || kernel == 1) return status;
  const dim3 shift_grid(unsigned(shift_blocks), token_per_sequence ? unsigned(tokens) : 1u);
  kda_conv_state_shift<<<shift_grid, kShiftThreads, 0, stream>>>(qkv, conv_state, channels,
                                                                 token_per_sequence ? 1 : tokens, kernel);
  return cudaGetLastError();
}

}  // namespace

cudaError_t kda_preprocess_bounded_sigmoid_gate(const __nv_bfloat16* qkv, const float* f, const float* b,
                                                const float* conv_weight, float* conv_state, const float* a_log,
                                                const float* dt_bias, float gate_lower_bound, float* q, float* k,
                                                float* v, float* g, float* beta, int tokens, int heads, int head_dim,
                                                int conv_kernel, cudaStream_t stream) {
  return launch<Gate::bounded_sigmoid>(qkv, f, b, conv_weight, conv_state, a_log, dt_bias, gate_lower_bound, q, k, v, g,
                                       beta, tokens, heads, head_dim, conv_kernel, false, stream);
}

cudaError_t kda_preprocess_softplus_gate(const __nv_bfloat16* qkv, const float* f, const float* b,
                                         const float* conv_weight, float* conv_state, const float* a_log,
                                         const float* dt_bias, float* q, float* k, float* v, float* g, float* beta,
                                         int tokens, int heads, int head_dim, int conv_kernel, cudaStream_t stream) {
  return launch<Gate::softplus>(qkv, f, b, conv_weight, conv_state, a_log, dt_bias, 0.0f, q, k, v, g, beta, tokens,
                                heads, head_dim, conv_kernel, false, stream);
}

cudaError_t kda_preprocess_bounded_sigmoid_gate_decode_batch(const __nv_bfloat16* qkv, const float* f, const float* b,
                                                             const float* conv_weight, float* conv_states,
                                                             const float* a_log, const float* dt_bias,
                                                             float gate_lower_bound, float* q, float* k, float* v,
                                                             float* g, float* beta, int sequences, int heads,
                                                             int head_dim, int conv_kernel, cudaStream_t stream) {
  if (sequences > 65535) return cudaErrorInvalidValue;
  return launch<Gate::bounded_sigmoid>(qkv, f, b, conv_weight, conv_states, a_log, dt_bias, gate_lower_bound, q, k, v,
                                       g, beta, sequences, heads, head_dim, conv_kernel, true, stream);
}

cudaError_t kda_preprocess_softplus_gate_decode_batch(const __nv_bfloat16* qkv, const float* f, const float* b,
                                                      const float* conv_weight, float* conv_states, const float* a_log,
                                                      const float* dt_bias, float* q, float* k, float* v, float* g,
                                                      float* beta, int sequences, int heads, int head_dim,
                                                      int conv_kernel, cudaStream_t stream) {
  if (sequences > 65535) return cudaErrorInvalidValue;
  return launch<Gate::softplus>(qkv, f, b, conv_weight, conv_states, a_log, dt_bias, 0.0f, q, k, v, g, beta, sequences,
                                heads, head_dim, conv_kernel, true, stream);
}

}  // namespace k3::kernels
