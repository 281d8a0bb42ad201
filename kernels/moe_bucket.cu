#include "kernels/moe_bucket.h"

namespace k3::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kPairsPerChunk = 512;  // one warp's share: 16 rounds of 32 pairs
constexpr int kScanThreads = 1024;   // one thread per expert in the offsets scan

int64_t chunk_count(int64_t pairs) { return (pairs + kPairsPerChunk - 1) / kPairsPerChunk; }

// The expert of pair p, or −1 when p is past the end or its id is outside [0, experts).
__device__ int expert_of(const int32_t* expert_ids, int64_t p, int64_t end, int experts) {
  if (p >= end) return -1;
  const int e = expert_ids[p];
  return e >= 0 && e < experts ? e : -1;
}

// (1) counts[chunk, e] = pairs of the chunk routed to e.
__global__ void moe_bucket_count_chunks(const int32_t* expert_ids, int64_t pairs, int experts, int64_t chunks,
                                        int32_t* counts) {
  extern __shared__ int32_t shared_counts[];  // [kWarpsPerBlock, experts]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t chunk = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (chunk >= chunks) return;  // the whole warp; the block never synchronises
  int32_t* count = shared_counts + warp * experts;
  for (int e = lane; e < experts; e += 32) count[e] = 0;
  __syncwarp();
  const int64_t begin = chunk * kPairsPerChunk, end = min(begin + kPairsPerChunk, pairs);
  for (int64_t round = begin; round < end; round += 32) {
    const int e = expert_of(expert_ids, round + lane, end, experts);
    const unsigned same = __match_any_sync(0xffffffffu, e);
    if (e >= 0 && lane == 31 - __clz(static_cast<int>(same))) count[e] += __popc(same);  // the group's last lane
    __syncwarp();
  }
  for (int e = lane; e < experts; e += 32) counts[chunk * experts + e] = count[e];
}

