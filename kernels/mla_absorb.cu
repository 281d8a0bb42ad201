#include "kernels/mla_absorb.h"

#include "kernels/mla_absorb_mma.h"

#include <cstdint>

namespace k3::kernels {
namespace {

constexpr int kTokenTile = 8;

// grid (ceil(r / 32), heads, ceil(tokens / 8)); block 32 threads: thread = latent column j.
__global__ void absorb_q_kernel(const __nv_bfloat16* q, int64_t q_stride, const __nv_bfloat16* kv_b, MlaDims d,
                                int tokens, __nv_bfloat16* q_abs) {
  extern __shared__ float q_tile[];  // [kTokenTile, dn]
  const int h = blockIdx.y, j = blockIdx.x * 32 + threadIdx.x, t0 = blockIdx.z * kTokenTile;
  const int qk = d.nope_dim + d.rope_dim, out_width = d.latent_rank + d.rope_dim;
  const int nt = min(kTokenTile, tokens - t0);
  for (int e = threadIdx.x; e < nt * d.nope_dim; e += blockDim.x) {
    const int t = e / d.nope_dim, i = e % d.nope_dim;
    q_tile[e] = __bfloat162float(q[int64_t(t0 + t) * q_stride + int64_t(h) * qk + i]);
  }
  __syncthreads();
  if (j < d.latent_rank) {
    float acc[kTokenTile] = {};
    const __nv_bfloat16* w = kv_b + int64_t(h) * (d.nope_dim + d.value_dim) * d.latent_rank + j;
    for (int i = 0; i < d.nope_dim; ++i) {
      const float wv = __bfloat162float(w[int64_t(i) * d.latent_rank]);
      for (int t = 0; t < kTokenTile; ++t) acc[t] += (t < nt ? q_tile[t * d.nope_dim + i] : 0.0f) * wv;
    }
    for (int t = 0; t < nt; ++t) {
      q_abs[(int64_t(t0 + t) * d.heads + h) * out_width + j] = __float2bfloat16_rn(acc[t]);
    }
  }
  // The k_r half is copied by the blocks of the first column tile.
  if (blockIdx.x == 0) {
    for (int e = threadIdx.x; e < nt * d.rope_dim; e += blockDim.x) {
      const int t = e / d.rope_dim, i = e % d.rope_dim;
      q_abs[(int64_t(t0 + t) * d.heads + h) * out_width + d.latent_rank + i] =
          q[int64_t(t0 + t) * q_stride + int64_t(h) * qk + d.nope_dim + i];
    }
  }
}

// grid (heads · dv / 8, ceil(tokens / 8)); block 256 = 8 warps, warp = one output column c of one head.
__global__ void apply_v_kernel(const float* lat, const __nv_bfloat16* kv_b, const __nv_bfloat16* gate,
                               int64_t gate_stride, MlaDims d, int tokens, __nv_bfloat16* out) {
  extern __shared__ float lat_tile[];  // [kTokenTile, r] of the block's head
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int column = blockIdx.x * 8 + warp;      // in [0, heads·dv)
  const int h = (blockIdx.x * 8) / d.value_dim;  // dv % 8 == 0: all 8 warps share the head
  const int c = column % d.value_dim, t0 = blockIdx.y * kTokenTile;
  const int nt = min(kTokenTile, tokens - t0);
  for (int e = threadIdx.x; e < nt * d.latent_rank; e += blockDim.x) {
    const int t = e / d.latent_rank, j = e % d.latent_rank;
    lat_tile[e] = lat[(int64_t(t0 + t) * d.heads + h) * d.latent_rank + j];
  }
  __syncthreads();
  const __nv_bfloat16* w = kv_b + (int64_t(h) * (d.nope_dim + d.value_dim) + d.nope_dim + c) * d.latent_rank;
  float acc[kTokenTile] = {};
  for (int j = lane; j < d.latent_rank; j += 32) {
    const float wv = __bfloat162float(w[j]);
    for (int t = 0; t < kTokenTile; ++t) acc[t] += (t < nt ? lat_tile[t * d.latent_rank + j] : 0.0f) * wv;
  }
  for (int t = 0; t < kTokenTile; ++t) {
    for (int offset = 16; offset > 0; offset /= 2) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], offset);
  }
  if (lane == 0) {
    for (int t = 0; t < nt; ++t) {
      float y = acc[t];
      if (gate) y /= 1.0f + expf(-__bfloat162float(gate[int64_t(t0 + t) * gate_stride + column]));
      out[int64_t(t0 + t) * d.heads * d.value_dim + column] = __float2bfloat16_rn(y);
    }
  }
}

