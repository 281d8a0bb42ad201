#include "kernels/mla_absorb.h"

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
  const int column = blockIdx.x * 8 + warp;  // in [0, heads·dv)
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
    k[s * d.heads * qk + e] = i < d.nope_dim ? src[h * kv_width + i]
                                             : latent[s * (d.latent_rank + d.rope_dim) + d.latent_rank + i - d.nope_dim];
  }
  for (int e = threadIdx.x; e < d.heads * d.value_dim; e += blockDim.x) {
    const int h = e / d.value_dim, i = e % d.value_dim;
    v[s * d.heads * d.value_dim + e] = src[h * kv_width + d.nope_dim + i];
  }
}

bool valid(const MlaDims& d) {
  return d.heads > 0 && d.nope_dim > 0 && d.rope_dim >= 0 && d.value_dim > 0 && d.latent_rank > 0;
}

}  // namespace

cudaError_t mla_absorb_q_bf16(const __nv_bfloat16* q, int64_t q_row_stride, const __nv_bfloat16* kv_b,
                              const MlaDims& dims, int tokens, __nv_bfloat16* q_abs, cudaStream_t stream) {
  if (!valid(dims) || tokens < 0 || q_row_stride < int64_t(dims.heads) * (dims.nope_dim + dims.rope_dim) || !q ||
      !kv_b || !q_abs) {
    return cudaErrorInvalidValue;
  }
  if (tokens == 0) return cudaSuccess;
  if ((tokens + kTokenTile - 1) / kTokenTile > 65535) return cudaErrorInvalidValue;  // grid.z
  const dim3 grid((dims.latent_rank + 31) / 32, dims.heads, (tokens + kTokenTile - 1) / kTokenTile);
  const size_t smem = sizeof(float) * kTokenTile * dims.nope_dim;
  if (smem > 48 * 1024) return cudaErrorInvalidValue;
  absorb_q_kernel<<<grid, 32, smem, stream>>>(q, q_row_stride, kv_b, dims, tokens, q_abs);
  return cudaGetLastError();
}

cudaError_t mla_apply_v_bf16(const float* latent_out, const __nv_bfloat16* kv_b, const __nv_bfloat16* gate,
                             int64_t gate_row_stride, const MlaDims& dims, int tokens, __nv_bfloat16* out,
                             cudaStream_t stream) {
  if (!valid(dims) || tokens < 0 || dims.value_dim % 8 != 0 || !latent_out || !kv_b || !out ||
      (gate && gate_row_stride < int64_t(dims.heads) * dims.value_dim)) {
    return cudaErrorInvalidValue;
  }
  if (tokens == 0) return cudaSuccess;
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
