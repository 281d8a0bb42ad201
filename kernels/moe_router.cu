#include "kernels/moe_router.h"

#include <cmath>

namespace k3::kernels {

namespace {

// As ref::sigmoid: fp64 arithmetic rounded to fp32, so the GPU and CPU scores are the same floats.
__device__ float sigmoid_as_reference(float a) { return float(1.0 / (1.0 + exp(-double(a)))); }

// moe_route_block_per_token: one block per token.
constexpr int kBlockThreads = 256;
constexpr int kBlockWarps = kBlockThreads / 32;
constexpr int kExpertsPerThread = kMoeRouterMaxExperts / kBlockThreads;

// The selection key of (choice value c, expert id e): a larger key comes first in the selection order (larger c; at
// equal c the lower id), keys of distinct ids differ, and 0 is below every key. c is never NaN here; −0 counts as
// +0 so that the two tie as the float comparison says.
__device__ uint64_t selection_key(float c, int e) {
  if (c == 0.0f) c = 0.0f;
  const uint32_t b = __float_as_uint(c);
  const uint32_t ordered = (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);  // ≥ 0x007FFFFF (the key of −∞)
  return (uint64_t(ordered) << 32) | uint64_t(0xFFFFFFFFu - uint32_t(e));
}
__device__ int key_expert(uint64_t key) { return int(0xFFFFFFFFu - uint32_t(key)); }

// The largest key over the warp, in every lane (keys are 64-bit; the reduction works on the two halves).
__device__ uint64_t warp_max_key(uint64_t key) {
  const uint32_t high = __reduce_max_sync(0xffffffffu, uint32_t(key >> 32));
  const uint32_t low = __reduce_max_sync(0xffffffffu, uint32_t(key >> 32) == high ? uint32_t(key) : 0u);
  return (uint64_t(high) << 32) | low;
}

// Entries of a non-increasing list of n keys that are greater than `key` (a binary search).
__device__ int count_greater(const uint64_t* list, int n, uint64_t key) {
  int lo = 0, hi = n;  // list[j] > key for every j < lo, and for no j ≥ hi
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (list[mid] > key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

__global__ void moe_route_block_per_token(const float* logits, const float* bias, int experts, int top_k,
                                          float routed_scaling_factor, int32_t* expert_ids, float* weights) {
  __shared__ float scores[kMoeRouterMaxExperts];
  __shared__ uint64_t warp_lists[kBlockWarps][kMoeRouterMaxTopK];  // each warp's top_k keys, decreasing
  __shared__ uint64_t chosen[kMoeRouterMaxTopK];                   // the token's top_k keys, decreasing
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t token = blockIdx.x;
  const float* row = logits + token * experts;

  // Every load in flight first, then the fp64 sigmoids.
  float logit[kExpertsPerThread], bias_value[kExpertsPerThread];
#pragma unroll
  for (int j = 0; j < kExpertsPerThread; ++j) {
    const int e = tid + kBlockThreads * j;
    logit[j] = e < experts ? row[e] : 0.0f;
    bias_value[j] = bias != nullptr && e < experts ? bias[e] : 0.0f;
  }
  uint64_t key[kExpertsPerThread];
  uint64_t mine = 0;  // the largest key this thread still holds
#pragma unroll
  for (int j = 0; j < kExpertsPerThread; ++j) {
    const int e = tid + kBlockThreads * j;
    key[j] = 0;
    if (e < experts) {
      const float sig = sigmoid_as_reference(logit[j]);
      scores[e] = sig;
      const float c = bias != nullptr ? sig + bias_value[j] : sig;
      key[j] = selection_key(isnan(c) ? -INFINITY : c, e);
    }
    mine = key[j] > mine ? key[j] : mine;
  }

  // The warp's top_k, in order; a warp with fewer experts than top_k ends its list with zeros.
  for (int c = 0; c < top_k; ++c) {
    const uint64_t winner = warp_max_key(mine);
    if (lane == 0) warp_lists[warp][c] = winner;
    mine = 0;
#pragma unroll
    for (int j = 0; j < kExpertsPerThread; ++j) {
      if (key[j] == winner) key[j] = 0;
      mine = key[j] > mine ? key[j] : mine;
    }
  }
  __syncthreads();

  // Merge by rank. Every key of the token's top_k is in its warp's list (fewer than top_k keys of that warp are
  // greater), and the keys are distinct, so ranks 0 … top_k−1 are each written exactly once.
  if (tid < kBlockWarps * top_k) {
    const int list = tid / top_k, place = tid % top_k;
    const uint64_t candidate = warp_lists[list][place];
    if (candidate != 0) {
      int rank = place;
      for (int other = 0; other < kBlockWarps; ++other) {
        if (other != list) rank += count_greater(warp_lists[other], top_k, candidate);
      }
      if (rank < top_k) chosen[rank] = candidate;
    }
  }
  __syncthreads();

  if (warp == 0) {
    const int id = lane < top_k ? key_expert(chosen[lane]) : 0;
    const double score = lane < top_k ? double(scores[id]) : 0.0;
    double sum = score;
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    const double denominator = top_k > 1 ? sum + 1e-20 : 1.0;
    if (lane < top_k) {
      const int64_t out = token * top_k + lane;
      expert_ids[out] = id;
      weights[out] = float(score / denominator * double(routed_scaling_factor));
    }
  }
}

}  // namespace

cudaError_t moe_route_topk_sigmoid(const float* logits, const float* bias, int tokens, int experts, int top_k,
                                   float routed_scaling_factor, int32_t* expert_ids, float* weights,
                                   cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (tokens < 0 || experts < 1 || experts > kMoeRouterMaxExperts || top_k < 1 || top_k > kMoeRouterMaxTopK ||
      top_k > experts || logits == nullptr || expert_ids == nullptr || weights == nullptr ||
      !std::isfinite(routed_scaling_factor)) {
    return cudaErrorInvalidValue;
  }
  moe_route_block_per_token<<<static_cast<unsigned>(tokens), kBlockThreads, 0, stream>>>(
      logits, bias, experts, top_k, routed_scaling_factor, expert_ids, weights);
  return cudaGetLastError();
}

}  // namespace k3::kernels
