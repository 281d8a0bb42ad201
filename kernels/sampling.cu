#include "kernels/sampling.h"

#include "kernels/ptx/sm90a_device.h"
#include "kernels/sampling_block.h"

#include <cooperative_groups.h>

#include <cstdint>

namespace k3::kernels {

namespace {

using namespace sampling_block;

// The packed (key, id) max over ids [begin, end) of a row, strided over the block's threads; 0 when empty.
// With vec4 the range is in float4 units (the row 16-byte aligned).
__device__ uint64_t range_max(const float* row, int64_t begin, int64_t end, bool vec4) {
  uint64_t best = 0;  // below every packed (key, id): the key of −∞ is not 0
  if (vec4) {         // 16-byte loads, several in flight per thread
    const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll 4
    for (int64_t j = begin + threadIdx.x; j < end; j += kThreads) {
      const float4 v = row4[j];
      const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint64_t candidate = pack_key_id(order_key(x[k]), int(4 * j + k));
        best = candidate > best ? candidate : best;
      }
    }
  } else {
#pragma unroll 4
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
      const uint64_t candidate = pack_key_id(order_key(row[i]), int(i));
      best = candidate > best ? candidate : best;
    }
  }
  return best;
}

// Cluster rank r of a row takes the r-th of kSampleGreedyClusterBlocks contiguous parts of it (in float4 units with
// vec4); the grid is (kSampleGreedyClusterBlocks, batch), one cluster per row.
__global__ void __launch_bounds__(kThreads)
    sample_greedy_cluster_per_row(const float* logits, int vocab, int32_t* out_tokens, bool vec4) {
  __shared__ uint64_t block_best;
  const float* row = logits + int64_t(blockIdx.y) * vocab;
  const int64_t units = vec4 ? vocab / 4 : vocab;
#if __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t part = cluster.block_rank();
  const int64_t per_part = (units + kSampleGreedyClusterBlocks - 1) / kSampleGreedyClusterBlocks;
  const int64_t begin = part * per_part < units ? part * per_part : units;
  const int64_t end = begin + per_part < units ? begin + per_part : units;
  const uint64_t best = block_reduce(range_max(row, begin, end, vec4), Max{});
  if (threadIdx.x == 0) block_best = best;
  cluster.sync();  // every block's result written, visible across the cluster
  if (part == 0 && threadIdx.x < 32) {
    uint64_t v = 0;
    if (threadIdx.x < kSampleGreedyClusterBlocks) v = *cluster.map_shared_rank(&block_best, threadIdx.x);
    for (int offset = 16; offset > 0; offset /= 2) {
      const uint64_t other = __shfl_xor_sync(0xffffffffu, v, offset);
      v = other > v ? other : v;
    }
    if (threadIdx.x == 0) out_tokens[blockIdx.y] = packed_id(v);
  }
  cluster.sync();  // no block exits while block 0 may still read its shared memory
#else
  // Code for a device without clusters (reached only through a JIT of older PTX on a newer device): block 0 of
  // the row alone scans it, so the result stays right.
  if (blockIdx.x != 0) return;
  const uint64_t best = block_reduce(range_max(row, 0, units, vec4), Max{});
  if (threadIdx.x == 0) block_best = best;
  __syncthreads();
  if (threadIdx.x == 0) out_tokens[blockIdx.y] = packed_id(block_best);
#endif
}

__global__ void __launch_bounds__(kThreads)
    sample_greedy_block_per_row(const float* logits, int vocab, int32_t* out_tokens, bool vec4) {
  const float* row = logits + int64_t(blockIdx.x) * vocab;
  const uint64_t best = block_reduce(range_max(row, 0, vec4 ? vocab / 4 : vocab, vec4), Max{});
  if (threadIdx.x == 0) out_tokens[blockIdx.x] = packed_id(best);
}

}  // namespace

cudaError_t sample_greedy(const float* logits, int batch, int vocab, int32_t* out_tokens, cudaStream_t stream,
                          SampleGreedyAlgorithm algorithm) {
  if (batch == 0) return cudaSuccess;
  if (batch < 0 || vocab < 1 || logits == nullptr || out_tokens == nullptr) return cudaErrorInvalidValue;
  const bool vec4 = vocab % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0;
  constexpr int kMaxClusterRows = 65535;  // the grid's y extent
  // Clusters pay where one block per row leaves the GPU idle: a few rows of a large vocabulary.
  constexpr int kClusterRowsAtMost = 32;
  if (algorithm == SampleGreedyAlgorithm::automatic) {
    algorithm = vocab >= 8192 && batch <= kClusterRowsAtMost && current_device_launches_clusters()
                    ? SampleGreedyAlgorithm::cluster_per_row
                    : SampleGreedyAlgorithm::block_per_row;
  }
  if (algorithm == SampleGreedyAlgorithm::block_per_row) {
    sample_greedy_block_per_row<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(logits, vocab, out_tokens, vec4);
    return cudaGetLastError();
  }
  if (algorithm != SampleGreedyAlgorithm::cluster_per_row || batch > kMaxClusterRows ||
      !current_device_launches_clusters()) {
    return cudaErrorInvalidValue;
  }
  const ClusterLaunch launch(dim3(kSampleGreedyClusterBlocks, static_cast<unsigned>(batch), 1), dim3(kThreads, 1, 1),
                             kSampleGreedyClusterBlocks, stream);
  return cudaLaunchKernelEx(&launch.config, sample_greedy_cluster_per_row, logits, vocab, out_tokens, vec4);
}

}  // namespace k3::kernels
