#include "kernels/sampling.h"

#include "kernels/ptx/sm90a_device.h"

#include <cooperative_groups.h>

#include <cmath>

namespace k3::kernels {

namespace {

constexpr int kThreads = 1024;  // the block reductions below assume exactly 32 warps
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;                      // one byte of the key per radix pass
constexpr float kMassScale = 1099511627776.0f;  // 2^40: the fixed-point unit of probability mass
constexpr int kMaxTopPVocab = 1 << 23;          // so the sum of masses, < vocab · 2^40, fits in 64 bits

// Order-preserving 32-bit key of a float: larger value, larger key. NaN ranks as −∞ and −0 as +0.
__device__ uint32_t order_key(float x) {
  if (isnan(x)) x = -INFINITY;
  if (x == 0.0f) x = 0.0f;
  const uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}
__device__ float key_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? (key & 0x7FFFFFFFu) : ~key);
}

// (key, id) packed so that the larger value wins and, among equal keys, the lower id.
__device__ uint64_t pack_key_id(uint32_t key, int id) {
  return (uint64_t(key) << 32) | uint64_t(0xFFFFFFFFu - static_cast<uint32_t>(id));
}
__device__ int packed_id(uint64_t packed) { return static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(packed)); }

struct Max {
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const { return a > b ? a : b; }
};
struct Sum {
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const { return a + b; }
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

// Exclusive prefix sum over the block in thread order; *total gets the sum of all values.
__device__ uint64_t block_exclusive_sum(uint64_t v, uint64_t* total) {
  __shared__ uint64_t warp_sums[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint64_t inclusive = v;
  for (int offset = 1; offset < 32; offset *= 2) {
    const uint64_t up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    uint64_t w = warp_sums[lane];
    for (int offset = 1; offset < 32; offset *= 2) {
      const uint64_t up = __shfl_up_sync(0xffffffffu, w, offset);
      if (lane >= offset) w += up;
    }
    warp_sums[lane] = w;
  }
  __syncthreads();
  const uint64_t before = warp > 0 ? warp_sums[warp - 1] : 0;
  *total = warp_sums[kWarps - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return before + inclusive - v;
}

// The packed (key, id) max over ids [begin, end) of a row, strided over the block's threads; 0 when empty.
// With vec4 the range is in float4 units (the row 16-byte aligned).
__device__ uint64_t range_max(const float* row, int64_t begin, int64_t end, bool vec4) {
  uint64_t best = 0;  // below every packed (key, id): the key of −∞ is not 0
  if (vec4) {  // 16-byte loads, several in flight per thread
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

// x = logit / temperature, NaN as −∞.
__device__ float scaled(const float* row, int i, float temperature) {
  const float x = row[i] / temperature;
  return isnan(x) ? -INFINITY : x;
}
// Fixed-point mass ⌊exp(x − x_max) · 2^40⌋ (x ≤ x_max, x_max finite).
__device__ uint64_t mass_of(float x, float x_max) { return __float2ull_rz(expf(x - x_max) * kMassScale); }

__global__ void sample_top_p_radix_select(const float* logits, int vocab, float temperature, float top_p,
                                          uint64_t seed, const int64_t* step, int32_t* out_tokens) {
  __shared__ unsigned long long histogram[kBins];
  __shared__ uint32_t chosen_bin;
  __shared__ uint64_t chosen_above;
  const float* row = logits + int64_t(blockIdx.x) * vocab;
  const int tid = threadIdx.x;

  // Pass 1: the largest x (and its lowest id).
  uint64_t best = 0;
  for (int i = tid; i < vocab; i += kThreads) {
    const uint64_t candidate = pack_key_id(order_key(scaled(row, i, temperature)), i);
    best = candidate > best ? candidate : best;
  }
  best = block_reduce(best, Max{});
  const float x_max = key_value(static_cast<uint32_t>(best >> 32));
  if (!isfinite(x_max)) {  // block-uniform: no distribution to draw from
    if (tid == 0) out_tokens[blockIdx.x] = packed_id(best);
    return;
  }

  // Pass 2: the masses, their sum and the histogram of the key's top byte.
  for (int b = tid; b < kBins; b += kThreads) histogram[b] = 0;
  __syncthreads();
  uint64_t total_mass = 0;
  for (int i = tid; i < vocab; i += kThreads) {
    const float x = scaled(row, i, temperature);
    const uint64_t m = mass_of(x, x_max);
    total_mass += m;
    if (m != 0) atomicAdd(&histogram[order_key(x) >> 24], static_cast<unsigned long long>(m));
  }
  total_mass = block_reduce(total_mass, Sum{});  // also orders the histogram updates before the reads below
  // The nucleus must reach this much mass; ≥ 1, ≤ the total.
  uint64_t target = static_cast<uint64_t>(ceil(double(top_p) * double(total_mass)));
  target = target < 1 ? 1 : (target > total_mass ? total_mass : target);

  // Passes 3-5 (and the selection after pass 2): the threshold key, one byte at a time from the top. Invariant:
  // `above` = mass of the keys greater than every key with this prefix, above < target ≤ above + mass(prefix).
  uint32_t prefix = 0, prefix_mask = 0;
  uint64_t above = 0;
  for (int digit = 0; digit < 4; ++digit) {
    const int shift = 24 - 8 * digit;
    if (digit > 0) {
      for (int i = tid; i < vocab; i += kThreads) {
        const float x = scaled(row, i, temperature);
        const uint32_t key = order_key(x);
        if ((key & prefix_mask) != prefix) continue;
        const uint64_t m = mass_of(x, x_max);
        if (m != 0) atomicAdd(&histogram[(key >> shift) & 0xFFu], static_cast<unsigned long long>(m));
      }
      __syncthreads();
    }
    if (tid == 0) {
      uint64_t cumulative = above;
      uint32_t bin = kBins - 1;
      for (; bin > 0; --bin) {
        if (cumulative + histogram[bin] >= target) break;
        cumulative += histogram[bin];
      }
      chosen_bin = bin;  // bin 0 when no higher bin reached the target: the invariant says it does
      chosen_above = cumulative;
    }
    __syncthreads();
    prefix |= chosen_bin << shift;
    prefix_mask |= 0xFFu << shift;
    above = chosen_above;
    for (int b = tid; b < kBins; b += kThreads) histogram[b] = 0;
    __syncthreads();  // chosen_* read and the histogram cleared before the next pass writes them
  }
  const uint32_t threshold_key = prefix;
  const uint64_t threshold_mass = mass_of(key_value(threshold_key), x_max);  // > 0 by the invariant
  const uint64_t ties_needed = (target - above + threshold_mass - 1) / threshold_mass;

  // Pass 6: per contiguous id range, the mass above the threshold and the tokens at it; ties enter the nucleus
  // lowest id first.
  const int per_thread = (vocab + kThreads - 1) / kThreads;
  const int begin = min(vocab, tid * per_thread), end = min(vocab, begin + per_thread);
  uint64_t range_above = 0, range_ties = 0;
  for (int i = begin; i < end; ++i) {
    const float x = scaled(row, i, temperature);
    const uint32_t key = order_key(x);
    if (key > threshold_key) range_above += mass_of(x, x_max);
    if (key == threshold_key) ++range_ties;
  }
  uint64_t all_ties = 0;
  const uint64_t tie_rank = block_exclusive_sum(range_ties, &all_ties);
  const uint64_t ties_taken =
      tie_rank >= ties_needed ? 0 : (ties_needed - tie_rank < range_ties ? ties_needed - tie_rank : range_ties);
  const uint64_t range_nucleus = range_above + ties_taken * threshold_mass;
  uint64_t nucleus_mass = 0;
  const uint64_t range_start = block_exclusive_sum(range_nucleus, &nucleus_mass);

  // The draw: the point ⌊bits · nucleus / 2^64⌋ in [0, nucleus), ids in increasing order.
  const uint64_t point = __umul64hi(sampling_uniform_bits(seed, *step, blockIdx.x), nucleus_mass);
  if (range_nucleus == 0 || point < range_start || point >= range_start + range_nucleus) return;
  uint64_t cumulative = range_start, rank = tie_rank;
  for (int i = begin; i < end; ++i) {
    const float x = scaled(row, i, temperature);
    const uint32_t key = order_key(x);
    uint64_t m = 0;
    if (key > threshold_key) m = mass_of(x, x_max);
    if (key == threshold_key) m = rank++ < ties_needed ? threshold_mass : 0;
    if (point < cumulative + m) {
      out_tokens[blockIdx.x] = i;
      return;
    }
    cumulative += m;
  }
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

size_t sample_top_p_workspace_bytes(int, int) { return 0; }

cudaError_t sample_top_p(const float* logits, int batch, int vocab, float temperature, float top_p, uint64_t seed,
                         const int64_t* step, void*, size_t, int32_t* out_tokens, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  if (batch < 0 || vocab < 1 || vocab > kMaxTopPVocab || logits == nullptr || out_tokens == nullptr || step == nullptr ||
      !std::isfinite(temperature) || !(temperature > 0.0f) || !(top_p > 0.0f && top_p <= 1.0f)) {
    return cudaErrorInvalidValue;
  }
  sample_top_p_radix_select<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(logits, vocab, temperature, top_p,
                                                                                   seed, step, out_tokens);
  return cudaGetLastError();
}

}  // namespace k3::kernels