__global__ void assemble_kv_kernel(const __nv_bfloat16* kv, const __nv_bfloat16* latent, MlaDims d, __nv_bfloat16* k,
                                   __nv_bfloat16* v) {
  const int64_t s = blockIdx.x;
  const int kv_width = d.nope_dim + d.value_dim, qk = d.nope_dim + d.rope_dim;
  const __nv_bfloat16* src = kv + s * d.heads * kv_width;
  for (int e = threadIdx.x; e < d.heads * qk; e += blockDim.x) {
    const int h = e / qk, i = e % qk;
    k[s * d.heads * qk + e] = i < d.nope_dim
                                  ? src[h * kv_width + i]
                                  : latent[s * (d.latent_rank + d.rope_dim) + d.latent_rank + i - d.nope_dim];
  }
  for (int e = threadIdx.x; e < d.heads * d.value_dim; e += blockDim.x) {
    const int h = e / d.value_dim, i = e % d.value_dim;
    v[s * d.heads * d.value_dim + e] = src[h * kv_width + d.nope_dim + i];
  }
}

// ---- weight_stream ----

constexpr int kStreamWarps = 8;         // warps per block (256 threads)
constexpr int kQColumnsPerBlock = 256;  // absorb_q: 32 lanes × 8 latent columns
constexpr int kQLoadsInFlight = 8;      // absorb_q: kv_b rows loaded per lane before they are used
constexpr int kVColumnsPerWarp = 4;     // apply_v: output columns (kv_b rows) per warp
constexpr int kVColumnsPerBlock = kStreamWarps * kVColumnsPerWarp;

// The q tile's floats in shared memory, rounded up to a multiple of 4 so the partial sums after it are 16-byte aligned.
__host__ __device__ constexpr int q_tile_floats(int tokens, int nope_dim) { return (tokens * nope_dim + 3) / 4 * 4; }

__device__ __forceinline__ void unpack_bf16x8(const uint4& packed, float (&out)[8]) {
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    out[2 * e] = __uint_as_float(words[e] << 16);              // the low bf16 of the word
    out[2 * e + 1] = __uint_as_float(words[e] & 0xffff0000u);  // the high one
  }
}