// Exclusive prefix sum over the block (blockDim.x a multiple of 32, ≤ 1024); *total gets the sum of all values.
__device__ int block_exclusive_sum(int v, int* total) {
  __shared__ int warp_sums[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  int inclusive = v;
  for (int offset = 1; offset < 32; offset *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? warp_sums[lane] : 0;
    for (int offset = 1; offset < 32; offset *= 2) {
      const int up = __shfl_up_sync(0xffffffffu, w, offset);
      if (lane >= offset) w += up;
    }
    warp_sums[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const int before = warp > 0 ? warp_sums[warp - 1] : 0;
  *total = warp_sums[warps - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return before + inclusive - v;
}

// Thread e of the block as expert e (of `experts`, ≤ blockDim.x), with `total` of its pairs: writes its offset (an
// exclusive scan over experts; expert_offsets[experts] = all slots), its place in the active list (the experts with
// pairs, ascending, then −1 to `experts`) and the active count; returns its offset.
__device__ __forceinline__ int write_offsets(int e, int experts, int total, int32_t* expert_offsets,
                                             int32_t* active_experts, int32_t* active_count) {
  int slots = 0;
  const int offset = block_exclusive_sum(e < experts ? total : 0, &slots);
  int active = 0;
  const int position = block_exclusive_sum(e < experts && total > 0 ? 1 : 0, &active);
  if (e < experts) {
    expert_offsets[e] = offset;
    if (total > 0) active_experts[position] = e;
    if (e >= active) active_experts[e] = -1;  // positions [active, experts): disjoint from the writes above
  }
  if (e == 0) {
    expert_offsets[experts] = slots;
    *active_count = active;
  }
  return offset;
}

// (2) One block, thread e per expert: counts[chunk, e] becomes the number of e's pairs in earlier chunks; then
// offsets by a scan over experts, and the active list.
__global__ void moe_bucket_offsets(int32_t* counts, int64_t chunks, int experts, int32_t* expert_offsets,
                                   int32_t* active_experts, int32_t* active_count) {
  const int e = threadIdx.x;
  int total = 0;
  if (e < experts) {
    for (int64_t c = 0; c < chunks; ++c) {
      const int32_t n = counts[c * experts + e];
      counts[c * experts + e] = total;
      total += n;
    }
  }
  write_offsets(e, experts, total, expert_offsets, active_experts, active_count);
}

// (3) Each pair goes to offsets[e] + (e's pairs in earlier chunks) + (e's pairs earlier in this chunk).
__global__ void moe_bucket_scatter(const int32_t* expert_ids, const float* weights, int64_t pairs, int top_k,
                                   int experts, int64_t chunks, const int32_t* counts, const int32_t* expert_offsets,
                                   int32_t* slot_token, float* slot_weight, int32_t* slot_of) {
  extern __shared__ int32_t shared_cursors[];  // [kWarpsPerBlock, experts]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t chunk = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (chunk >= chunks) return;  // the whole warp
  int32_t* cursor = shared_cursors + warp * experts;
  for (int e = lane; e < experts; e += 32) cursor[e] = expert_offsets[e] + counts[chunk * experts + e];
  __syncwarp();
  const int64_t begin = chunk * kPairsPerChunk, end = min(begin + kPairsPerChunk, pairs);
  for (int64_t round = begin; round < end; round += 32) {
    const int64_t p = round + lane;
    const int e = expert_of(expert_ids, p, end, experts);
    const unsigned same = __match_any_sync(0xffffffffu, e);
    if (p < end) {
      if (e >= 0) {
        const int32_t slot = cursor[e] + __popc(same & ((1u << lane) - 1u));  // rank among equal ids, by lane
        slot_token[slot] = static_cast<int32_t>(p / top_k);
        slot_weight[slot] = weights[p];
        slot_of[p] = slot;
      } else {
        slot_of[p] = -1;
      }
    }
    __syncwarp();  // every lane has read cursor[e] before it moves
    if (e >= 0 && lane == 31 - __clz(static_cast<int>(same))) cursor[e] += __popc(same);
    __syncwarp();
  }
}

// The whole bucketing in one block of kMoeBucketSingleBlockPairs threads (pairs ≤ that, experts ≤ 1024): thread p
// is pair p, thread e expert e. warp_count[w][e] = pairs of warp w routed to e (≤ 32: one byte).
__global__ void __launch_bounds__(kMoeBucketSingleBlockPairs)
    moe_bucket_single_block(const int32_t* expert_ids, const float* weights, int pairs, int top_k, int experts,
                            MoeBuckets out) {
  constexpr int kWarps = kMoeBucketSingleBlockPairs / 32;
  __shared__ __align__(16) uint8_t warp_count[kWarps][kMoeBucketMaxExperts];
  __shared__ int32_t offset_of[kMoeBucketMaxExperts];
  const int p = threadIdx.x, warp = p / 32, lane = p % 32;
  for (int i = p; i < kWarps * kMoeBucketMaxExperts / 16; i += blockDim.x) {
    reinterpret_cast<uint4*>(&warp_count[0][0])[i] = make_uint4(0, 0, 0, 0);
  }
  __syncthreads();
  const int e = expert_of(expert_ids, p, pairs, experts);
  const unsigned same = __match_any_sync(0xffffffffu, e);
  if (e >= 0 && lane == 31 - __clz(static_cast<int>(same))) warp_count[warp][e] = uint8_t(__popc(same));
  __syncthreads();

  // Thread x as expert x: its total, its offset and its place in the active list.
  int total = 0;
  if (p < experts) {
    for (int w = 0; w < kWarps; ++w) total += warp_count[w][p];
  }
  const int offset = write_offsets(p, experts, total, out.expert_offsets, out.active_experts, out.active_count);
  if (p < experts) offset_of[p] = offset;
  __syncthreads();

  // Thread p as pair p: its expert's offset, the earlier warps' pairs of that expert, its rank in its warp.
  if (p < pairs) {
    if (e >= 0) {
      int slot = offset_of[e] + __popc(same & ((1u << lane) - 1u));
      for (int w = 0; w < warp; ++w) slot += warp_count[w][e];
      out.slot_token[slot] = p / top_k;
      out.slot_weight[slot] = weights[p];
      out.slot_of[p] = slot;
    } else {
      out.slot_of[p] = -1;
    }
  }
}

__device__ float to_float(float v) { return v; }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// One thread per (token, column): blockIdx.y is the token, blockIdx.x a span of kThreads columns, so even one
// token spreads over width / kThreads blocks (one block per token left a decode step latency-bound on one SM).
// The sum runs over the choices in order c = 0, 1, …, so the result does not depend on the schedule.
template <typename T>
__global__ void moe_combine_thread_per_column(const T* expert_out, const int32_t* slot_of, const float* weight,
                                              int top_k, int width, float* y) {
  __shared__ int32_t slots[kMoeCombineMaxTopK];
  __shared__ float weights[kMoeCombineMaxTopK];
  const int64_t token = blockIdx.y;
  if (int(threadIdx.x) < top_k) {
    slots[threadIdx.x] = slot_of[token * top_k + threadIdx.x];
    weights[threadIdx.x] = weight[token * top_k + threadIdx.x];
  }
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= width) return;
  float sum = 0.0f;
#pragma unroll 8
  for (int c = 0; c < top_k; ++c) {
    if (slots[c] >= 0) sum = fmaf(weights[c], to_float(expert_out[int64_t(slots[c]) * width + i]), sum);
  }
  y[token * width + i] = sum;
}

template <typename T>
cudaError_t combine(const T* expert_out, const int32_t* slot_of, const float* weight, int tokens, int top_k, int width,
                    float* y, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (tokens < 0 || top_k < 1 || top_k > kMoeCombineMaxTopK || width < 1 || expert_out == nullptr ||
      slot_of == nullptr || weight == nullptr || y == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (tokens > 65535) return cudaErrorInvalidValue;  // grid.y
  const dim3 grid(static_cast<unsigned>((width + kThreads - 1) / kThreads), static_cast<unsigned>(tokens));
  moe_combine_thread_per_column<<<grid, kThreads, 0, stream>>>(expert_out, slot_of, weight, top_k, width, y);
  return cudaGetLastError();
}

}  // namespace

size_t moe_bucket_workspace_bytes(int tokens, int top_k, int experts) {
  if (tokens <= 0 || top_k <= 0 || experts <= 0) return 0;
  return size_t(chunk_count(int64_t(tokens) * top_k)) * size_t(experts) * sizeof(int32_t);
}

cudaError_t moe_bucket_by_expert(const int32_t* expert_ids, const float* weights, int tokens, int top_k, int experts,
                                 const MoeBuckets& out, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                 MoeBucketAlgorithm algorithm) {
  const int64_t pairs = int64_t(tokens) * top_k;
  if (tokens < 0 || top_k < 1 || experts < 1 || experts > kMoeBucketMaxExperts || pairs > INT32_MAX ||
      out.expert_offsets == nullptr || out.active_experts == nullptr || out.active_count == nullptr) {
    return cudaErrorInvalidValue;
  }
  const int64_t chunks = chunk_count(pairs);
  if (chunks > 0 && (expert_ids == nullptr || weights == nullptr || out.slot_token == nullptr ||
                     out.slot_weight == nullptr || out.slot_of == nullptr || workspace == nullptr ||
                     workspace_bytes < moe_bucket_workspace_bytes(tokens, top_k, experts))) {
    return cudaErrorInvalidValue;
  }
  const bool single_block_ok = pairs <= kMoeBucketSingleBlockPairs;
  if (algorithm == MoeBucketAlgorithm::single_block && !single_block_ok) return cudaErrorInvalidValue;
  if (algorithm == MoeBucketAlgorithm::single_block ||
      (algorithm == MoeBucketAlgorithm::automatic && single_block_ok)) {
    moe_bucket_single_block<<<1, kMoeBucketSingleBlockPairs, 0, stream>>>(expert_ids, weights, int(pairs), top_k,
                                                                          experts, out);
    return cudaGetLastError();
  }
  auto* counts = static_cast<int32_t*>(workspace);
  const auto blocks = static_cast<unsigned>((chunks + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const size_t shared_bytes = size_t(kWarpsPerBlock) * experts * sizeof(int32_t);  // ≤ 32 KiB
  if (chunks > 0) {
    moe_bucket_count_chunks<<<blocks, kThreads, shared_bytes, stream>>>(expert_ids, pairs, experts, chunks, counts);
    if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  }
  // Runs with no pairs too, so the offsets and the active list are always written.
  moe_bucket_offsets<<<1, kScanThreads, 0, stream>>>(counts, chunks, experts, out.expert_offsets, out.active_experts,
                                                     out.active_count);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  if (chunks > 0) {
    moe_bucket_scatter<<<blocks, kThreads, shared_bytes, stream>>>(expert_ids, weights, pairs, top_k, experts, chunks,
                                                                   counts, out.expert_offsets, out.slot_token,
                                                                   out.slot_weight, out.slot_of);
  }
  return cudaGetLastError();
}

cudaError_t moe_combine_f32(const float* expert_out, const int32_t* slot_of, const float* slot_weight_by_choice,
                            int tokens, int top_k, int width, float* y, cudaStream_t stream) {
  return combine(expert_out, slot_of, slot_weight_by_choice, tokens, top_k, width, y, stream);
}

cudaError_t moe_combine_bf16(const __nv_bfloat16* expert_out, const int32_t* slot_of,
                             const float* slot_weight_by_choice, int tokens, int top_k, int width, float* y,
                             cudaStream_t stream) {
  return combine(expert_out, slot_of, slot_weight_by_choice, tokens, top_k, width, y, stream);
}

}  // namespace k3::kernels
