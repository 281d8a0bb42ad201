// The shapes a rank computes (engine/parallel/rank_shape.h) against the model's sizes divided by hand, and the
// weights they hold against the sharding's.
#include "engine/parallel/rank_shape.h"

#include "engine/weights/tensor_layout.h"
#include "tests/expect_input_error.h"
#include "tests/sim/test_data.h"

#include <gtest/gtest.h>

namespace k3::parallel {
namespace {

Parallelism layout_of(int tp, int attention_dp, int ep) {
  Parallelism p;
  p.tp = tp;
  p.attention_dp = attention_dp;
  p.ep = ep;
  return p;
}

TEST(RankShape, K3Tp16Ep16Rank5) {
  const ModelConfig m = test::model("kimi-k3");
  const RankShape s = rank_shape(m, rank_layout(layout_of(16, 1, 16), 5, m.num_layers));
  EXPECT_EQ(s.local.kda->num_heads, 96 / 16);
  EXPECT_EQ(s.local.mla.num_heads, 96 / 16);
  EXPECT_EQ(s.local.dense_intermediate, m.dense_intermediate / 16);
  EXPECT_EQ(s.local.moe->shared_intermediate, m.moe->shared_intermediate / 16);
  EXPECT_EQ(s.local.moe->expert_intermediate, m.moe->expert_intermediate);  // moe_tp 1: whole experts
  EXPECT_EQ(s.local.moe->num_experts, 896);                                 // the router scores all of them
  EXPECT_EQ(s.local.vocab_size, m.vocab_size);
  EXPECT_EQ(s.experts, 56);
  EXPECT_EQ(s.first_expert, 5 * 56);
  EXPECT_TRUE(s.holds_expert(5 * 56 + 55));
  EXPECT_FALSE(s.holds_expert(6 * 56));
  EXPECT_EQ(s.vocab_rows, m.vocab_size / 16);
  EXPECT_EQ(s.first_vocab_row, 5 * (m.vocab_size / 16));
  EXPECT_EQ(s.weight_bytes, shard_checkpoint(m, weights::checkpoint_layout(m), s.layout).bytes());
  // Rank 5 routes tokens [5T/16, 6T/16) of a call: 0 of 4 decode rows, 256 of a 4096-token chunk.
  EXPECT_EQ(s.routed_count(4), 0);
  EXPECT_EQ(s.routed_first(4096), 5 * 256);
  EXPECT_EQ(s.routed_count(4096), 256);
  EXPECT_FALSE(s.single_gpu());
}

TEST(RankShape, OneGpuIsTheModel) {
  const ModelConfig m = test::model("k3-twin");
  const RankShape s = rank_shape(m, rank_layout(Parallelism{}, 0, m.num_layers));
  EXPECT_TRUE(s.single_gpu());
  EXPECT_EQ(s.local.kda->num_heads, m.kda->num_heads);
  EXPECT_EQ(s.local.moe->expert_intermediate, m.moe->expert_intermediate);
  EXPECT_EQ(s.experts, m.moe->num_experts);
  EXPECT_EQ(s.vocab_rows, m.vocab_size);
  EXPECT_EQ(s.routed_first(7), 0);
  EXPECT_EQ(s.routed_count(7), 7);
}

TEST(RankShape, TwinTp2Ep2SplitsEveryShardedSize) {
  const ModelConfig m = test::model("k3-twin");
  const RankShape s = rank_shape(m, rank_layout(layout_of(2, 1, 2), 1, m.num_layers));
  EXPECT_EQ(s.local.kda->num_heads, 2);
  EXPECT_EQ(s.local.kda->projection_dim(), 2 * m.kda->head_dim);
  EXPECT_EQ(s.local.mla.num_heads, 2);
  EXPECT_EQ(s.local.dense_intermediate, 64);
  EXPECT_EQ(s.first_expert, 4);
  EXPECT_EQ(s.experts, 4);
  EXPECT_EQ(s.routed_first(3), 1);
  EXPECT_EQ(s.routed_count(3), 2);
  test::expect_input_error([&] { rank_shape(m, rank_layout(layout_of(8, 1, 8), 0, m.num_layers)); },
                           {"k3-twin.json", "parallelism.tp 8", "4 KDA heads"});
}

}  // namespace
}  // namespace k3::parallel
