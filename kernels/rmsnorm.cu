#include "kernels/rmsnorm.h"

namespace k3::kernels {

namespace {

constexpr int kThreads = 256;

__device__ float to_float(float v) { return v; }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ void store(float* p, float v) { *p = v; }
__device__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Sum over the block of one value per thread.
__device__ float block_sum(float v) {
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? partial[lane] : 0.0f;
  if (warp == 0) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

template <typename T>
__global__ void rmsnorm_block_per_row(const T* x, int64_t x_stride, const __nv_bfloat16* w, float eps, T* y,
                                      int64_t y_stride, int64_t width) {
  const T* row = x + blockIdx.x * x_stride;
  T* out = y + blockIdx.x * y_stride;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    const float v = to_float(row[i]);
    sum_sq += v * v;
  }
  const float inv = rsqrtf(block_sum(sum_sq) / float(width) + eps);
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    store(out + i, to_float(row[i]) * inv * __bfloat162float(w[i]));
  }
}

// bf16 rows with 16-byte vectors (8 values per load/store); the row stays in L1 between the two passes.
__global__ void rmsnorm_block_per_row_vec8(const __nv_bfloat16* x, int64_t x_stride, const __nv_bfloat16* w, float eps,
                                           __nv_bfloat16* y, int64_t y_stride, int64_t width) {
  const uint4* row = reinterpret_cast<const uint4*>(x + blockIdx.x * x_stride);
  uint4* out = reinterpret_cast<uint4*>(y + blockIdx.x * y_stride);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  const int64_t vectors = width / 8;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
    const uint4 u = row[i];
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]);
      sum_sq += f.x * f.x + f.y * f.y;
    }
  }
  const float inv = rsqrtf(block_sum(sum_sq) / float(width) + eps);
  for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
    const uint4 u = row[i], wu = wv[i];
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
    const __nv_bfloat162* hw = reinterpret_cast<const __nv_bfloat162*>(&wu);
    uint4 o;
    __nv_bfloat162* ho = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]), g = __bfloat1622float2(hw[j]);
      ho[j] = __floats2bfloat162_rn(f.x * inv * g.x, f.y * inv * g.y);
    }
    out[i] = o;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T>
cudaError_t launch(const T* x, int64_t xs, const __nv_bfloat16* w, float eps, T* y, int64_t ys, int64_t rows,
                   int64_t width, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  rmsnorm_block_per_row<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, xs, w, eps, y, ys, width);
  return cudaGetLastError();
}

}  // namespace

cudaError_t rmsnorm_bf16(const __nv_bfloat16* x, int64_t xs, const __nv_bfloat16* w, float eps, __nv_bfloat16* y,
                         int64_t ys, int64_t rows, int64_t width, cudaStream_t stream) {
  // 16-byte vectors when every row and the weight start on a 16-byte boundary.
  if (rows > 0 && width % 8 == 0 && xs % 8 == 0 && ys % 8 == 0 && aligned16(x) && aligned16(y) && aligned16(w)) {
    rmsnorm_block_per_row_vec8<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, xs, w, eps, y, ys, width);
    return cudaGetLastError();
  }
  return launch(x, xs, w, eps, y, ys, rows, width, stream);
}

cudaError_t rmsnorm_f32(const float* x, int64_t xs, const __nv_bfloat16* w, float eps, float* y, int64_t ys,
                        int64_t rows, int64_t width, cudaStream_t stream) {
  return launch(x, xs, w, eps, y, ys, rows, width, stream);
}

}  // namespace k3::kernels
