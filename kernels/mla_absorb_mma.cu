#include "kernels/mla_absorb_mma.h"

#include "kernels/ptx_mma.h"

namespace k3::kernels::mla_absorb_mma {
namespace {

constexpr int kThreads = 128;       // 4 warps, warp w = the tile's tokens 16w … 16w + 15
constexpr int kTileTokens = 64;
constexpr int kTileColumns = 64;    // 8 n8 tiles per warp
constexpr int kChunk = 64;          // k per shared-memory stage
constexpr int kPitch = kChunk + 8;  // bf16 per staged row: 144 bytes, so a fragment's 8 rows × 4 words hit 32 banks

// A's rows (tokens; with two halves the second is the fp32 value's remainder) and B's rows (output columns), each
// k-contiguous as the m16n8k16 fragments read them.
template <bool kTwoHalves>
struct Stage {
  __nv_bfloat16 a[kTwoHalves ? 2 : 1][kTileTokens][kPitch];
  __nv_bfloat16 b[kTileColumns][kPitch];
};

__device__ __forceinline__ uint32_t word(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// acc[j] += the staged chunk's product for warp `warp`'s 16 rows and columns 8j … 8j + 7.
template <bool kTwoHalves>
__device__ __forceinline__ void multiply_chunk(const Stage<kTwoHalves>& s, float (&acc)[kTileColumns / 8][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, k2 = (lane % 4) * 2;
  const int row = warp * 16 + g;
#pragma unroll
  for (int k = 0; k < kChunk; k += 16) {
    uint32_t a[kTwoHalves ? 2 : 1][4];
#pragma unroll
    for (int half = 0; half < (kTwoHalves ? 2 : 1); ++half) {
      a[half][0] = word(&s.a[half][row][k + k2]);
      a[half][1] = word(&s.a[half][row + 8][k + k2]);
      a[half][2] = word(&s.a[half][row][k + k2 + 8]);
      a[half][3] = word(&s.a[half][row + 8][k + k2 + 8]);
    }
#pragma unroll
    for (int j = 0; j < kTileColumns / 8; ++j) {
      const uint32_t b0 = word(&s.b[8 * j + g][k + k2]), b1 = word(&s.b[8 * j + g][k + k2 + 8]);
#pragma unroll
      for (int half = 0; half < (kTwoHalves ? 2 : 1); ++half) ptx::mma_bf16(acc[j], a[half], b0, b1);
    }
  }
}

// Calls out(token row m, column n, value) for each accumulator of this thread (m, n within the tile).
template <typename Out>
__device__ __forceinline__ void for_each_result(const float (&acc)[kTileColumns / 8][4], Out out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, n2 = (lane % 4) * 2;
#pragma unroll
  for (int j = 0; j < kTileColumns / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) out(warp * 16 + g + (e / 2) * 8, 8 * j + n2 + e % 2, acc[j][e]);
  }
}

// grid (ceil(r / 64), heads, ceil(tokens / 64)). B's rows are kv_b's columns here: 16-byte loads along r, scattered
// into the stage transposed.
__global__ void __launch_bounds__(kThreads)
    absorb_q_kernel(const __nv_bfloat16* __restrict__ q, int64_t q_stride, const __nv_bfloat16* __restrict__ kv_b,
                    MlaDims d, int tokens, __nv_bfloat16* __restrict__ q_abs) {
  __shared__ __align__(16) Stage<false> s;
  const int h = blockIdx.y, n0 = blockIdx.x * kTileColumns, t0 = blockIdx.z * kTileTokens;
  const int dn = d.nope_dim, r = d.latent_rank, qk = d.nope_dim + d.rope_dim, out_width = r + d.rope_dim;
  const __nv_bfloat16 zero = __float2bfloat16_rn(0.0f);
  const __nv_bfloat16* w = kv_b + int64_t(h) * (d.nope_dim + d.value_dim) * r;  // row i at w + i·r
  float acc[kTileColumns / 8][4] = {};
  for (int k0 = 0; k0 < dn; k0 += kChunk) {
    for (int e = threadIdx.x; e < kTileTokens * kChunk; e += kThreads) {
      const int m = e / kChunk, k = e % kChunk, t = t0 + m;
      s.a[0][m][k] = t < tokens && k0 + k < dn ? q[int64_t(t) * q_stride + int64_t(h) * qk + k0 + k] : zero;
    }
    for (int e = threadIdx.x; e < kChunk * kTileColumns / 8; e += kThreads) {
      const int k = e / (kTileColumns / 8), n = (e % (kTileColumns / 8)) * 8;
      uint4 packed = make_uint4(0, 0, 0, 0);  // r % 8 == 0: 8 columns are all in or all out
      if (k0 + k < dn && n0 + n < r) {
        packed = __ldg(reinterpret_cast<const uint4*>(w + int64_t(k0 + k) * r + n0 + n));
      }
      const __nv_bfloat16* v = reinterpret_cast<const __nv_bfloat16*>(&packed);
#pragma unroll
      for (int c = 0; c < 8; ++c) s.b[n + c][k] = v[c];
    }
    __syncthreads();
    multiply_chunk(s, acc);
    __syncthreads();
  }
  for_each_result(acc, [&](int m, int n, float value) {
    if (t0 + m < tokens && n0 + n < r) {
      q_abs[(int64_t(t0 + m) * d.heads + h) * out_width + n0 + n] = __float2bfloat16_rn(value);
    }
  });
  if (blockIdx.x == 0) {  // the k_r half, as is
    for (int e = threadIdx.x; e < kTileTokens * d.rope_dim; e += kThreads) {
      const int m = e / d.rope_dim, i = e % d.rope_dim;
      if (t0 + m < tokens) {
        q_abs[(int64_t(t0 + m) * d.heads + h) * out_width + r + i] =
            q[int64_t(t0 + m) * q_stride + int64_t(h) * qk + d.nope_dim + i];
      }
    }
  }
}

// grid (ceil(dv / 64), heads, ceil(tokens / 64)). B's rows are kv_b's rows (W_v's output columns), k-contiguous.
__global__ void __launch_bounds__(kThreads)
    apply_v_kernel(const float* __restrict__ lat, const __nv_bfloat16* __restrict__ kv_b,
                   const __nv_bfloat16* __restrict__ gate, int64_t gate_stride, MlaDims d, int tokens,
                   __nv_bfloat16* __restrict__ out) {
  __shared__ __align__(16) Stage<true> s;
  const int h = blockIdx.y, n0 = blockIdx.x * kTileColumns, t0 = blockIdx.z * kTileTokens;
  const int r = d.latent_rank, dv = d.value_dim;
  const __nv_bfloat16* w = kv_b + (int64_t(h) * (d.nope_dim + dv) + d.nope_dim) * r;  // row c at w + c·r
  float acc[kTileColumns / 8][4] = {};
  for (int k0 = 0; k0 < r; k0 += kChunk) {
    for (int e = threadIdx.x; e < kTileTokens * kChunk; e += kThreads) {
      const int m = e / kChunk, k = e % kChunk, t = t0 + m;
      const float x = t < tokens && k0 + k < r ? lat[(int64_t(t) * d.heads + h) * r + k0 + k] : 0.0f;
      const __nv_bfloat16 hi = __float2bfloat16_rn(x);
      s.a[0][m][k] = hi;
      s.a[1][m][k] = __float2bfloat16_rn(x - __bfloat162float(hi));  // exact in fp32
    }
    for (int e = threadIdx.x; e < kTileColumns * kChunk / 8; e += kThreads) {
      const int n = e / (kChunk / 8), k = (e % (kChunk / 8)) * 8;
      uint4 packed = make_uint4(0, 0, 0, 0);  // r % 8 == 0: 8 k are all in or all out
      if (n0 + n < dv && k0 + k < r) {
        packed = __ldg(reinterpret_cast<const uint4*>(w + int64_t(n0 + n) * r + k0 + k));
      }
      *reinterpret_cast<uint4*>(&s.b[n][k]) = packed;
    }
    __syncthreads();
    multiply_chunk(s, acc);
    __syncthreads();
  }
  for_each_result(acc, [&](int m, int n, float value) {
    if (t0 + m >= tokens || n0 + n >= dv) return;
    const int64_t column = int64_t(h) * dv + n0 + n;
    if (gate) value /= 1.0f + expf(-__bfloat162float(gate[int64_t(t0 + m) * gate_stride + column]));
    out[int64_t(t0 + m) * d.heads * dv + column] = __float2bfloat16_rn(value);
  });
}

dim3 grid_for(int columns, const MlaDims& d, int tokens) {
  return dim3((columns + kTileColumns - 1) / kTileColumns, d.heads, (tokens + kTileTokens - 1) / kTileTokens);
}

bool grid_fits(const dim3& grid) { return grid.y <= 65535 && grid.z <= 65535; }

}  // namespace

bool applies(const MlaDims& d, const __nv_bfloat16* kv_b) {
  return d.latent_rank % 8 == 0 && reinterpret_cast<uintptr_t>(kv_b) % 16 == 0;
}

cudaError_t absorb_q(const __nv_bfloat16* q, int64_t q_stride, const __nv_bfloat16* kv_b, const MlaDims& d, int tokens,
                     __nv_bfloat16* q_abs, cudaStream_t stream) {
  const dim3 grid = grid_for(d.latent_rank, d, tokens);
  if (!applies(d, kv_b) || !grid_fits(grid)) return cudaErrorInvalidValue;
  absorb_q_kernel<<<grid, kThreads, 0, stream>>>(q, q_stride, kv_b, d, tokens, q_abs);
  return cudaGetLastError();
}

cudaError_t apply_v(const float* lat, const __nv_bfloat16* kv_b, const __nv_bfloat16* gate, int64_t gate_stride,
                    const MlaDims& d, int tokens, __nv_bfloat16* out, cudaStream_t stream) {
  const dim3 grid = grid_for(d.value_dim, d, tokens);
  if (!applies(d, kv_b) || !grid_fits(grid)) return cudaErrorInvalidValue;
  apply_v_kernel<<<grid, kThreads, 0, stream>>>(lat, kv_b, gate, gate_stride, d, tokens, out);
  return cudaGetLastError();
}

}  // namespace k3::kernels::mla_absorb_mma
