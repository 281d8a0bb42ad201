// What the MoE op cases (moe_cases.cpp) share with the plain MoE tests beside them
// (tests/kernels/moe_router_gpu_test.cpp): router logits as ref::route forms them, the router's test shapes and data,
// and the bucketing's device outputs.
#pragma once

#include "core/model_config.h"
#include "engine/reference/moe.h"
#include "kernels/moe_bucket.h"
#include "tests/kernels/op_cases/op_case.h"

#include <random>
#include <vector>

namespace k3::gpu_test::moe {

// Logits as ref::route forms them: fp64 dot products rounded to fp32.
ref::Matrix router_logits(const ref::Matrix& x, const ref::Matrix& router);
MoeSpec router_spec(int experts, int top_k, double scaling, bool bias);

// The router case's shapes (tokens, experts, top_k, hidden, bias, scaling_milli, tied_pairs: pairs of experts given
// the same router row and bias, exact ties) and the data of one.
std::vector<Shape> router_shapes();
struct RouterData {
  ref::Matrix logits;
  ref::Vector bias;  // empty without a bias
  ref::Routing routing;
};
RouterData router_data(const Shape& s, std::mt19937& rng);
// Tokens whose last chosen expert ties with an unchosen one.
int boundary_ties(const Shape& s, const RouterData& data);

// Device outputs of moe_bucket_by_expert.
struct DeviceBuckets {
  DeviceBuckets(int tokens, int top_k, int experts);
  kernels::MoeBuckets view();
  DeviceBuffer<int32_t> offsets, slot_token;
  DeviceBuffer<float> slot_weight;
  DeviceBuffer<int32_t> slot_of, active, active_count;
  DeviceBuffer<uint8_t> workspace;
};

}  // namespace k3::gpu_test::moe
