// Draft, verify and rollback costs of speculative decoding on K3, from the op graphs.
#include "sim/spec/speculative.h"

#include "core/op_graph.h"
#include "sim/predict.h"
#include "sim/roofline.h"
#include "sim/test_data.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

namespace k3 {
namespace {

Scenario k3_decode(long long batch, long long context) {
  return load_scenario(test::scenario_path("k3-gb300-tp8-decode-128k.yaml"), test::data(),
                       {fmt::format("workload.batch={}", batch), fmt::format("workload.context_tokens={}", context)});
}

TEST(Speculative, DrafterIsAFewBillionParameters) {
  const Scenario s = k3_decode(1, 4096);
  const SpecStepCosts c = speculative_step_costs(s, DrafterSpec{}, 7);
  // 5 MLA layers (232.2 M each) + 5 dense MLPs (3·7168·8192) + lm_head 1.17 B + norms: inside 2.3–3.6 B.
  EXPECT_GT(c.drafter_params, 2.3e9);
  EXPECT_LT(c.drafter_params, 3.6e9);
}

TEST(Speculative, BlockDrafterIsFlatAutoregressiveIsLinear) {
  const Scenario s = k3_decode(1, 4096);
  DrafterSpec block, ar;
  ar.kind = DrafterKind::autoregressive;
  const double b1 = draft_time_us(s, block, 1), b8 = draft_time_us(s, block, 8);
  const double a1 = draft_time_us(s, ar, 1), a8 = draft_time_us(s, ar, 8);
  EXPECT_LT(b8 / b1, 1.25);  // one pass: weights read once, 8 tokens instead of 1
  EXPECT_NEAR(a8 / a1, 8.0, 0.1);
  EXPECT_NEAR(a1, b1, 1e-9 * a1);  // one token: the same pass either way
}

TEST(Speculative, VerifyTouchesMoreExpertsAndCostsMoreThanDecode) {
  const Scenario s = k3_decode(16, 8192);
  const SpecStepCosts c = speculative_step_costs(s, DrafterSpec{}, 3);
  // 16 sequences × 4 tokens = 64 routed tokens against 16: E(1 − (1 − k/E)^T) per 8 EP ranks.
  EXPECT_NEAR(c.decode_distinct_experts, expected_distinct_experts(896, 16, 16) / 8, 1e-9);
  EXPECT_NEAR(c.verify_distinct_experts, expected_distinct_experts(896, 16, 64) / 8, 1e-9);
  EXPECT_GT(c.verify_us, c.decode_us);
  EXPECT_LT(c.verify_us, 4 * c.decode_us);  // weights are read once for the 4 tokens
}

TEST(Speculative, ReplayIsCheaperThanCopyingStatesAndMatchesHandBytes) {
  const Scenario s = k3_decode(64, 4096);
  const int g = 7;
  const double replay = rollback_time_us(s, RollbackKind::replay_inputs, g, 3);
  const double copy = rollback_time_us(s, RollbackKind::copy_states, g, 3);
  EXPECT_LT(replay, copy);
  EXPECT_EQ(rollback_time_us(s, RollbackKind::replay_inputs, g, g + 1), 0.0);
  // Hand count, per GPU (tp 8: 12 heads): state 12·128²·4 B + conv 3·1536·3·2 B = 814,080 B per sequence
  // and KDA layer; replay reads and writes it and reads 3 tokens of q, k, v, gate (4·1536) + beta (12) bf16.
  const double per_layer_bytes = 64 * (2 * 814080.0 + 3 * (4 * 1536 + 12) * 2.0);
  const Hardware& hw = s.hardware;
  const double mem_us =
      per_layer_bytes / (hw.hbm_bandwidth_bytes_per_s * hw.efficiency_of(EfficiencyClass::recurrent).memory) * 1e6;
  const double flops_us = 64 * 3 * 12 * (7 * 128.0 * 128 + 2 * 128) /
                          (hw.peak(ComputeType::fp32) * hw.efficiency_of(EfficiencyClass::recurrent).compute) * 1e6;
  // Per kernel: the ridge's smooth max of the two times, the graph node and the recurrent kind's fixed floor.
  const double fixed_us = hw.graph_kernel_overhead_us + hw.kernel_latency_of(OpKind::kda_recurrent);
  EXPECT_NEAR(replay, 69 * (ridge_max(flops_us, mem_us, hw.ridge_smooth_max_exponent) + fixed_us), 1e-6 * replay);
  // Copy: γ extra state writes per sequence and layer, no replay.
  const double copy_us =
      64 * g * 814080.0 / (hw.hbm_bandwidth_bytes_per_s * hw.efficiency_of(EfficiencyClass::recurrent).memory) * 1e6;
  EXPECT_NEAR(copy, 69 * (copy_us + fixed_us), 1e-6 * copy);
}

TEST(Speculative, OutcomeBoundsAndInversion) {
  const Scenario s = k3_decode(1, 4096);
  const SpecStepCosts c = speculative_step_costs(s, DrafterSpec{}, 7);
  const SpecOutcome none = speculative_outcome(s, c, AcceptanceModel::iid(0.0, 7), RollbackKind::replay_inputs);
  EXPECT_DOUBLE_EQ(none.tokens_per_step, 1.0);
  EXPECT_LT(none.speedup, 1.0);  // all cost, no gain
  const SpecOutcome all = speculative_outcome(s, c, AcceptanceModel::iid(1.0, 7), RollbackKind::replay_inputs);
  EXPECT_DOUBLE_EQ(all.rollback_us, 0.0);
  EXPECT_NEAR(all.speedup, 8.0 * c.decode_us / (c.draft_us + c.verify_us), 1e-9);
  const SpecOutcome mid = speculative_outcome(s, c, AcceptanceModel::iid(0.8, 7), RollbackKind::replay_inputs);
  const RequiredAcceptance r = acceptance_for_speedup(s, c, RollbackKind::replay_inputs, mid.speedup);
  ASSERT_TRUE(r.attainable);
  EXPECT_NEAR(r.alpha, 0.8, 1e-6);
  EXPECT_FALSE(acceptance_for_speedup(s, c, RollbackKind::replay_inputs, 50.0).attainable);
}

TEST(Speculative, Deterministic) {
  const Scenario s = k3_decode(8, 65536);
  const SpecStepCosts a = speculative_step_costs(s, DrafterSpec{}, 5), b = speculative_step_costs(s, DrafterSpec{}, 5);
  EXPECT_EQ(a.draft_us, b.draft_us);
  EXPECT_EQ(a.verify_us, b.verify_us);
  EXPECT_EQ(a.replay_us, b.replay_us);
}

}  // namespace
}  // namespace k3
