#include "kernels/moe_router.h"

#include <cmath>

namespace k3::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kTokensPerBlock = kThreads / 32;  // one warp per token

// As ref::sigmoid: fp64 arithmetic rounded to fp32, so the GPU and CPU scores are the same floats.
__device__ float sigmoid_as_reference(float a) { return float(1.0 / (1.0 + exp(-double(a)))); }

// The selection order: (value a, id i) comes before (value b, id j) when a > b, or a == b and i < j. Values are
// never NaN here, so this is a strict total order over distinct ids.
__device__ bool comes_before(float a, int i, float b, int j) { return a > b || (a == b && i < j); }

// Best (value, id) among this lane's experts (lane, lane + 32, …) that come after (after_value, after_id) in the
// selection order; after_id < 0 means no bound. best_id = −1 when the lane has none left.
__device__ void lane_best(const float* choice, int experts, int lane, float after_value, int after_id,
                          float& best_value, int& best_id) {
  best_id = -1;
  best_value = -INFINITY;
  for (int e = lane; e < experts; e += 32) {
    const float v = choice[e];
    if (after_id >= 0 && !comes_before(after_value, after_id, v, e)) continue;  // already chosen
    if (best_id < 0 || comes_before(v, e, best_value, best_id)) {
      best_value = v;
      best_id = e;
    }
  }
}

__global__ void moe_route_warp_per_token(const float* logits, const float* bias, int tokens, int experts, int top_k,
                                         float routed_scaling_factor, int32_t* expert_ids, float* weights) {
  __shared__ float choice_values[kTokensPerBlock][kMoeRouterMaxExperts];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int token = blockIdx.x * kTokensPerBlock + warp;
  if (token >= tokens) return;  // the whole warp; the block never synchronises
  const float* row = logits + int64_t(token) * experts;
  float* choice = choice_values[warp];
  // Every load first (logits and biases into registers, all in flight together), then the fp64 sigmoids: a load
  // per sigmoid kept one HBM/L2 round trip in flight per lane, 38 µs per token on an H200.
  constexpr int kPerLane = kMoeRouterMaxExperts / 32;
  float logit[kPerLane], bias_value[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    logit[j] = e < experts ? row[e] : 0.0f;
    bias_value[j] = bias != nullptr && e < experts ? bias[e] : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    if (e < experts) {
      const float sig = sigmoid_as_reference(logit[j]);
      const float c = bias != nullptr ? sig + bias_value[j] : sig;
      choice[e] = isnan(c) ? -INFINITY : c;
    }
  }
  __syncwarp();

  float mine_value;
  int mine_id;
  lane_best(choice, experts, lane, 0.0f, -1, mine_value, mine_id);
  int chosen = -1;  // lane c < top_k keeps choice c
  for (int c = 0; c < top_k; ++c) {
    float best_value = mine_value;
    int best_id = mine_id;
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other_value = __shfl_xor_sync(0xffffffffu, best_value, offset);
      const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
      if (other_id >= 0 && (best_id < 0 || comes_before(other_value, other_id, best_value, best_id))) {
        best_value = other_value;
        best_id = other_id;
      }
    }
    // Every lane holds the same winner (a total order); top_k ≤ experts, so there is one.
    if (lane == c) chosen = best_id;
    if (best_id == mine_id) lane_best(choice, experts, lane, best_value, best_id, mine_value, mine_id);
  }

  const double score = lane < top_k ? double(sigmoid_as_reference(row[chosen])) : 0.0;
  double sum = score;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const double denominator = top_k > 1 ? sum + 1e-20 : 1.0;
  if (lane < top_k) {
    const int64_t out = int64_t(token) * top_k + lane;
    expert_ids[out] = chosen;
    weights[out] = float(score / denominator * double(routed_scaling_factor));
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
  const auto grid = static_cast<unsigned>((int64_t(tokens) + kTokensPerBlock - 1) / kTokensPerBlock);
  moe_route_warp_per_token<<<grid, kThreads, 0, stream>>>(logits, bias, tokens, experts, top_k,
                                                          routed_scaling_factor, expert_ids, weights);
  return cudaGetLastError();
}

}  // namespace k3::kernels
