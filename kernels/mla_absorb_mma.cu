#include "kernels/mla_absorb_mma.h"

#include "kernels/ptx/ptx_mma.h"

namespace k3::kernels::mla_absorb_mma {
namespace {

constexpr int kThreads = 256;  // 8 warps: warp w = tokens 16·(w % 4) … + 15, columns 32·(w / 4) … + 31
constexpr int kTileTokens = 64;
constexpr int kTileColumns = 64;
constexpr int kWarpColumns = 32;    // 4 n8 tiles per warp
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

// acc[j] += the staged chunk's product for this warp's 16 rows and its columns 8j … 8j + 7.
template <bool kTwoHalves>
__device__ __forceinline__ void multiply_chunk(const Stage<kTwoHalves>& s, float (&acc)[kWarpColumns / 8][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, k2 = (lane % 4) * 2;
  const int row = (warp % 4) * 16 + g, column = (warp / 4) * kWarpColumns + g;
#pragma unroll 1  // one k step's fragments live at a time: the next chunk's loads need the registers
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
    for (int j = 0; j < kWarpColumns / 8; ++j) {
      const uint32_t b0 = word(&s.b[column + 8 * j][k + k2]), b1 = word(&s.b[column + 8 * j][k + k2 + 8]);
#pragma unroll
      for (int half = 0; half < (kTwoHalves ? 2 : 1); ++half) ptx::mma_bf16(acc[j], a[half], b0, b1);
    }
  }
}

// Calls out(token row m, column n, value) for each accumulator of this thread (m, n within the tile).
template <typename Out>
__device__ __forceinline__ void for_each_result(const float (&acc)[kWarpColumns / 8][4], Out out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, n2 = (lane % 4) * 2;
#pragma unroll
  for (int j = 0; j < kWarpColumns / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      out((warp % 4) * 16 + g + (e / 2) * 8, (warp / 4) * kWarpColumns + 8 * j + n2 + e % 2, acc[j][e]);
    }
  }
}

// Multiplies the k chunks 0, 64, … below k_total: chunk c + 1's global loads (loader.load, into registers) are in
// flight while chunk c is multiplied; loader.store writes them to the stage.
template <typename Loader, bool kTwoHalves>
__device__ __forceinline__ void multiply_chunks(Loader& loader, int k_total, Stage<kTwoHalves>& s,
                                                float (&acc)[kWarpColumns / 8][4]) {
  loader.load(0);
  for (int k0 = 0; k0 < k_total; k0 += kChunk) {
    loader.store(s);
    __syncthreads();
    if (k0 + kChunk < k_total) loader.load(k0 + kChunk);
    multiply_chunk(s, acc);
    __syncthreads();
  }
}

constexpr int kALoads = kTileTokens * kChunk / kThreads;       // A elements per thread and chunk: 16
constexpr int kBLoads = kTileColumns * kChunk / 8 / kThreads;  // 16-byte kv_b vectors per thread and chunk: 2

// absorb_q's operands: A = the tile's q rows (nope half), B[n][k] = kv_b[h·(dn+dv) + k, n0 + n], loaded 8 columns
// at a time along r and scattered into the stage transposed (consecutive lanes take consecutive k, so a warp's
// 2-byte stores fall in distinct banks).
struct AbsorbQLoader {
  const __nv_bfloat16* q;  // the tile's first token, this head's q
  int64_t q_stride;
  const __nv_bfloat16* w;  // kv_b's row h·(dn+dv), column n0
  int rows, dn, columns;   // tokens in the tile, k extent, output columns left from n0
  int64_t r;
  __nv_bfloat16 a[kALoads];
  uint4 b[kBLoads];

  __device__ __forceinline__ void load(int k0) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int e = threadIdx.x + i * kThreads, m = e / kChunk, k = k0 + e % kChunk;
      a[i] = m < rows && k < dn ? q[m * q_stride + k] : __float2bfloat16_rn(0.0f);
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int e = threadIdx.x + i * kThreads, k = k0 + e % kChunk, n = (e / kChunk) * 8;
      // r % 8 == 0: 8 columns are all in or all out
      b[i] = k < dn && n < columns ? __ldg(reinterpret_cast<const uint4*>(w + k * r + n)) : make_uint4(0, 0, 0, 0);
    }
  }
  __device__ __forceinline__ void store(Stage<false>& s) const {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int e = threadIdx.x + i * kThreads;
      s.a[0][e / kChunk][e % kChunk] = a[i];
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int e = threadIdx.x + i * kThreads, k = e % kChunk, n = (e / kChunk) * 8;
      const __nv_bfloat16* v = reinterpret_cast<const __nv_bfloat16*>(&b[i]);
#pragma unroll
      for (int c = 0; c < 8; ++c) s.b[n + c][k] = v[c];
    }
  }
};

// apply_v's operands: A = the tile's fp32 latent rows (16-byte loads) as bf16 hi and lo halves, B[n][k] =
// kv_b[h·(dn+dv) + dn + n0 + n, k], k-contiguous as stored.
struct ApplyVLoader {
  static constexpr int kAVectors = kALoads / 4;
  const float* lat;        // the tile's first token, this head's latent row (16-byte aligned)
  int64_t lat_stride;      // heads · r
  const __nv_bfloat16* w;  // kv_b's row h·(dn+dv) + dn + n0
  int rows, columns;       // tokens in the tile, output columns left from n0
  int64_t r;
  float4 a[kAVectors];
  uint4 b[kBLoads];

