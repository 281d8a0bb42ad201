#include "bench/gpu/read_floor.h"

namespace k3::bench {

namespace {

constexpr int kThreads = 256;
constexpr int kInFlight = 4;

// Moves (vector v, its chunk, its offset in the chunk) on by `step` vectors.
__device__ __forceinline__ void advance(uint32_t step, uint32_t chunk_vectors, uint32_t& v, uint32_t& chunk,
                                        uint32_t& offset) {
  v += step;
  offset += step;
  while (offset >= chunk_vectors) offset -= chunk_vectors, ++chunk;
}

__global__ void __launch_bounds__(kThreads)
    read_chunks(const uint4* __restrict__ base, const int32_t* __restrict__ index, uint32_t chunk_vectors,
                uint32_t total_vectors, uint32_t* __restrict__ sink) {
  const uint32_t share = (total_vectors + gridDim.x - 1) / gridDim.x;
  const uint32_t begin = min(total_vectors, blockIdx.x * share), end = min(total_vectors, begin + share);
  uint32_t v = begin + threadIdx.x, chunk = v / chunk_vectors, offset = v % chunk_vectors;
  uint32_t acc = 0;
  while (v < end) {
    uint4 r[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      r[k] = make_uint4(0, 0, 0, 0);
      if (v < end) {
        const int64_t c = index != nullptr ? index[chunk] : int32_t(chunk);
        r[k] = __ldcs(base + c * chunk_vectors + offset);
      }
      advance(kThreads, chunk_vectors, v, chunk, offset);
    }
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) acc ^= r[k].x ^ r[k].y ^ r[k].z ^ r[k].w;
  }
  for (int lanes = 16; lanes > 0; lanes /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, lanes);
  if (threadIdx.x % 32 == 0) atomicXor(sink + blockIdx.x, acc);
}

}  // namespace

int read_floor_blocks() {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_chunks, kThreads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return sms * (per_sm > 0 ? per_sm : 1);
}

cudaError_t read_floor(const void* base, const int32_t* index, int64_t chunk_bytes, int64_t chunks, uint32_t* sink,
                       cudaStream_t stream) {
  const int64_t chunk_vectors = chunk_bytes / 16;
  if (base == nullptr || sink == nullptr || chunk_bytes % 16 != 0 || chunk_vectors <= 0 || chunks <= 0 ||
      chunk_vectors * chunks > int64_t(UINT32_MAX) || reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return cudaErrorInvalidValue;
  read_chunks<<<read_floor_blocks(), kThreads, 0, stream>>>(
      static_cast<const uint4*>(base), index, uint32_t(chunk_vectors), uint32_t(chunk_vectors * chunks), sink);
  return cudaGetLastError();
}

}  // namespace k3::bench