// grid (ceil(r / 256), heads, ceil(tokens / TT)); block 256. Lane = latent columns j0 .. j0+7, warp w = rows
// i ≡ w (mod 8) of the head's W_uk block; shared memory: the q tile [TT, dn] (zero past the last token), then the
// warps' partial sums [8, 256].
template <int TT>
__global__ void __launch_bounds__(kStreamWarps * 32)
    absorb_q_stream_kernel(const __nv_bfloat16* __restrict__ q, int64_t q_stride,
                           const __nv_bfloat16* __restrict__ kv_b, MlaDims d, int tokens,
                           __nv_bfloat16* __restrict__ q_abs) {
  extern __shared__ __align__(16) float stream_smem[];
  float* q_tile = stream_smem;
  float* partial = stream_smem + q_tile_floats(TT, d.nope_dim);  // 16-byte aligned for its float4 stores
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.y, t0 = blockIdx.z * TT, dn = d.nope_dim, r = d.latent_rank;
  const int qk = d.nope_dim + d.rope_dim, out_width = r + d.rope_dim;
  const int nt = min(TT, tokens - t0);
  for (int e = threadIdx.x; e < TT * dn; e += blockDim.x) {
    const int t = e / dn, i = e % dn;
    q_tile[e] = t < nt ? __bfloat162float(q[int64_t(t0 + t) * q_stride + int64_t(h) * qk + i]) : 0.0f;
  }
  __syncthreads();

  const int j0 = blockIdx.x * kQColumnsPerBlock + lane * 8;
  const bool active = j0 < r;  // r % 8 == 0: a lane's 8 columns are all in or all out
  const __nv_bfloat16* w = kv_b + int64_t(h) * (d.nope_dim + d.value_dim) * r + (active ? j0 : 0);
  float acc[TT][8] = {};
  for (int base = warp; base < dn; base += kStreamWarps * kQLoadsInFlight) {
    uint4 packed[kQLoadsInFlight];
#pragma unroll
    for (int b = 0; b < kQLoadsInFlight; ++b) {
      const int i = base + b * kStreamWarps;
      packed[b] = active && i < dn ? __ldg(reinterpret_cast<const uint4*>(w + int64_t(i) * r)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int b = 0; b < kQLoadsInFlight; ++b) {
      const int i = base + b * kStreamWarps;
      if (i < dn) {
        float wf[8];
        unpack_bf16x8(packed[b], wf);
#pragma unroll
        for (int t = 0; t < TT; ++t) {
          const float qv = q_tile[t * dn + i];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[t][e] = fmaf(qv, wf[e], acc[t][e]);
        }
      }
    }
  }
  // Sum the 8 warps' partials, one token at a time: thread = column j of the block.
#pragma unroll
  for (int t = 0; t < TT; ++t) {
    if (t < nt) {  // uniform over the block
      float4* mine = reinterpret_cast<float4*>(partial + warp * kQColumnsPerBlock + lane * 8);
      mine[0] = make_float4(acc[t][0], acc[t][1], acc[t][2], acc[t][3]);
      mine[1] = make_float4(acc[t][4], acc[t][5], acc[t][6], acc[t][7]);
      __syncthreads();
      const int j = blockIdx.x * kQColumnsPerBlock + int(threadIdx.x);
      if (j < r) {
        float sum = 0.0f;
#pragma unroll
        for (int wi = 0; wi < kStreamWarps; ++wi) sum += partial[wi * kQColumnsPerBlock + threadIdx.x];
        q_abs[(int64_t(t0 + t) * d.heads + h) * out_width + j] = __float2bfloat16_rn(sum);
      }
      __syncthreads();
    }
  }
  if (blockIdx.x == 0) {  // the k_r half, as is
    for (int e = threadIdx.x; e < nt * d.rope_dim; e += blockDim.x) {
      const int t = e / d.rope_dim, i = e % d.rope_dim;
      q_abs[(int64_t(t0 + t) * d.heads + h) * out_width + r + i] =
          q[int64_t(t0 + t) * q_stride + int64_t(h) * qk + d.nope_dim + i];
    }
  }
}

// grid (heads · ceil(dv / 32), ceil(tokens / TT)); block 256: warp = output columns c0 .. c0+3 of one head (kv_b
// rows h·(dn+dv) + dn + c), lane = j0 .. j0+7 of each row for j0 = 8·lane + 256·n; shared memory: the latent tile
// [TT, r] (zero past the last token).
template <int TT>
__global__ void __launch_bounds__(kStreamWarps * 32)
    apply_v_stream_kernel(const float* __restrict__ lat, const __nv_bfloat16* __restrict__ kv_b,
                          const __nv_bfloat16* __restrict__ gate, int64_t gate_stride, MlaDims d, int tokens,
                          __nv_bfloat16* __restrict__ out) {
  extern __shared__ __align__(16) float stream_smem[];
  float* lat_tile = stream_smem;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = d.latent_rank, dv = d.value_dim;
  const int blocks_per_head = (dv + kVColumnsPerBlock - 1) / kVColumnsPerBlock;
  const int h = blockIdx.x / blocks_per_head;
  const int c0 = (blockIdx.x % blocks_per_head) * kVColumnsPerBlock + warp * kVColumnsPerWarp;
  const int t0 = blockIdx.y * TT, nt = min(TT, tokens - t0);
  for (int e = threadIdx.x; e < TT * r; e += blockDim.x) {
    const int t = e / r, j = e % r;
    lat_tile[e] = t < nt ? lat[(int64_t(t0 + t) * d.heads + h) * r + j] : 0.0f;
  }
  __syncthreads();

  const __nv_bfloat16* w = kv_b + (int64_t(h) * (d.nope_dim + dv) + d.nope_dim) * r;  // row c at w + c·r
  float acc[kVColumnsPerWarp][TT] = {};
  for (int j0 = lane * 8; j0 < r; j0 += 256) {
    uint4 packed[kVColumnsPerWarp];
#pragma unroll
    for (int cc = 0; cc < kVColumnsPerWarp; ++cc) {
      const int c = c0 + cc;
      packed[cc] = c < dv ? __ldg(reinterpret_cast<const uint4*>(w + int64_t(c) * r + j0)) : make_uint4(0, 0, 0, 0);
    }
    float x[TT][8];
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      const float4 lo = *reinterpret_cast<const float4*>(lat_tile + t * r + j0);
      const float4 hi = *reinterpret_cast<const float4*>(lat_tile + t * r + j0 + 4);
      const float values[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) x[t][e] = values[e];
    }
#pragma unroll
    for (int cc = 0; cc < kVColumnsPerWarp; ++cc) {
      float wf[8];
      unpack_bf16x8(packed[cc], wf);
#pragma unroll
      for (int t = 0; t < TT; ++t) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[cc][t] = fmaf(x[t][e], wf[e], acc[cc][t]);
      }
    }
  }
