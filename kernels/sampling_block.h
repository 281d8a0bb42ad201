// sampling_block: the device building blocks of sampling over one row per 1024-thread block: the order-preserving key
// of a logit, (key, id) packed so one integer max picks the largest value and the lowest id among ties, and the
// block-wide reduction. Internal to kernels/sampling.cu (and the top-p experiment in bench/lab/sample_top_p.cu);
// device code, so it is included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace k3::kernels::sampling_block {

inline constexpr int kThreads = 1024;  // the block reductions below assume exactly 32 warps
inline constexpr int kWarps = kThreads / 32;

// Order-preserving 32-bit key of a float: larger value, larger key. NaN ranks as −∞ and −0 as +0.
__device__ inline uint32_t order_key(float x) {
  if (isnan(x)) x = -INFINITY;
  if (x == 0.0f) x = 0.0f;
  const uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}
// The float of a key (order_key's inverse on the values it returns).
__device__ inline float key_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? (key & 0x7FFFFFFFu) : ~key);
}

// (key, id) packed so that the larger value wins and, among equal keys, the lower id.
__device__ inline uint64_t pack_key_id(uint32_t key, int id) {
  return (uint64_t(key) << 32) | uint64_t(0xFFFFFFFFu - static_cast<uint32_t>(id));
}
__device__ inline int packed_id(uint64_t packed) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(packed));
}

struct Max {
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const { return a > b ? a : b; }
};

// The block-wide reduction, returned to every thread (integers: the result does not depend on the order).
template <typename Op>
__device__ uint64_t block_reduce(uint64_t v, Op op) {
  __shared__ uint64_t partial[kWarps];
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = partial[0];
  for (int w = 1; w < kWarps; ++w) v = op(v, partial[w]);
  __syncthreads();  // partial is reused by the next call
  return v;
}

}  // namespace k3::kernels::sampling_block
