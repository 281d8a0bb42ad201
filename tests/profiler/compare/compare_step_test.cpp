// compare's step on the GPU, its idle time, the order of the largest errors and the shape check, on a hand-built
// prediction and trace whose answers are worked out here; and on the committed decode fixture
// (profiler/fixtures/make_fixtures.py), whose steps are laid out by hand there.
#include "profiler/compare/compare.h"
#include "profiler/trace/chrome_json.h"

#include "core/hardware.h"

#include <gtest/gtest.h>

namespace k3::profiler {
namespace {

Hardware h200() { return load_hardware(std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/h200-sxm.yaml"); }

void event(Trace& t, EventKind kind, const std::string& op, std::int64_t start_us, std::int64_t end_us, int instance,
           int stream = 7) {
  Event e;
  e.kind = kind;
  e.name = op.empty() ? "memset" : "k_" + op;
  e.start_ns = start_us * 1000;
  e.end_ns = end_us * 1000;
  e.device = 0;
  e.stream = stream;
  e.op = op;
  e.op_instance = op.empty() ? kNone : instance;
  t.add(e);
}

PredictionFile two_ops() {
  const std::string zero = R"({"weights":0,"kv":0,"state":0,"activations":0})";
  auto op = [&](const std::string& name, double us) {
    return R"({"name":")" + name + R"(","kind":"gemm","compute":"bf16","flops":1,"read":)" + zero + R"(,"written":)" +
           zero + R"(,"kernels":1,"bound":"memory","time_us":)" + std::to_string(us) + "}";
  };
  return parse_prediction(R"({"scenario":{"model":"kimi-k3","hardware":"H200 SXM","cuda_graphs":true,)"
                          R"("phase":"decode","batch":8,"context_tokens":131072,"new_tokens":1},)"
                          R"("step":{"step_time_us":200},"ops":[)" +
                              op("L001.kda.qkv_proj", 10) + "," + op("L004.moe.experts", 300) + "]}",
                          "p.json");
}

// Step 0: A [0,5], B [50,250] and an unattributed memset [10,30] -> span 250, busy 5 + 20 + 200 = 225, idle 25.
// Step 1: A [1000,1005], B [1005,1205] -> span 205, busy 205, idle 0. Medians: span 227.5, idle 12.5.
// Errors: A 10 predicted vs 5 measured: +5 us, +100 %; B 300 vs median(200, 200) = 200: +100 us, +50 %.
Trace two_steps() {
  Trace t;
  event(t, EventKind::kernel, "L001.kda.qkv_proj", 0, 5, 0);
  event(t, EventKind::memset, "", 10, 30, 0, 8);
  event(t, EventKind::kernel, "L004.moe.experts", 50, 250, 0);
  event(t, EventKind::kernel, "L001.kda.qkv_proj", 1000, 1005, 1);
  event(t, EventKind::kernel, "L004.moe.experts", 1005, 1205, 1);
  t.sort();
  return t;
}

TEST(CompareStep, SpanIdleAndTheStepsError) {
  const PredictionFile p = two_ops();
  const Comparison c = compare(p, two_steps(), h200());
  ASSERT_EQ(c.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(c.steps[0].span_us, 250);
  EXPECT_DOUBLE_EQ(c.steps[0].busy_us, 225);
  EXPECT_DOUBLE_EQ(c.steps[1].span_us, 205);
  EXPECT_DOUBLE_EQ(c.steps[1].idle_us(), 0);
  EXPECT_DOUBLE_EQ(c.measured_step_us, 227.5);
  EXPECT_DOUBLE_EQ(c.gpu_idle_in_steps_us, 12.5);
  EXPECT_DOUBLE_EQ(c.predicted_step_us, 200);
  const std::string text = to_text(c, 5);
  EXPECT_NE(text.find("step on the GPU 227.5 us (median of 2, first to last kernel) vs 200.0 us predicted (-12.1%)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU idle inside steps 12.5 us median (5.5% of the step)"), std::string::npos) << text;
  const auto j = to_json(c);
  EXPECT_DOUBLE_EQ(j["step"]["gpu_idle_in_steps_us"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(j["step"]["steps"][0]["idle_us"].get<double>(), 25);
}

TEST(CompareStep, LargestErrorsByMicrosecondsUnlessAskedForPercent) {
  const PredictionFile p = two_ops();
  const Comparison c = compare(p, two_steps(), h200());
  const std::string by_us = to_text(c, 2), by_percent = to_text(c, 2, ErrorOrder::percent);
  const std::size_t a_us = by_us.find("  L001.kda.qkv_proj"), b_us = by_us.find("  L004.moe.experts");
  ASSERT_NE(a_us, std::string::npos);
  ASSERT_NE(b_us, std::string::npos);
  EXPECT_LT(b_us, a_us) << "+100 us before +5 us:\n" << by_us;
  EXPECT_NE(by_us.find("+100.000"), std::string::npos) << by_us;
  EXPECT_LT(by_percent.find("  L001.kda.qkv_proj"), by_percent.find("  L004.moe.experts")) << "+100 % before +50 %:\n"
                                                                                           << by_percent;
}

TEST(CompareShape, NamesEachDifferenceBetweenPredictionAndTrace) {
  const PredictionFile p = two_ops();  // kimi-k3, 4 layers (L001..L004), decode, batch 8, context 131072, H200 SXM
  std::map<std::string, std::string> meta = {{"model", "kimi-k3 (4 layers)"},
                                             {"shape", "batch 8, context 131072, 24 decode steps, CUDA graph"},
                                             {"gpu", "NVIDIA H200"}};
  EXPECT_TRUE(shape_mismatches(p, meta).empty());
  EXPECT_TRUE(shape_mismatches(p, {}).empty()) << "a trace that records nothing is not refused";
  std::map<std::string, std::string> other = {{"model", "kimi-k3 (2 layers)"},
                                              {"shape", "batch 1, context 8192, 24 decode steps, eager"},
                                              {"gpu", "NVIDIA B200"}};
  EXPECT_EQ(
      shape_mismatches(p, other),
      (std::vector<std::string>{"layers: the prediction has 4, the trace 2", "batch: the prediction has 8, the trace 1",
                                "context: the prediction has 131072, the trace 8192",
                                "hardware: the prediction is for H200 SXM, the trace ran on NVIDIA B200"}));
  meta["shape"] = "prefill of 1 x 4096 tokens in chunks of 2048";
  EXPECT_EQ(shape_mismatches(p, meta),
            (std::vector<std::string>{"phase: the prediction has decode, the trace prefill"}));
}

// The decode fixture: each step runs from its first kda kernel (t0) to decode.advance's end (t0 + 505 us); busy
// inside are kda's union (120, 125, 140 us), the all-to-all (40), lm_head (200, 240, 260) and the advance (5), so
// the idle times are 140, 95 and 60 us; the memsets at t0 + 600 us lie outside every step.
TEST(CompareStep, DecodeFixtureByHand) {
  const std::string fixtures = std::string(K3PERF_SOURCE_DIR) + "/profiler/fixtures/";
  const PredictionFile p = load_prediction(fixtures + "decode_prediction.json");
  const Comparison c = compare(p, read_trace(fixtures + "decode_trace.json.gz"), h200());
  ASSERT_EQ(c.steps.size(), 3u);
  for (const StepWindow& w : c.steps) EXPECT_DOUBLE_EQ(w.span_us, 505);
  EXPECT_DOUBLE_EQ(c.steps[0].idle_us(), 140);
  EXPECT_DOUBLE_EQ(c.steps[1].idle_us(), 95);
  EXPECT_DOUBLE_EQ(c.steps[2].idle_us(), 60);
  EXPECT_DOUBLE_EQ(c.gpu_idle_in_steps_us, 95);
  EXPECT_EQ(c.predicted_step_us, 0);  // the fixture's prediction has no step
  EXPECT_NE(to_text(c, 0).find("(the prediction has no step time)"), std::string::npos);
}

}  // namespace
}  // namespace k3::profiler