#pragma unroll
  for (int cc = 0; cc < kVColumnsPerWarp; ++cc) {
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      if (t < nt) {  // uniform over the warp
        float y = acc[cc][t];
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) y += __shfl_xor_sync(0xffffffffu, y, offset);
        const int c = c0 + cc;
        if (lane == t && c < dv) {  // every lane holds the sum; lane t writes token t
          const int64_t column = int64_t(h) * dv + c;
          if (gate) y /= 1.0f + expf(-__bfloat162float(gate[int64_t(t0 + t) * gate_stride + column]));
          out[int64_t(t0 + t) * d.heads * dv + column] = __float2bfloat16_rn(y);
        }
      }
    }
  }
}

// The token tile of the weight_stream kernels: the smallest of 1, 2, 4, 8 that holds `tokens`, else 8.
int stream_token_tile(int tokens) { return tokens <= 1 ? 1 : tokens <= 2 ? 2 : tokens <= 4 ? 4 : 8; }

bool stream_applies(const MlaDims& d, const __nv_bfloat16* kv_b) {
  return d.latent_rank % 8 == 0 && reinterpret_cast<uintptr_t>(kv_b) % 16 == 0;
}

template <int TT>
cudaError_t launch_absorb_q_stream(const __nv_bfloat16* q, int64_t q_stride, const __nv_bfloat16* kv_b,
                                   const MlaDims& d, int tokens, __nv_bfloat16* q_abs, cudaStream_t stream) {
  const size_t smem = sizeof(float) * (size_t(q_tile_floats(TT, d.nope_dim)) + kStreamWarps * kQColumnsPerBlock);
  if (smem > 48 * 1024 || (tokens + TT - 1) / TT > 65535) return cudaErrorInvalidValue;  // grid.z
  const dim3 grid((d.latent_rank + kQColumnsPerBlock - 1) / kQColumnsPerBlock, d.heads, (tokens + TT - 1) / TT);
  absorb_q_stream_kernel<TT><<<grid, kStreamWarps * 32, smem, stream>>>(q, q_stride, kv_b, d, tokens, q_abs);
  return cudaGetLastError();
}

template <int TT>
cudaError_t launch_apply_v_stream(const float* lat, const __nv_bfloat16* kv_b, const __nv_bfloat16* gate,
                                  int64_t gate_stride, const MlaDims& d, int tokens, __nv_bfloat16* out,
                                  cudaStream_t stream) {
  const size_t smem = sizeof(float) * size_t(TT) * d.latent_rank;
  const int64_t blocks = int64_t(d.heads) * ((d.value_dim + kVColumnsPerBlock - 1) / kVColumnsPerBlock);
  if (smem > 48 * 1024 || blocks > INT32_MAX || (tokens + TT - 1) / TT > 65535) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(blocks), (tokens + TT - 1) / TT);
  apply_v_stream_kernel<TT><<<grid, kStreamWarps * 32, smem, stream>>>(lat, kv_b, gate, gate_stride, d, tokens, out);
  return cudaGetLastError();
}

bool valid(const MlaDims& d) {
  return d.heads > 0 && d.nope_dim > 0 && d.rope_dim >= 0 && d.value_dim > 0 && d.latent_rank > 0;
}

}  // namespace

cudaError_t mla_absorb_q_bf16(const __nv_bfloat16* q, int64_t q_row_stride, const __nv_bfloat16* kv_b,
                              const MlaDims& dims, int tokens, __nv_bfloat16* q_abs, cudaStream_t stream,
                              MlaAbsorbAlgorithm algorithm) {
  if (!valid(dims) || tokens < 0 || q_row_stride < int64_t(dims.heads) * (dims.nope_dim + dims.rope_dim) || !q ||
      !kv_b || !q_abs) {
    return cudaErrorInvalidValue;
  }
  const bool stream_ok = stream_applies(dims, kv_b);
  if (algorithm == MlaAbsorbAlgorithm::weight_stream && !stream_ok) return cudaErrorInvalidValue;
  const bool mma_ok = mla_absorb_mma::absorb_q_applies(dims, kv_b);
  if (algorithm == MlaAbsorbAlgorithm::mma_tiled && !mma_ok) return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  if (algorithm == MlaAbsorbAlgorithm::mma_tiled ||
      (algorithm == MlaAbsorbAlgorithm::automatic && mma_ok && tokens > kMlaAbsorbQStreamMaxTokens)) {
    return mla_absorb_mma::absorb_q(q, q_row_stride, kv_b, dims, tokens, q_abs, stream);
  }
  if (algorithm != MlaAbsorbAlgorithm::per_column && stream_ok) {
    switch (stream_token_tile(tokens)) {
      case 1: return launch_absorb_q_stream<1>(q, q_row_stride, kv_b, dims, tokens, q_abs, stream);
      case 2: return launch_absorb_q_stream<2>(q, q_row_stride, kv_b, dims, tokens, q_abs, stream);
      case 4: return launch_absorb_q_stream<4>(q, q_row_stride, kv_b, dims, tokens, q_abs, stream);
      default: return launch_absorb_q_stream<8>(q, q_row_stride, kv_b, dims, tokens, q_abs, stream);
    }
  }
  if ((tokens + kTokenTile - 1) / kTokenTile > 65535) return cudaErrorInvalidValue;  // grid.z
  const dim3 grid((dims.latent_rank + 31) / 32, dims.heads, (tokens + kTokenTile - 1) / kTokenTile);
  const size_t smem = sizeof(float) * kTokenTile * dims.nope_dim;
  if (smem > 48 * 1024) return cudaErrorInvalidValue;
  absorb_q_kernel<<<grid, 32, smem, stream>>>(q, q_row_stride, kv_b, dims, tokens, q_abs);
  return cudaGetLastError();
}

