// read_floor: a measured floor for memory-bound ops — the time a kernel that does nothing but read takes for the same
// bytes, laid out the same way, launched the same way. It reads `chunks` chunks of `chunk_bytes` each, chunk c at
// base + index[c] · chunk_bytes (a paged cache's pages through its page table; index null: chunk c at c), with
// streaming 16-byte loads, 4 in flight per thread, one full wave of blocks each taking an equal contiguous share of
// the vectors, and writes one XOR of what it read per block (so the loads are kept). Beside an op's time, its time
// says how much of the gap to bytes / copy bandwidth any kernel reading those bytes at that size pays too: the ramp
// of a launch and its drain, which a 1 GiB copy hides.
#pragma once

#include "kernels/cuda_check.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace k3::bench {

namespace read_floor_detail {

constexpr int kThreads = 256;
constexpr int kInFlight = 4;

// Moves (vector v, its chunk, its offset in the chunk) on by `step` vectors.
__device__ __forceinline__ void advance(uint32_t step, uint32_t chunk_vectors, uint32_t& v, uint32_t& chunk,
                                        uint32_t& offset) {
  v += step;
  offset += step;
  while (offset >= chunk_vectors) offset -= chunk_vectors, ++chunk;
}

__global__ void __launch_bounds__(kThreads) read_chunks(const uint4* __restrict__ base,
                                                        const int32_t* __restrict__ index, uint32_t chunk_vectors,
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

}  // namespace read_floor_detail

// Blocks of one full wave of read_chunks on the current device: the size of the `sink` it needs (uint32 each).
inline int read_floor_blocks() {
  int device = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_floor_detail::read_chunks,
                                                           read_floor_detail::kThreads, 0));
  return sms * std::max(per_sm, 1);
}

// Reads `chunks` chunks of `chunk_bytes` (a multiple of 16; base 16-byte aligned) as the header says; `sink` holds
// read_floor_blocks() words. Capturable in a CUDA graph.
inline void launch_read_floor(const void* base, const int32_t* index, int64_t chunk_bytes, int64_t chunks,
                              uint32_t* sink, cudaStream_t stream) {
  const int64_t chunk_vectors = chunk_bytes / 16, total = chunk_vectors * chunks;
  if (chunk_bytes % 16 != 0 || chunk_vectors <= 0 || chunks <= 0 || total > int64_t(UINT32_MAX)) {
    fmt::print(stderr, "launch_read_floor: {} chunks of {} bytes cannot be read in 16-byte vectors\n", chunks,
               chunk_bytes);
    std::exit(1);
  }
  read_floor_detail::read_chunks<<<read_floor_blocks(), read_floor_detail::kThreads, 0, stream>>>(
      static_cast<const uint4*>(base), index, uint32_t(chunk_vectors), uint32_t(total), sink);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace k3::bench
