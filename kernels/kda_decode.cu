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

// The step's vectors of one (sequence, head) into shared memory for the block's kThreads threads: q, k, α = exp(g)
// and α ⊙ k; returns after the block barrier.
template <int D, int kThreads>
__device__ __forceinline__ void stage_step_vectors(const float* q, const float* k, const float* g, float* q_s,
                                                   float* k_s, float* alpha_s, float* alpha_k_s) {
  for (int i = threadIdx.x; i < D; i += kThreads) {
    const float k_i = k[i], alpha_i = expf(g[i]);
    q_s[i] = q[i];
    k_s[i] = k_i;
    alpha_s[i] = alpha_i;
    alpha_k_s[i] = alpha_i * k_i;
  }
  __syncthreads();
}

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
  stage_step_vectors<D, kColumns>(q + vec, k + vec, g + vec, q_s, k_s, alpha_s, alpha_k_s);

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

// Vector loads of V consecutive state values (V = 2 or 4; the address is a multiple of V elements).
template <int V>
__device__ __forceinline__ void load_state_vec(const float* p, float (&s)[V]) {
  if constexpr (V == 2) {
    const float2 u = *reinterpret_cast<const float2*>(p);
    s[0] = u.x, s[1] = u.y;
  } else {
    const float4 u = *reinterpret_cast<const float4*>(p);
    s[0] = u.x, s[1] = u.y, s[2] = u.z, s[3] = u.w;
  }
}
template <int V>
__device__ __forceinline__ void load_state_vec(const __nv_bfloat16* p, float (&s)[V]) {
#pragma unroll
  for (int c = 0; c < V; c += 2) {
    const float2 u = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(p)[c / 2]);
    s[c] = u.x, s[c + 1] = u.y;
  }
}
template <int V>
__device__ __forceinline__ void store_state_vec(float* p, const float (&s)[V]) {
  if constexpr (V == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(s[0], s[1]);
  } else {
    *reinterpret_cast<float4*>(p) = make_float4(s[0], s[1], s[2], s[3]);
  }
}
template <int V>
__device__ __forceinline__ void store_state_vec(__nv_bfloat16* p, const float (&s)[V]) {
#pragma unroll
  for (int c = 0; c < V; c += 2) reinterpret_cast<__nv_bfloat162*>(p)[c / 2] = __floats2bfloat162_rn(s[c], s[c + 1]);
}

// Warps per block of the split-key versions: the wanted count where it divides the head (d / 32 warps), else one.
constexpr int split_key_warps(int d, int wanted) { return d % (32 * wanted) == 0 ? wanted : 1; }

// V columns per thread, the key dimension split over V lanes: lane = part · (32 / V) + column group, so the 32 / V
// lanes of one part read V·(32 / V) = 32 consecutive columns of one row (128 bytes of fp32), and the V parts of a
// warp hold key rows [part·D/V, (part+1)·D/V). Each thread keeps D/V × V = D state values in registers (as
// column_per_thread). Both dots are summed over the parts by xor shuffles (offsets 32/V … 16).
// Block = (sequence b, head h, 32·kWarps columns): blockIdx.x = (b·heads + h)·(D / (32·kWarps)) + column block.
template <int D, int V, int kWarps, typename State>
__global__ void __launch_bounds__(32 * kWarps)
    kda_decode_columns_split_key(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                                 const float* __restrict__ g, const float* __restrict__ beta, State* __restrict__ state,
                                 float* __restrict__ out) {
  constexpr int kLanesPerRow = 32 / V, kRows = D / V, kColumns = 32 * kWarps;
  constexpr int kBlocksPerHead = D / kColumns;
  static_assert((V == 2 || V == 4) && D % 32 == 0 && D <= 128 && D % kColumns == 0);

  __shared__ float q_s[D], k_s[D], alpha_s[D], alpha_k_s[D];  // α = exp(g)
  const int64_t seq_head = blockIdx.x / kBlocksPerHead;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int part = lane / kLanesPerRow;
  const int column = int(blockIdx.x % kBlocksPerHead) * kColumns + warp * 32 + (lane % kLanesPerRow) * V;
  const int64_t vec = seq_head * D;
  stage_step_vectors<D, kColumns>(q + vec, k + vec, g + vec, q_s, k_s, alpha_s, alpha_k_s);

  // S[i, column + c] at col[i·D + c]; this thread's rows start at part·kRows.
  State* col = state + seq_head * D * D + int64_t(part) * kRows * D + column;
  const int row0 = part * kRows;
  float s[kRows][V];
  float sk[V];
#pragma unroll
  for (int c = 0; c < V; ++c) sk[c] = 0.0f;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    load_state_vec<V>(col + i * D, s[i]);
#pragma unroll
    for (int c = 0; c < V; ++c) sk[c] = fmaf(s[i][c], alpha_k_s[row0 + i], sk[c]);
  }
#pragma unroll
  for (int c = 0; c < V; ++c)
