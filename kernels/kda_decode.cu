#include "kernels/kda_decode.h"

#include <cstdint>

namespace k3::kernels {

namespace {

// Value columns per block: one warp, or half a warp when d is an odd multiple of 16 (48, 80, 112).
constexpr int columns_per_block(int d) { return d % 32 == 0 ? 32 : 16; }

__device__ __forceinline__ float load_state(const float* p) { return *p; }
__device__ __forceinline__ float load_state(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_state(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_state(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Block = (sequence b, head h, column block); blockIdx.x = (b·heads + h)·(D / columns) + column block, so the
// q, k, v, g, out vectors of (b, h) start at (b·heads + h)·D, β at b·heads + h and the state at (b·heads + h)·D·D.
template <int D, typename State>
__global__ void __launch_bounds__(columns_per_block(D))
    kda_decode_column_per_thread(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                                 const float* __restrict__ g, const float* __restrict__ beta, State* __restrict__ state,
                                 float* __restrict__ out) {
  constexpr int kColumns = columns_per_block(D);
  constexpr int kBlocksPerHead = D / kColumns;
  static_assert(D % 16 == 0 && D <= 128 && D % kColumns == 0);

  __shared__ float q_s[D], k_s[D], alpha_s[D], alpha_k_s[D];  // α = exp(g)
  const int64_t seq_head = blockIdx.x / kBlocksPerHead;
  const int column = int(blockIdx.x % kBlocksPerHead) * kColumns + int(threadIdx.x);
  const int64_t vec = seq_head * D;
  for (int i = threadIdx.x; i < D; i += kColumns) {
    const float k_i = k[vec + i], alpha_i = expf(g[vec + i]);
    q_s[i] = q[vec + i];
    k_s[i] = k_i;
    alpha_s[i] = alpha_i;
    alpha_k_s[i] = alpha_i * k_i;
  }
  __syncthreads();

  State* col = state + seq_head * D * D + column;  // S[0, column]; S[i, column] at col[i·D]
  // (Sᵀ k) after the decay is Σ_i S[i, column] α_i k_i: one shared operand per row in the pass that holds all d
  // global loads in flight (with α and k as two, ptxas keeps both live for every row and spills at d = 128).
  float s[D];
  float sk = 0.0f;
#pragma unroll
  for (int i = 0; i < D; ++i) {
    s[i] = load_state(col + i * D);
    sk = fmaf(s[i], alpha_k_s[i], sk);
  }
  const float u = beta[seq_head] * (v[vec + column] - sk);
  float o = 0.0f;
#pragma unroll
  for (int i = 0; i < D; ++i) {
    s[i] = fmaf(k_s[i], u, s[i] * alpha_s[i]);  // decayed, then the rank-1 update
    o = fmaf(s[i], q_s[i], o);
    store_state(col + i * D, s[i]);
  }
  out[vec + column] = o;
}

template <int D, typename State>
cudaError_t launch_d(const float* q, const float* k, const float* v, const float* g, const float* beta, State* state,
                     float* out, int batch, int heads, cudaStream_t stream) {
  constexpr int kColumns = columns_per_block(D);
  const int64_t blocks = int64_t(batch) * heads * (D / kColumns);
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  kda_decode_column_per_thread<D, State><<<unsigned(blocks), kColumns, 0, stream>>>(q, k, v, g, beta, state, out);
  return cudaGetLastError();
}

template <typename State>
cudaError_t launch(const float* q, const float* k, const float* v, const float* g, const float* beta, State* state,
                   float* out, int batch, int heads, int head_dim, cudaStream_t stream) {
  if (batch < 0 || heads <= 0) return cudaErrorInvalidValue;
  if (batch == 0) return cudaSuccess;
  switch (head_dim) {
    case 16: return launch_d<16>(q, k, v, g, beta, state, out, batch, heads, stream);
    case 32: return launch_d<32>(q, k, v, g, beta, state, out, batch, heads, stream);
    case 48: return launch_d<48>(q, k, v, g, beta, state, out, batch, heads, stream);
    case 64: return launch_d<64>(q, k, v, g, beta, state, out, batch, heads, stream);
    case 80: return launch_d<80>(q, k, v, g, beta, state, out, batch, heads, stream);
    case 96: return launch_d<96>(q, k, v, g, beta, state, out, batch, heads, stream);
    case 112: return launch_d<112>(q, k, v, g, beta, state, out, batch, heads, stream);
    case 128: return launch_d<128>(q, k, v, g, beta, state, out, batch, heads, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t kda_decode_step_f32state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                     float* state, float* out, int batch, int heads, int head_dim,
                                     cudaStream_t stream) {
  return launch(q, k, v, g, beta, state, out, batch, heads, head_dim, stream);
}

cudaError_t kda_decode_step_bf16state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                      __nv_bfloat16* state, float* out, int batch, int heads, int head_dim,
                                      cudaStream_t stream) {
  return launch(q, k, v, g, beta, state, out, batch, heads, head_dim, stream);
}

}  // namespace k3::kernels
