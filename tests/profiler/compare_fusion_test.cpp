// compare's fused ops (compare.h, kFusedOps): a predicted op that runs inside its neighbour's kernel and
// range joins the neighbour, on a hand-built prediction and trace.
#include "profiler/compare/compare.h"

#include "core/hardware.h"

#include <gtest/gtest.h>

namespace k3::profiler {
namespace {

PredictedOp op(const std::string& name, OpKind kind, double time_us, double bytes) {
  PredictedOp p;
  p.name = name;
  p.kind = kind;
  p.compute = ComputeType::fp32;
  p.flops = 10 * bytes;
  p.bytes = bytes;
  p.bound = "memory";
  p.time_us = time_us;
  return p;
}

// One kernel of `us` microseconds per instance, attributed to `name`.
void kernels(Trace& t, const std::string& name, double us, int instances, std::int64_t* clock_ns) {
  for (int i = 0; i < instances; ++i) {
    Event e;
    e.kind = EventKind::kernel;
    e.name = "k_" + name;
    e.start_ns = *clock_ns;
    e.end_ns = *clock_ns + std::int64_t(us * 1000);
    e.device = 0;
    e.stream = 7;
    e.op = name;
    e.op_instance = i;
    t.add(e);
    *clock_ns = e.end_ns + 1000;
  }
}

TEST(CompareFusion, NormsJoinTheMixerTheyRunInside) {
  PredictionFile p;
  p.origin = "test";
  p.ops = {op("L001.norm.attn_in", OpKind::rmsnorm, 2, 100),  // layer 0 has no mixer in the op graph
           op("L001.kda.recurrent", OpKind::kda_recurrent, 50, 1000),
           op("L002.attnres.pre_attn", OpKind::attnres_mix, 10, 300),
           op("L002.norm.attn_in", OpKind::rmsnorm, 3, 200),
           op("L002.norm.mlp_in", OpKind::rmsnorm, 4, 200),  // measured on its own: stays
           op("head.attnres", OpKind::attnres_mix, 6, 300),
           op("head.norm", OpKind::rmsnorm, 1, 50),
           op("head.lm_head", OpKind::gemm, 100, 5000)};
  Trace t;
  std::int64_t clock = 0;
  kernels(t, "L001.attnres.pre_attn", 5, 3, &clock);
  kernels(t, "L001.kda.recurrent", 40, 3, &clock);
  kernels(t, "L002.attnres.pre_attn", 15, 3, &clock);
  kernels(t, "L002.norm.mlp_in", 4, 3, &clock);
  kernels(t, "head.attnres", 8, 3, &clock);
  kernels(t, "head.lm_head", 80, 3, &clock);
  kernels(t, "head.sample", 20, 3, &clock);  // not predicted
  t.sort();
  const Hardware hw = load_hardware(std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/h200-sxm.yaml");
  const Comparison c = compare(p, t, hw);

  ASSERT_EQ(c.ops.size(), 6u);
  // Prediction order; L001's norm stands for the mixer range the engine ran it in.
  EXPECT_EQ(c.ops[0].predicted->name, "L001.attnres.pre_attn");
  EXPECT_EQ(c.ops[0].predicted->kind, OpKind::rmsnorm);
  EXPECT_DOUBLE_EQ(c.ops[0].predicted->time_us, 2);
  EXPECT_DOUBLE_EQ(c.ops[0].measured_us, 5);
  EXPECT_DOUBLE_EQ(c.ops[0].error_percent, -60);
  EXPECT_EQ(c.ops[1].predicted->name, "L001.kda.recurrent");
  // L002's mixer carries its norm: 10 + 3 us, 300 + 200 bytes.
  EXPECT_EQ(c.ops[2].predicted->name, "L002.attnres.pre_attn");
  EXPECT_EQ(c.ops[2].predicted->kind, OpKind::attnres_mix);
  EXPECT_DOUBLE_EQ(c.ops[2].predicted->time_us, 13);
  EXPECT_DOUBLE_EQ(c.ops[2].predicted->bytes, 500);
  EXPECT_DOUBLE_EQ(c.ops[2].predicted->flops, 5000);
  EXPECT_NEAR(c.ops[2].error_percent, 100.0 * (13 - 15) / 15, 1e-12);
  EXPECT_EQ(c.ops[3].predicted->name, "L002.norm.mlp_in");
  EXPECT_DOUBLE_EQ(c.ops[3].predicted->time_us, 4);
  EXPECT_EQ(c.ops[4].predicted->name, "head.attnres");
  EXPECT_DOUBLE_EQ(c.ops[4].predicted->time_us, 7);
  EXPECT_EQ(c.ops[5].predicted->name, "head.lm_head");
  EXPECT_EQ(c.fused, (std::vector<std::string>{"L001.norm.attn_in -> L001.attnres.pre_attn",
                                               "L002.norm.attn_in -> L002.attnres.pre_attn",
                                               "head.norm -> head.attnres"}));
  EXPECT_TRUE(c.not_measured.empty());
  ASSERT_EQ(c.not_predicted.size(), 1u);
  EXPECT_EQ(c.not_predicted[0].name, "head.sample");
  // Coverage: every kernel but head.sample's is on a predicted op.
  EXPECT_EQ(c.kernels, 21u);
  EXPECT_EQ(c.kernels_on_predicted_ops, 18u);
  EXPECT_NEAR(c.coverage_percent(), 100.0 * 3 * (5 + 40 + 15 + 4 + 8 + 80) / (3 * (5 + 40 + 15 + 4 + 8 + 80 + 20)),
              1e-9);
  // The merged predictions outlive a copy of the comparison.
  const Comparison copy = c;
  EXPECT_DOUBLE_EQ(copy.ops[2].predicted->time_us, 13);
  // Without the host in the trace, nothing is fused: the norm is simply not measured.
  Trace only_kda;
  clock = 0;
  kernels(only_kda, "L001.kda.recurrent", 40, 2, &clock);
  only_kda.sort();
  const Comparison d = compare(p, only_kda, hw);
  EXPECT_TRUE(d.fused.empty());
  ASSERT_EQ(d.ops.size(), 1u);
  EXPECT_EQ(d.not_measured.size(), 7u);
}

}  // namespace
}  // namespace k3::profiler
