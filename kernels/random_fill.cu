#include "kernels/random_fill.h"

#include <algorithm>
#include <cmath>

namespace k3::kernels {
namespace {

constexpr int kThreads = 256;

int grid_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536)); }

__global__ void fill_normal_bf16_kernel(__nv_bfloat16* out, int64_t n, float mean, float stddev, uint64_t key) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16_rn(mean + stddev * random_normal(key, uint64_t(i)));
  }
}

__global__ void fill_normal_f32_kernel(float* out, int64_t n, float mean, float stddev, uint64_t key) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = mean + stddev * random_normal(key, uint64_t(i));
  }
}

__global__ void fill_uniform_f32_kernel(float* out, int64_t n, float lo, float hi, uint64_t key) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = lo + (hi - lo) * random_uniform(key, uint64_t(i));
  }
}

__global__ void fill_normal_bf16_window_kernel(__nv_bfloat16* out, int64_t n, RandomWindow w, float mean, float stddev,
                                               uint64_t key) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16_rn(mean + stddev * random_normal(key, w.index(i)));
  }
}

__global__ void fill_normal_f32_window_kernel(float* out, int64_t n, RandomWindow w, float mean, float stddev,
                                              uint64_t key) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = mean + stddev * random_normal(key, w.index(i));
  }
}

__global__ void fill_uniform_f32_window_kernel(float* out, int64_t n, RandomWindow w, float lo, float hi,
                                               uint64_t key) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = lo + (hi - lo) * random_uniform(key, w.index(i));
  }
}

bool valid(int64_t n, const void* out, RandomWindow w) {
  return n >= 0 && (n == 0 || out != nullptr) && w.block > 0 && w.stride >= w.block && w.base >= 0;
}

// E2M1 magnitude code by midpoints, ties to the even code (as mx_format's encoder).
__device__ uint8_t e2m1_code(float v) {
  const float a = fabsf(v);
  const int code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return uint8_t((signbit(v) ? 0x8 : 0x0) | code);
}

// One thread per 32-element block: the block's normals, its E8M0 scale and 16 packed bytes.
__global__ void mxfp4_fill_normal_kernel(uint8_t* packed, uint8_t* scales, int64_t blocks, float stddev, uint64_t key) {
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t first = b * 32;  // element index in the row-major [rows, cols] matrix (cols % 32 == 0)
    float v[32];
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) {
      v[i] = stddev * random_normal(key, uint64_t(first + i));
      amax = fmaxf(amax, fabsf(v[i]));
    }
    uint8_t scale_byte = 0;
    float inv_scale = 0.0f;
    if (amax > 0.0f) {
      int e = ilogbf(amax) - 2;  // floor(log2 max|v|) - emax
      e = max(-127, min(127, e));
      scale_byte = uint8_t(e + 127);
      inv_scale = ldexpf(1.0f, -e);
    }
    scales[b] = scale_byte;
    uint4 words;
    uint32_t* w = reinterpret_cast<uint32_t*>(&words);
    for (int j = 0; j < 4; ++j) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) word |= uint32_t(e2m1_code(v[8 * j + i] * inv_scale)) << (4 * i);
      w[j] = word;
    }
    *reinterpret_cast<uint4*>(packed + b * 16) = words;
  }
}

}  // namespace

cudaError_t fill_normal_bf16(__nv_bfloat16* out, int64_t n, float mean, float stddev, uint64_t key,
                             cudaStream_t stream) {
  if (n < 0 || (n > 0 && out == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_normal_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, mean, stddev, key);
  return cudaGetLastError();
}

cudaError_t fill_normal_bf16_window(__nv_bfloat16* out, int64_t n, RandomWindow window, float mean, float stddev,
                                    uint64_t key, cudaStream_t stream) {
  if (!valid(n, out, window)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_normal_bf16_window_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, window, mean, stddev, key);
  return cudaGetLastError();
}

cudaError_t fill_normal_f32_window(float* out, int64_t n, RandomWindow window, float mean, float stddev, uint64_t key,
                                   cudaStream_t stream) {
  if (!valid(n, out, window)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_normal_f32_window_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, window, mean, stddev, key);
  return cudaGetLastError();
}

cudaError_t fill_uniform_f32_window(float* out, int64_t n, RandomWindow window, float lo, float hi, uint64_t key,
                                    cudaStream_t stream) {
  if (!valid(n, out, window)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_uniform_f32_window_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, window, lo, hi, key);
  return cudaGetLastError();
}

cudaError_t fill_normal_f32(float* out, int64_t n, float mean, float stddev, uint64_t key, cudaStream_t stream) {
  if (n < 0 || (n > 0 && out == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_normal_f32_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, mean, stddev, key);
  return cudaGetLastError();
}

cudaError_t fill_uniform_f32(float* out, int64_t n, float lo, float hi, uint64_t key, cudaStream_t stream) {
  if (n < 0 || (n > 0 && out == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_uniform_f32_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, lo, hi, key);
  return cudaGetLastError();
}

cudaError_t mxfp4_fill_normal(uint8_t* packed, uint8_t* scales, int64_t rows, int64_t cols, float stddev, uint64_t key,
                              cudaStream_t stream) {
  if (rows < 0 || cols < 0 || cols % 32 != 0 || packed == nullptr || scales == nullptr || !std::isfinite(stddev)) {
    return cudaErrorInvalidValue;
  }
  if (reinterpret_cast<uintptr_t>(packed) % 16 != 0) return cudaErrorMisalignedAddress;
  const int64_t blocks = rows * cols / 32;
  if (blocks == 0) return cudaSuccess;
  mxfp4_fill_normal_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(packed, scales, blocks, stddev, key);
  return cudaGetLastError();
}

}  // namespace k3::kernels
