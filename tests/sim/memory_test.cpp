// Memory model: K3's KV and state sizes (K3-SPEC §7) and the per-GPU breakdown.
#include "sim/memory.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

namespace k3 {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

TEST(Memory, K3KvAndStateAtOneMillionTokens) {
  const ModelConfig k3 = test::model("kimi-k3");
  Precision p;
  p.kda_state = StorageFormat::bf16;
  const double tokens = 1 << 20;
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(k3, p), 24 * 1152.0);
  const ModelConfig all_mla = with_all_attention(k3, AttentionKind::mla);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(all_mla, p) * tokens / kGiB, 104.625);
  const double hybrid =
      kv_bytes_per_token(k3, p) * tokens + kda_recurrent_state_bytes(k3, p) + kda_conv_state_bytes(k3, p);
  EXPECT_NEAR(hybrid / kGiB, 27.22, 0.005);
  EXPECT_NEAR(kda_recurrent_state_bytes(k3, p) / kGiB, 0.202, 0.001);
  EXPECT_NEAR(kda_conv_state_bytes(k3, p) / kGiB, 0.014, 0.001);
  p.kda_state = StorageFormat::fp32;
  EXPECT_NEAR(
      (kv_bytes_per_token(k3, p) * tokens + kda_recurrent_state_bytes(k3, p) + kda_conv_state_bytes(k3, p)) / kGiB,
      27.42, 0.005);
  EXPECT_DOUBLE_EQ(kda_recurrent_state_bytes(k3, p), 69.0 * 96 * 128 * 128 * 4);
  // fp8 latent cache: one byte per value plus one fp32 scale per token and layer.
  p.kv_cache = StorageFormat::fp8;
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(k3, p), 24 * (576.0 + 4));
}

TEST(Memory, K3CheckpointBytes) {
  const ModelConfig k3 = test::model("kimi-k3");
  Precision p;
  p.routed_experts = StorageFormat::mxfp4;
  // 2.7227 T routed parameters at 4.25 bits + ~56.7 B others in bf16.
  const double expected = 2722740830208.0 * 4.25 / 8 + (2779484478208.0 - 2722740830208.0) * 2;
  EXPECT_NEAR(weight_bytes(k3, p), expected, 1e-9 * expected);
}

TEST(Memory, PerGpuBreakdownAndLargestBatch) {
  Scenario s = load_scenario(test::scenario_path("k3-gb300-tp8-decode-128k.yaml"), test::data());
  const OpGraph g = build_op_graph(s.model, s.phase, s.parallelism, s.precision);
  const MemoryBreakdown m = estimate_memory(s, g);
  // Each of the 8 TP ranks holds the whole latent cache of every sequence of its group.
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token, 24 * 1152.0);
  EXPECT_DOUBLE_EQ(m.kv_bytes, 24 * 1152.0 * (131072 + 1) * 8);
  EXPECT_DOUBLE_EQ(m.state_bytes_per_sequence, 69 * (12.0 * 128 * 128 * 4 + 3.0 * 12 * 128 * 3 * 2));
  // Experts: 112 of 896 per GPU at 4.25 bits.
  EXPECT_GT(m.weights_bytes, 112 * 33030144.0 * 4.25 / 8 * 92);
  // Non-expert weights: attention and shared experts split 8 ways, latent projections and router replicated.
  EXPECT_LT(m.weights_bytes, 112 * 33030144.0 * 4.25 / 8 * 92 + 30e9);
  EXPECT_TRUE(m.fits());
  const long long b = max_batch(s, s.phase.context_tokens);
  ASSERT_GT(b, 0);
  Scenario at = s;
  at.phase.batch = b;
  EXPECT_TRUE(estimate_memory(at, build_op_graph(at.model, at.phase, at.parallelism, at.precision)).fits());
  at.phase.batch = b + 1;
  EXPECT_FALSE(estimate_memory(at, build_op_graph(at.model, at.phase, at.parallelism, at.precision)).fits());
  // Longer contexts admit fewer sequences.
  EXPECT_LT(max_batch(s, 4 * s.phase.context_tokens), b);
}

TEST(Memory, NothingFitsWhenWeightsExceedHbm) {
  Scenario s = load_scenario(test::scenario_path("k3-gb300-tp8-decode-128k.yaml"), test::data(),
                             {"gpus=1", "parallelism.tp=1", "parallelism.ep=1"});
  EXPECT_EQ(max_batch(s, 1024), 0);
}

}  // namespace
}  // namespace k3
