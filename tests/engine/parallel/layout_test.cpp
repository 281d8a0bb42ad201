// Rank coordinates and groups against the layouts written out by hand, and the errors of impossible layouts.
#include "engine/parallel/layout.h"

#include "tests/expect_input_error.h"

#include <gtest/gtest.h>

#include <set>

namespace k3::parallel {
namespace {

Parallelism layout_of(int tp, int attention_dp, int ep, int pp = 1) {
  Parallelism p;
  p.tp = tp;
  p.attention_dp = attention_dp;
  p.ep = ep;
  p.pp = pp;
  return p;
}

TEST(RankLayout, Tp8AttentionDp2Ep16) {
  const RankLayout r = rank_layout(layout_of(8, 2, 16), 13, 93);
  EXPECT_EQ(r.stage, 0);
  EXPECT_EQ(r.attention_dp_rank, 1);
  EXPECT_EQ(r.tp_rank, 5);
  EXPECT_EQ(r.ep_rank, 13);
  EXPECT_EQ(r.moe_tp_rank, 0);
  EXPECT_EQ(r.tp_group, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(r.ep_group.size(), 16u);
  EXPECT_EQ(r.moe_tp_group, (std::vector<int>{13}));
  EXPECT_EQ(r.first_layer, 0);
  EXPECT_EQ(r.last_layer, 93);
}

TEST(RankLayout, ExpertsSplitInsideAnExpert) {
  // tp 4, ep 2: moe_tp 2; rank 3 holds the second half of the experts of ep rank 1.
  const RankLayout r = rank_layout(layout_of(4, 1, 2), 3, 8);
  EXPECT_EQ(r.ep_rank, 1);
  EXPECT_EQ(r.moe_tp_rank, 1);
  EXPECT_EQ(r.ep_group, (std::vector<int>{1, 3}));
  EXPECT_EQ(r.moe_tp_group, (std::vector<int>{2, 3}));
}

TEST(RankLayout, PipelineStagesSplitLayersAsTheOpGraph) {
  // 93 layers over 4 stages: 24 per stage, the last stage 21.
  const Parallelism p = layout_of(2, 1, 2, 4);
  const RankLayout last = rank_layout(p, 7, 93);
  EXPECT_EQ(last.stage, 3);
  EXPECT_TRUE(last.last_stage());
  EXPECT_EQ(last.first_layer, 72);
  EXPECT_EQ(last.last_layer, 93);
  EXPECT_EQ(last.pp_group, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(last.tp_group, (std::vector<int>{6, 7}));
  EXPECT_TRUE(last.holds_layer(72));
  EXPECT_FALSE(last.holds_layer(71));
}

TEST(RankLayout, EveryRankHasDistinctCoordinates) {
  const Parallelism p = layout_of(4, 2, 4, 2);
  std::set<std::tuple<int, int, int, int, int>> seen;
  for (int rank = 0; rank < p.gpus(); ++rank) {
    const RankLayout r = rank_layout(p, rank, 10);
    EXPECT_EQ(r.stage * p.stage_gpus() + r.attention_dp_rank * p.tp + r.tp_rank, rank);
    EXPECT_EQ(r.stage * p.stage_gpus() + r.ep_rank * p.moe_tp() + r.moe_tp_rank, rank);
    EXPECT_EQ(r.tp_group.at(static_cast<std::size_t>(r.tp_rank)), rank);
    EXPECT_EQ(r.ep_group.at(static_cast<std::size_t>(r.ep_rank)), rank);
    EXPECT_EQ(r.pp_group.at(static_cast<std::size_t>(r.stage)), rank);
    seen.insert({r.stage, r.attention_dp_rank, r.tp_rank, r.ep_rank, r.moe_tp_rank});
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(p.gpus()));
}

TEST(RankLayout, ImpossibleLayoutsNameTheKey) {
  test::expect_input_error([] { rank_layout(layout_of(16, 1, 16), 16, 93); }, {"rank 16", "16 GPUs"});
  test::expect_input_error([] { rank_layout(layout_of(16, 1, 16), -1, 93); }, {"rank -1"});
  test::expect_input_error([] { rank_layout(layout_of(8, 1, 3), 0, 93); }, {"parallelism.ep 3", "= 8"});
  test::expect_input_error([] { rank_layout(layout_of(0, 1, 1), 0, 93); }, {"parallelism.tp", "got 0"});
  test::expect_input_error([] { rank_layout(layout_of(1, 1, 1, 4), 0, 9); }, {"parallelism.pp 4", "9 layers"});
}

}  // namespace
}  // namespace k3::parallel
