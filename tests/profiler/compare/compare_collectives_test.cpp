// compare's compute and communication apart (compare.h), on a hand-built prediction and trace: collectives measured
// (an NCCL run) are compared and summed apart from compute; a rank run on one GPU (trace metadata collectives:
// emulated) lists them as emulated, never compares the emulation's copies, and states the step as measured
// compute + predicted communication.
#include "profiler/compare/compare.h"

#include "core/hardware.h"

#include <gtest/gtest.h>

namespace k3::profiler {
namespace {

PredictedOp op(const std::string& name, OpKind kind, double time_us) {
  PredictedOp p;
  p.name = name;
  p.kind = kind;
  p.compute = ComputeType::bf16;
  p.flops = 1e6;
  p.bytes = 1e6;
  p.bound = kind == OpKind::collective ? "communication" : "memory";
  p.time_us = time_us;
  return p;
}

void event(Trace& t, EventKind kind, const std::string& op, double us, int instance, std::int64_t* clock_ns) {
  Event e;
  e.kind = kind;
  e.name = kind == EventKind::kernel ? "k_" + op : "memcpy_dtod";
  e.start_ns = *clock_ns;
  e.end_ns = *clock_ns + std::int64_t(us * 1000);
  e.device = 0;
  e.stream = 7;
  e.op = op;
  e.op_instance = instance;
  t.add(e);
  *clock_ns = e.end_ns + 1000;
}

struct Fixture {
  PredictionFile prediction;
  Trace trace;
  Hardware hw = load_hardware(std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/h200-sxm.yaml");
  Fixture() {
    prediction.origin = "test";
    prediction.ops = {op("L001.kda.o_proj", OpKind::gemm, 30), op("L001.attn.all_reduce", OpKind::collective, 12),
                      op("L002.moe.dispatch", OpKind::collective, 40), op("L002.moe.experts", OpKind::moe_experts, 90)};
    std::int64_t clock = 0;
    for (int step = 0; step < 3; ++step) {
      event(trace, EventKind::kernel, "L001.kda.o_proj", 25, step, &clock);
      event(trace, EventKind::kernel, "L001.attn.all_reduce", 10, step, &clock);  // NCCL's kernel, or nothing
      event(trace, EventKind::memcpy, "L002.moe.dispatch", 3, step, &clock);      // the emulation's copy
      event(trace, EventKind::kernel, "L002.moe.experts", 100, step, &clock);
    }
    trace.sort();
  }
};

TEST(CompareCollectives, MeasuredCollectivesAreSummedApartFromCompute) {
  const Fixture f;
  const Comparison c = compare(f.prediction, f.trace, f.hw);
  ASSERT_EQ(c.ops.size(), 4u);
  EXPECT_TRUE(c.emulated.empty());
  EXPECT_FALSE(c.split.emulated);
  EXPECT_EQ(c.split.compute_ops, 2u);
  EXPECT_EQ(c.split.collectives, 2u);
  EXPECT_DOUBLE_EQ(c.split.predicted_compute_us, 120);
  EXPECT_DOUBLE_EQ(c.split.measured_compute_us, 125);
  EXPECT_DOUBLE_EQ(c.split.predicted_communication_us, 52);
  ASSERT_TRUE(c.split.measured_communication_us.has_value());
  EXPECT_DOUBLE_EQ(*c.split.measured_communication_us, 13);
  EXPECT_DOUBLE_EQ(c.split.step_us(), 138);
  EXPECT_DOUBLE_EQ(c.split.predicted_step_us(), 172);
  EXPECT_NE(to_text(c, 0).find("communication 13.0 us measured vs 52.0 predicted"), std::string::npos) << to_text(c, 0);
}

TEST(CompareCollectives, EmulatedCollectivesAreListedNotCompared) {
  Fixture f;
  f.trace.metadata["collectives"] = "emulated";
  const Comparison c = compare(f.prediction, f.trace, f.hw);
  ASSERT_EQ(c.ops.size(), 2u);
  EXPECT_EQ(c.ops[0].predicted->name, "L001.kda.o_proj");
  EXPECT_EQ(c.ops[1].predicted->name, "L002.moe.experts");
  ASSERT_EQ(c.emulated.size(), 2u);
  EXPECT_EQ(c.emulated[0].predicted->name, "L001.attn.all_reduce");
  EXPECT_DOUBLE_EQ(c.emulated[0].emulation_us, 10);
  EXPECT_EQ(c.emulated[1].predicted->name, "L002.moe.dispatch");
  EXPECT_DOUBLE_EQ(c.emulated[1].emulation_us, 3);
  EXPECT_TRUE(c.split.emulated);
  EXPECT_FALSE(c.split.measured_communication_us.has_value());
  EXPECT_DOUBLE_EQ(c.split.measured_compute_us, 125);
  EXPECT_DOUBLE_EQ(c.split.step_us(), 125 + 52);  // measured compute + predicted communication
  for (const GroupError& g : c.by_kind) EXPECT_NE(g.group, to_string(OpKind::collective));
  const auto j = to_json(c);
  EXPECT_EQ(j["compute_and_communication"]["collectives"], "emulated");
  EXPECT_TRUE(j["compute_and_communication"]["measured_communication_us"].is_null());
  EXPECT_EQ(j["emulated_collectives"].size(), 2u);
  EXPECT_NE(to_text(c, 0).find("measured compute + predicted communication"), std::string::npos) << to_text(c, 0);
}

}  // namespace
}  // namespace k3::profiler