#pragma unroll
    for (int offset = kLanesPerRow; offset < 32; offset <<= 1) sk[c] += __shfl_xor_sync(0xFFFFFFFFu, sk[c], offset);
  const float beta_h = beta[seq_head];
  float u[V], o[V];
#pragma unroll
  for (int c = 0; c < V; ++c) {
    u[c] = beta_h * (v[vec + column + c] - sk[c]);
    o[c] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const float k_i = k_s[row0 + i], alpha_i = alpha_s[row0 + i], q_i = q_s[row0 + i];
#pragma unroll
    for (int c = 0; c < V; ++c) {
      s[i][c] = fmaf(k_i, u[c], s[i][c] * alpha_i);  // decayed, then the rank-1 update
      o[c] = fmaf(s[i][c], q_i, o[c]);
    }
    store_state_vec<V>(col + i * D, s[i]);
  }
#pragma unroll
  for (int c = 0; c < V; ++c)
#pragma unroll
    for (int offset = kLanesPerRow; offset < 32; offset <<= 1) o[c] += __shfl_xor_sync(0xFFFFFFFFu, o[c], offset);
  if (part == 0) {
#pragma unroll
    for (int c = 0; c < V; ++c) out[vec + column + c] = o[c];
  }
}

template <int D, typename State>
cudaError_t launch_d(const float* q, const float* k, const float* v, const float* g, const float* beta, State* state,
                     float* out, int batch, int heads, KdaDecodeAlgorithm algorithm, cudaStream_t stream) {
  const int64_t seq_heads = int64_t(batch) * heads;
  if (algorithm == KdaDecodeAlgorithm::column_per_thread) {
    constexpr int kColumns = columns_per_block(D);
    const int64_t blocks = seq_heads * (D / kColumns);
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    kda_decode_column_per_thread<D, State><<<unsigned(blocks), kColumns, 0, stream>>>(q, k, v, g, beta, state, out);
    return cudaGetLastError();
  }
  if constexpr (D % 32 == 0) {
    if (algorithm == KdaDecodeAlgorithm::column_pair_split_key) {
      constexpr int kWarps = split_key_warps(D, 2);
      const int64_t blocks = seq_heads * (D / (32 * kWarps));
      if (blocks > INT32_MAX) return cudaErrorInvalidValue;
      kda_decode_columns_split_key<D, 2, kWarps, State>
          <<<unsigned(blocks), 32 * kWarps, 0, stream>>>(q, k, v, g, beta, state, out);
      return cudaGetLastError();
    }
  }
  return cudaErrorInvalidValue;
}

template <typename State>
cudaError_t launch(const float* q, const float* k, const float* v, const float* g, const float* beta, State* state,
                   float* out, int batch, int heads, int head_dim, KdaDecodeAlgorithm algorithm, cudaStream_t stream) {
  if (batch < 0 || heads <= 0) return cudaErrorInvalidValue;
  // The split-key versions need d a multiple of 32 and a state aligned to their vector loads (4 values).
  const bool split_key_ok = head_dim % 32 == 0 && reinterpret_cast<uintptr_t>(state) % (4 * sizeof(State)) == 0;
  if (algorithm == KdaDecodeAlgorithm::automatic) {
    algorithm = split_key_ok && batch >= kKdaDecodeSplitKeyMinBatch ? KdaDecodeAlgorithm::column_pair_split_key
                                                                    : KdaDecodeAlgorithm::column_per_thread;
  } else if (algorithm != KdaDecodeAlgorithm::column_per_thread && !split_key_ok) {
    return cudaErrorInvalidValue;
  }
  if (batch == 0) return cudaSuccess;
  switch (head_dim) {
    case 16: return launch_d<16>(q, k, v, g, beta, state, out, batch, heads, algorithm, stream);
    case 32: return launch_d<32>(q, k, v, g, beta, state, out, batch, heads, algorithm, stream);
    case 48: return launch_d<48>(q, k, v, g, beta, state, out, batch, heads, algorithm, stream);
    case 64: return launch_d<64>(q, k, v, g, beta, state, out, batch, heads, algorithm, stream);
    case 80: return launch_d<80>(q, k, v, g, beta, state, out, batch, heads, algorithm, stream);
    case 96: return launch_d<96>(q, k, v, g, beta, state, out, batch, heads, algorithm, stream);
    case 112: return launch_d<112>(q, k, v, g, beta, state, out, batch, heads, algorithm, stream);
    case 128: return launch_d<128>(q, k, v, g, beta, state, out, batch, heads, algorithm, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t kda_decode_step_f32state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                     float* state, float* out, int batch, int heads, int head_dim, cudaStream_t stream,
                                     KdaDecodeAlgorithm algorithm) {
  return launch(q, k, v, g, beta, state, out, batch, heads, head_dim, algorithm, stream);
}

cudaError_t kda_decode_step_bf16state(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                      __nv_bfloat16* state, float* out, int batch, int heads, int head_dim,
                                      cudaStream_t stream, KdaDecodeAlgorithm algorithm) {
  return launch(q, k, v, g, beta, state, out, batch, heads, head_dim, algorithm, stream);
}

}  // namespace k3::kernels