cudaError_t mla_apply_v_bf16(const float* latent_out, const __nv_bfloat16* kv_b, const __nv_bfloat16* gate,
                             int64_t gate_row_stride, const MlaDims& dims, int tokens, __nv_bfloat16* out,
                             cudaStream_t stream, MlaAbsorbAlgorithm algorithm) {
  if (!valid(dims) || tokens < 0 || dims.value_dim % 8 != 0 || !latent_out || !kv_b || !out ||
      (gate && gate_row_stride < int64_t(dims.heads) * dims.value_dim)) {
    return cudaErrorInvalidValue;
  }
  const bool stream_ok = stream_applies(dims, kv_b);
  if (algorithm == MlaAbsorbAlgorithm::weight_stream && !stream_ok) return cudaErrorInvalidValue;
  const bool mma_ok = mla_absorb_mma::apply_v_applies(dims, kv_b, latent_out);
  if (algorithm == MlaAbsorbAlgorithm::mma_tiled && !mma_ok) return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  // automatic: weight_stream only for a few tokens, where it beats the tiled product (kMlaApplyVStreamMaxTokens).
  const bool stream_wins = tokens <= kMlaApplyVStreamMaxTokens;
  if (algorithm == MlaAbsorbAlgorithm::mma_tiled ||
      (algorithm == MlaAbsorbAlgorithm::automatic && mma_ok && !stream_wins)) {
    return mla_absorb_mma::apply_v(latent_out, kv_b, gate, gate_row_stride, dims, tokens, out, stream);
  }
  if (stream_ok &&
      (algorithm == MlaAbsorbAlgorithm::weight_stream || (algorithm == MlaAbsorbAlgorithm::automatic && stream_wins))) {
    switch (stream_token_tile(tokens)) {
      case 1: return launch_apply_v_stream<1>(latent_out, kv_b, gate, gate_row_stride, dims, tokens, out, stream);
      case 2: return launch_apply_v_stream<2>(latent_out, kv_b, gate, gate_row_stride, dims, tokens, out, stream);
      case 4: return launch_apply_v_stream<4>(latent_out, kv_b, gate, gate_row_stride, dims, tokens, out, stream);
      default: return launch_apply_v_stream<8>(latent_out, kv_b, gate, gate_row_stride, dims, tokens, out, stream);
    }
  }
  const size_t smem = sizeof(float) * kTokenTile * dims.latent_rank;
  if (smem > 48 * 1024 || (tokens + kTokenTile - 1) / kTokenTile > 65535) return cudaErrorInvalidValue;  // grid.y
  const dim3 grid(dims.heads * dims.value_dim / 8, (tokens + kTokenTile - 1) / kTokenTile);
  apply_v_kernel<<<grid, 256, smem, stream>>>(latent_out, kv_b, gate, gate_row_stride, dims, tokens, out);
  return cudaGetLastError();
}

cudaError_t mla_assemble_kv_bf16(const __nv_bfloat16* kv, const __nv_bfloat16* latent, const MlaDims& dims,
                                 int64_t tokens, __nv_bfloat16* k, __nv_bfloat16* v, cudaStream_t stream) {
  if (!valid(dims) || tokens < 0 || !kv || !latent || !k || !v) return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  assemble_kv_kernel<<<unsigned(tokens), 256, 0, stream>>>(kv, latent, dims, k, v);
  return cudaGetLastError();
}

}  // namespace k3::kernels