  __device__ __forceinline__ void load(int k0) {
#pragma unroll
    for (int i = 0; i < kAVectors; ++i) {
      const int e = threadIdx.x + i * kThreads, m = e / (kChunk / 4), k = k0 + (e % (kChunk / 4)) * 4;
      // r % 8 == 0: 4 k are all in or all out
      a[i] = m < rows && k < r ? *reinterpret_cast<const float4*>(lat + m * lat_stride + k) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int e = threadIdx.x + i * kThreads, n = e / (kChunk / 8), k = k0 + (e % (kChunk / 8)) * 8;
      // r % 8 == 0: 8 k are all in or all out
      b[i] = n < columns && k < r ? __ldg(reinterpret_cast<const uint4*>(w + n * r + k)) : make_uint4(0, 0, 0, 0);
    }
  }
  __device__ __forceinline__ void store(Stage<true>& s) const {
#pragma unroll
    for (int i = 0; i < kAVectors; ++i) {
      const int e = threadIdx.x + i * kThreads, m = e / (kChunk / 4), k = (e % (kChunk / 4)) * 4;
      const float x[4] = {a[i].x, a[i].y, a[i].z, a[i].w};
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const __nv_bfloat16 hi = __float2bfloat16_rn(x[c]);
        s.a[0][m][k + c] = hi;
        s.a[1][m][k + c] = __float2bfloat16_rn(x[c] - __bfloat162float(hi));  // the difference is exact in fp32
      }
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int e = threadIdx.x + i * kThreads, n = e / (kChunk / 8), k = (e % (kChunk / 8)) * 8;
      *reinterpret_cast<uint4*>(&s.b[n][k]) = b[i];
    }
  }
};

// grid (ceil(r / 64), heads, ceil(tokens / 64)).
__global__ void __launch_bounds__(kThreads, 2)
    absorb_q_kernel(const __nv_bfloat16* __restrict__ q, int64_t q_stride, const __nv_bfloat16* __restrict__ kv_b,
                    MlaDims d, int tokens, __nv_bfloat16* __restrict__ q_abs) {
  __shared__ __align__(16) Stage<false> s;
  const int h = blockIdx.y, n0 = blockIdx.x * kTileColumns, t0 = blockIdx.z * kTileTokens;
  const int r = d.latent_rank, qk = d.nope_dim + d.rope_dim, out_width = r + d.rope_dim;
  AbsorbQLoader loader{q + int64_t(t0) * q_stride + int64_t(h) * qk,
                       q_stride,
                       kv_b + int64_t(h) * (d.nope_dim + d.value_dim) * r + n0,
                       min(kTileTokens, tokens - t0),
                       d.nope_dim,
                       r - n0,
                       r,
                       {},
                       {}};
  float acc[kWarpColumns / 8][4] = {};
  multiply_chunks(loader, d.nope_dim, s, acc);
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

// grid (ceil(dv / 64), heads, ceil(tokens / 64)).
__global__ void __launch_bounds__(kThreads, 2)
    apply_v_kernel(const float* __restrict__ lat, const __nv_bfloat16* __restrict__ kv_b,
                   const __nv_bfloat16* __restrict__ gate, int64_t gate_stride, MlaDims d, int tokens,
                   __nv_bfloat16* __restrict__ out) {
  __shared__ __align__(16) Stage<true> s;
  const int h = blockIdx.y, n0 = blockIdx.x * kTileColumns, t0 = blockIdx.z * kTileTokens;
  const int r = d.latent_rank, dv = d.value_dim;
  ApplyVLoader loader{lat + (int64_t(t0) * d.heads + h) * r,
                      int64_t(d.heads) * r,
                      kv_b + (int64_t(h) * (d.nope_dim + dv) + d.nope_dim + n0) * r,
                      min(kTileTokens, tokens - t0),
                      dv - n0,
                      r,
                      {},
                      {}};
  float acc[kWarpColumns / 8][4] = {};
  multiply_chunks(loader, r, s, acc);
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

bool absorb_q_applies(const MlaDims& d, const __nv_bfloat16* kv_b) {
  return d.latent_rank % 8 == 0 && reinterpret_cast<uintptr_t>(kv_b) % 16 == 0;
}

bool apply_v_applies(const MlaDims& d, const __nv_bfloat16* kv_b, const float* lat) {
  return absorb_q_applies(d, kv_b) && reinterpret_cast<uintptr_t>(lat) % 16 == 0;
}

cudaError_t absorb_q(const __nv_bfloat16* q, int64_t q_stride, const __nv_bfloat16* kv_b, const MlaDims& d, int tokens,
                     __nv_bfloat16* q_abs, cudaStream_t stream) {
  const dim3 grid = grid_for(d.latent_rank, d, tokens);
  if (!absorb_q_applies(d, kv_b) || !grid_fits(grid)) return cudaErrorInvalidValue;
  absorb_q_kernel<<<grid, kThreads, 0, stream>>>(q, q_stride, kv_b, d, tokens, q_abs);
  return cudaGetLastError();
}

cudaError_t apply_v(const float* lat, const __nv_bfloat16* kv_b, const __nv_bfloat16* gate, int64_t gate_stride,
                    const MlaDims& d, int tokens, __nv_bfloat16* out, cudaStream_t stream) {
  const dim3 grid = grid_for(d.value_dim, d, tokens);
  if (!apply_v_applies(d, kv_b, lat) || !grid_fits(grid)) return cudaErrorInvalidValue;
  apply_v_kernel<<<grid, kThreads, 0, stream>>>(lat, kv_b, gate, gate_stride, d, tokens, out);
  return cudaGetLastError();
}

}  // namespace k3::kernels::mla_absorb_mma
