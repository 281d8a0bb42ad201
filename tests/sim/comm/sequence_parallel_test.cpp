// Sequence parallelism for the residual stream (AttnRes mixers, norms): off by default and then the
// graph is unchanged; on, every TP all-reduce becomes a reduce-scatter plus an all-gather of the same
// bus bytes, and the mixers and norms work on 1/tp of the tokens.
#include "core/op_graph.h"
#include "expect_input_error.h"
#include "sim/roofline.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

#include <map>

namespace k3 {
namespace {

Precision k3_precision() {
  Precision p;
  p.routed_experts = StorageFormat::mxfp4;
  return p;
}

struct Totals {
  std::map<CollectiveKind, double> bus_bytes;
  std::map<CollectiveKind, int> count;
  double attnres_flops = 0, attnres_bytes = 0;
};

Totals totals(const OpGraph& g) {
  Totals t;
  for (const Op& op : g.ops) {
    if (op.collective) {
      t.bus_bytes[op.collective->kind] +=
          op.collective->bytes * bus_bandwidth_factor(op.collective->kind, op.collective->group_size);
      t.count[op.collective->kind] += 1;
    }
    if (op.kind == OpKind::attnres_mix) {
      t.attnres_flops += op.flops;
      t.attnres_bytes += op.bytes();
    }
  }
  return t;
}

TEST(SequenceParallel, OffByDefaultAndTheSameGraph) {
  const ModelConfig m = test::model("kimi-k3");
  Parallelism par{8, 1, 8, 1};
  EXPECT_FALSE(par.sequence_parallel);
  const OpGraph a = build_op_graph(m, Phase::decode(16, 4096), par, k3_precision());
  par.sequence_parallel = true;
  par.tp = 1;
  par.ep = 1;
  const OpGraph tp1 = build_op_graph(m, Phase::decode(16, 4096), par, k3_precision());
  par.sequence_parallel = false;
  const OpGraph tp1_off = build_op_graph(m, Phase::decode(16, 4096), par, k3_precision());
  ASSERT_EQ(tp1.ops.size(), tp1_off.ops.size());  // nothing to split at tp 1
  for (const Op& op : a.ops) EXPECT_FALSE(op.collective && op.collective->kind == CollectiveKind::reduce_scatter);
}

TEST(SequenceParallel, AllReduceBecomesReduceScatterPlusAllGather) {
  const ModelConfig m = test::model("kimi-k3");
  const Phase phase = Phase::decode(16, 4096);
  Parallelism par{8, 1, 8, 1};
  const Totals off = totals(build_op_graph(m, phase, par, k3_precision()));
  par.sequence_parallel = true;
  const OpGraph g = build_op_graph(m, phase, par, k3_precision());
  const Totals on = totals(g);
  // 93 layers x 2 TP all-reduces + the embedding's: each becomes one reduce-scatter; one all-gather
  // before each attention and MLP and one before lm_head.
  EXPECT_EQ(off.count.at(CollectiveKind::all_reduce), 2 * 93 + 1);
  EXPECT_EQ(on.count.count(CollectiveKind::all_reduce), 0u);
  EXPECT_EQ(on.count.at(CollectiveKind::reduce_scatter), 2 * 93 + 1);
  EXPECT_EQ(on.count.at(CollectiveKind::all_gather), 2 * 93 + 1 + 1);  // + the logits all-gather
  // Bus bytes: each reduce-scatter ((n-1)/n) is followed by one all-gather ((n-1)/n) of the same
  // buffer — the next attention's, MLP's or lm_head's input — which is the all-reduce's 2(n-1)/n.
  // The logits all-gather is in both.
  EXPECT_NEAR(on.bus_bytes.at(CollectiveKind::reduce_scatter) + on.bus_bytes.at(CollectiveKind::all_gather),
              off.bus_bytes.at(CollectiveKind::all_reduce) + off.bus_bytes.at(CollectiveKind::all_gather),
              1e-9 * off.bus_bytes.at(CollectiveKind::all_reduce));
  // The mixers hold 1/8 of the tokens.
  EXPECT_NEAR(on.attnres_flops * 8, off.attnres_flops, 1e-9 * off.attnres_flops);
  const Op* rs = g.find("L004.attn.reduce_scatter");
  const Op* ag = g.find("L004.attn.sequence_all_gather");
  ASSERT_NE(rs, nullptr);
  ASSERT_NE(ag, nullptr);
  EXPECT_DOUBLE_EQ(rs->collective->bytes, 16 * 7168 * 2.0);
  EXPECT_DOUBLE_EQ(ag->collective->bytes, 16 * 7168 * 2.0);
  EXPECT_EQ(g.find("L004.attn.all_reduce"), nullptr);
}

TEST(SequenceParallel, ScenarioKey) {
  const Scenario s = load_scenario(test::scenario_path("k3-gb300-tp8-decode-128k.yaml"), test::data(),
                                   {"parallelism.sequence_parallel=true"});
  EXPECT_TRUE(s.parallelism.sequence_parallel);
  test::expect_input_error(
      [] {
        load_scenario(test::scenario_path("k3-gb300-tp8-decode-128k.yaml"), test::data(),
                      {"parallelism.sequence_parallel=maybe"});
      },
      {"sequence_parallel"});
}

}  // namespace
}  // namespace k3
