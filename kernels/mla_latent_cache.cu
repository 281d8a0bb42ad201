#include "kernels/mla_latent_cache.h"

namespace k3::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void mla_cache_append_kernel(const __nv_bfloat16* kv, int64_t kv_stride, const __nv_bfloat16* w, float eps,
                                        int r, int dr, const int32_t* positions, int64_t first_position,
                                        const int32_t* sequence_rows, const int32_t* page_table, int max_pages,
                                        int page_tokens, __nv_bfloat16* pages) {
  const int t = blockIdx.x;
  const __nv_bfloat16* row = kv + int64_t(t) * kv_stride;
  float s = 0.0f;
  for (int i = threadIdx.x; i < r; i += blockDim.x) {
    const float v = __bfloat162float(row[i]);
    s += v * v;
  }
  __shared__ float warp_sums[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  float total = 0.0f;
  for (int j = 0; j < kThreads / 32; ++j) total += warp_sums[j];
  const float inv_rms = rsqrtf(total / float(r) + eps);
  const int64_t pos = positions ? int64_t(positions[t]) : first_position + t;
  const int seq = sequence_rows ? sequence_rows[t] : 0;
  const int64_t page = page_table[int64_t(seq) * max_pages + pos / page_tokens];
  __nv_bfloat16* dst = pages + (page * page_tokens + pos % page_tokens) * int64_t(r + dr);
  for (int i = threadIdx.x; i < r + dr; i += blockDim.x) {
    const float v = __bfloat162float(row[i]);
    dst[i] = i < r ? __float2bfloat16_rn(v * inv_rms * __bfloat162float(w[i])) : row[i];
  }
}

__global__ void mla_cache_gather_kernel(const __nv_bfloat16* pages, const int32_t* page_table_row, int page_tokens,
                                        int width, __nv_bfloat16* out) {
  const int64_t t = blockIdx.x;
  const int64_t page = page_table_row[t / page_tokens];
  const __nv_bfloat16* src = pages + (page * page_tokens + t % page_tokens) * width;
  __nv_bfloat16* dst = out + t * width;
  if (width % 8 == 0) {
    for (int i = threadIdx.x; i < width / 8; i += blockDim.x) {
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    }
  } else {
    for (int i = threadIdx.x; i < width; i += blockDim.x) dst[i] = src[i];
  }
}

}  // namespace

cudaError_t mla_cache_append_bf16(const __nv_bfloat16* kv, int64_t kv_row_stride, const __nv_bfloat16* norm_weight,
                                  float eps, int latent_rank, int rope_dim, int tokens, const int32_t* positions,
                                  int64_t first_position, const int32_t* sequence_rows, const int32_t* page_table,
                                  int max_pages_per_sequence, int page_tokens, __nv_bfloat16* pages,
                                  cudaStream_t stream) {
  if (tokens < 0 || latent_rank <= 0 || rope_dim < 0 || kv_row_stride < latent_rank + rope_dim || page_tokens <= 0 ||
      max_pages_per_sequence <= 0 || first_position < 0 || !kv || !norm_weight || !page_table || !pages) {
    return cudaErrorInvalidValue;
  }
  if (tokens == 0) return cudaSuccess;
  mla_cache_append_kernel<<<tokens, kThreads, 0, stream>>>(kv, kv_row_stride, norm_weight, eps, latent_rank, rope_dim,
                                                           positions, first_position, sequence_rows, page_table,
                                                           max_pages_per_sequence, page_tokens, pages);
  return cudaGetLastError();
}

cudaError_t mla_cache_gather_bf16(const __nv_bfloat16* pages, const int32_t* page_table_row, int page_tokens, int width,
                                  int64_t tokens, __nv_bfloat16* out, cudaStream_t stream) {
  if (tokens < 0 || page_tokens <= 0 || width <= 0 || !pages || !page_table_row || !out) return cudaErrorInvalidValue;
  if (width % 8 == 0 && (reinterpret_cast<uintptr_t>(pages) % 16 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0)) {
    return cudaErrorMisalignedAddress;
  }
  if (tokens == 0) return cudaSuccess;
  mla_cache_gather_kernel<<<unsigned(tokens), 128, 0, stream>>>(pages, page_table_row, page_tokens, width, out);
  return cudaGetLastError();
}

}  // namespace k3::kernels
