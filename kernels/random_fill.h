// random_fill: seeded random weights generated directly in device memory, for `k3perf run --weights random`
// (a real-width slice is tens of GB; generating it on the host and copying it would take minutes).
// Same distributions and scaling as make-checkpoint (engine/weights/synthetic_checkpoint.h), but a
// counter-based generator instead of the sequential one, so every element is computed independently:
//   element i of a tensor with key k:  h = splitmix64(k ^ (i · 0x9E3779B97F4A7C15)),
//   u1 = (⌊h / 2^40⌋ + 1) / 2^24 ∈ (0, 1],  u2 = (h mod 2^24) / 2^24,
//   normal = sqrt(−2 ln u1) · cos(2π u2)  (Box–Muller),  uniform = u2.
// The same seed gives the same values on every GPU; they are not the bytes make-checkpoint writes.
// Kernels (grid-stride loops, one element per thread step):
//   fill_normal_{bf16,f32}: mean + stddev · normal;  fill_uniform_f32: lo + (hi − lo) · uniform;
//   mxfp4_fill_normal: rows × cols normals (stddev) quantised to MXFP4 as engine/weights/mx_format
//   does (per 32-element block: scale 2^(⌊log2 max|v|⌋ − 2), E2M1 by midpoints, RNE), one thread per block;
//   packed [rows, cols/2], scales [rows, cols/32]; cols a multiple of 32.
// A shard of a tensor (one rank's rows or columns, engine/parallel/sharding.h) is filled with the whole tensor's
// values at their indices through a RandomWindow: element e of the shard is element
// (e / block) · stride + base + e % block of the tensor — so the shards of every rank are the one tensor's pieces.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace k3::kernels {

__host__ __device__ inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__host__ __device__ inline uint64_t random_bits(uint64_t key, uint64_t index) {
  return splitmix64(key ^ (index * 0x9E3779B97F4A7C15ull));
}

__host__ __device__ inline float random_uniform(uint64_t key, uint64_t index) {
  return float(random_bits(key, index) & 0xFFFFFFull) * (1.0f / 16777216.0f);
}

__host__ __device__ inline float random_normal(uint64_t key, uint64_t index) {
  const uint64_t h = random_bits(key, index);
  const float u1 = float((h >> 40) + 1) * (1.0f / 16777216.0f);
  const float u2 = float(h & 0xFFFFFFull) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

// The tensor's indices of a shard's elements: a split of dimension d holding `length` of its `extent` indices from
// `offset`, with `inner` elements per index (the product of the later dimensions), is block = length · inner,
// stride = extent · inner, base = offset · inner.
struct RandomWindow {
  int64_t block = 0, stride = 0, base = 0;
  __host__ __device__ uint64_t index(int64_t e) const { return uint64_t((e / block) * stride + base + e % block); }
};

cudaError_t fill_normal_bf16(__nv_bfloat16* out, int64_t n, float mean, float stddev, uint64_t key,
                             cudaStream_t stream);
cudaError_t fill_normal_bf16_window(__nv_bfloat16* out, int64_t n, RandomWindow window, float mean, float stddev,
                                    uint64_t key, cudaStream_t stream);
cudaError_t fill_normal_f32_window(float* out, int64_t n, RandomWindow window, float mean, float stddev, uint64_t key,
                                   cudaStream_t stream);
cudaError_t fill_uniform_f32_window(float* out, int64_t n, RandomWindow window, float lo, float hi, uint64_t key,
                                    cudaStream_t stream);
cudaError_t fill_normal_f32(float* out, int64_t n, float mean, float stddev, uint64_t key, cudaStream_t stream);
cudaError_t fill_uniform_f32(float* out, int64_t n, float lo, float hi, uint64_t key, cudaStream_t stream);
cudaError_t mxfp4_fill_normal(uint8_t* packed, uint8_t* scales, int64_t rows, int64_t cols, float stddev, uint64_t key,
                              cudaStream_t stream);

}  // namespace k3::kernels
