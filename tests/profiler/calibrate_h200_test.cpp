// The calibration behind scenarios/hardware/h200-validated.yaml, re-run from the committed H200
// traces (tests/data/h200_engine_traces_3: K3's first 4 layers at real width at commit 27cd91c, decode at
// batch 1/8/64 and context 8K/128K/1M): fitted on batch 1 and 64 at 8K and batch 1 at 1M, checked on the five runs at
// other batch sizes and contexts. The numbers are those the run of `k3perf calibrate` printed
// (docs/profile.md); the committed hardware file must hold the same fit.
#include "core/hardware.h"
#include "core/op_graph.h"
#include "profiler/compare/calibrate.h"

#include <gtest/gtest.h>

#include <string>

namespace k3::profiler {
namespace {

const std::string kDir = std::string(K3PERF_SOURCE_DIR) + "/tests/data/h200_engine_traces_3/";
const std::string kHardwareDir = std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/";

CalibrationRun run(const std::string& name) {
  return load_calibration_run(kDir + "pred_" + name + ".json", kDir + "trace_" + name + ".json.gz");
}

const Calibration& h200_calibration() {
  static const Calibration c =
      calibrate({run("decode_b1_ctx8192"), run("decode_b64_ctx8192"), run("decode_b1_ctx1048512")},
                {run("decode_b8_ctx8192"), run("decode_b8_ctx131072"), run("decode_b8_ctx1048512"),
                 run("decode_b1_ctx131072"), run("decode_b64_ctx131072")},
                load_hardware(kHardwareDir + "h200-sxm.yaml"));
  return c;
}

TEST(CalibrateH200, FitsTheRecordedEfficienciesAndLatencies) {
  const Calibration& c = h200_calibration();
  const struct {
    EfficiencyClass cls;
    double memory;  // < 0: not fitted
    double compute;
  } classes[] = {
      {EfficiencyClass::gemm, 0.8704306, -1},
      {EfficiencyClass::grouped_gemm, 0.5653658, -1},
      {EfficiencyClass::attention, -1, 0.3186701},
      {EfficiencyClass::recurrent, 0.8259715, -1},
      {EfficiencyClass::elementwise, 0.6209896, -1},
      {EfficiencyClass::gather, 0.6184417, -1},
  };
  ASSERT_EQ(c.classes.size(), std::size(classes));
  for (std::size_t i = 0; i < c.classes.size(); ++i) {
    const ClassFit& f = c.classes[i];
    EXPECT_EQ(f.cls, classes[i].cls);
    EXPECT_EQ(f.memory.has_value(), classes[i].memory > 0) << to_string(f.cls);
    EXPECT_EQ(f.compute.has_value(), classes[i].compute > 0) << to_string(f.cls);
    if (f.memory) {
      EXPECT_NEAR(*f.memory, classes[i].memory, 2e-6) << to_string(f.cls);
    }
    if (f.compute) {
      EXPECT_NEAR(*f.compute, classes[i].compute, 2e-6) << to_string(f.cls);
    }
  }
  EXPECT_TRUE(c.undetermined.empty());
  const struct {
    OpKind kind;
    double us;
  } latencies[] = {
      {OpKind::embedding, 2.417844},
      {OpKind::rmsnorm, 4.426237},
      {OpKind::attnres_mix, 5.893518},
      {OpKind::gemm, 4.557244},
      {OpKind::elementwise, 4.032713},
      {OpKind::kda_preprocess, 5.758003},
      {OpKind::kda_recurrent, 1.351197},
      {OpKind::kda_output_norm, 1.379093},
      {OpKind::mla_attention, 16.69675},
      {OpKind::router, 16.87065},
      {OpKind::moe_experts, 8.593855},
  };
  ASSERT_EQ(c.latencies.size(), std::size(latencies));
  for (std::size_t i = 0; i < c.latencies.size(); ++i) {
    EXPECT_EQ(c.latencies[i].kind, latencies[i].kind);
    EXPECT_NEAR(c.latencies[i].latency_us_per_kernel, latencies[i].us, 2e-5) << to_string(latencies[i].kind);
  }
}

TEST(CalibrateH200, HeldOutErrorsPerOpAndPerStep) {
  const Calibration& c = h200_calibration();
  EXPECT_EQ(c.training.ops, 183u);
  EXPECT_NEAR(c.training.before_percent, 43.31, 0.01);
  EXPECT_NEAR(c.training.after_percent, 2.75, 0.01);
  EXPECT_NEAR(c.training.worst_step_after_percent, 4.51, 0.01);
  EXPECT_EQ(c.held_out.ops, 305u);
  EXPECT_NEAR(c.held_out.before_percent, 42.78, 0.01);
  EXPECT_NEAR(c.held_out.after_percent, 3.87, 0.01);
  EXPECT_NEAR(c.held_out.worst_step_before_percent, 38.82, 0.01);
  EXPECT_NEAR(c.held_out.worst_step_after_percent, 3.23, 0.01);
  // Per held-out run: median |error| per op after, and the step error before and after (%).
  const struct {
    const char* run;
    double op_after, step_before, step_after;
  } runs[] = {
      {"pred_decode_b8_ctx8192.json", 4.19, -21.76, -1.24},
      {"pred_decode_b8_ctx131072.json", 4.70, -25.09, -0.75},
      {"pred_decode_b8_ctx1048512.json", 4.44, -38.82, -1.92},
      {"pred_decode_b1_ctx131072.json", 1.95, -16.90, -1.06},
      {"pred_decode_b64_ctx131072.json", 9.48, -34.38, -3.23},
  };
  ASSERT_EQ(c.held_out.runs.size(), std::size(runs));
  for (std::size_t i = 0; i < std::size(runs); ++i) {
    const RunCheck& r = c.held_out.runs[i];
    EXPECT_EQ(r.run.rfind(runs[i].run, 0), 0u) << r.run;
    EXPECT_NE(r.run.find("commit 27cd91c, date 2026-11-30"), std::string::npos) << r.run;
    EXPECT_EQ(r.ops.size(), 61u);
    EXPECT_NEAR(r.op_error_after_percent, runs[i].op_after, 0.01) << r.run;
    EXPECT_NEAR(r.step_error_before_percent(), runs[i].step_before, 0.01) << r.run;
    EXPECT_NEAR(r.step_error_after_percent(), runs[i].step_after, 0.01) << r.run;
  }
}

TEST(CalibrateH200, TheValidatedHardwareFileHoldsThisFit) {
  const Calibration& c = h200_calibration();
  const Hardware base = load_hardware(kHardwareDir + "h200-sxm.yaml");
  const Hardware hw = load_hardware_by_name("h200-validated", kHardwareDir);
  const Hardware expected = calibrated_hardware(base, c);
  for (EfficiencyClass cls : kAllEfficiencyClasses) {
    EXPECT_NEAR(hw.efficiency_of(cls).memory, expected.efficiency_of(cls).memory, 1e-6) << to_string(cls);
    EXPECT_NEAR(hw.efficiency_of(cls).compute, expected.efficiency_of(cls).compute, 1e-6) << to_string(cls);
  }
  ASSERT_EQ(hw.kernel_latency_us.size(), expected.kernel_latency_us.size());
  for (const auto& [kind, us] : expected.kernel_latency_us) {
    EXPECT_NEAR(hw.kernel_latency_of(kind), us, 1e-5) << to_string(kind);
  }
  EXPECT_EQ(hw.graph_kernel_overhead_us, base.graph_kernel_overhead_us);
  EXPECT_EQ(hw.kernel_launch_overhead_us, base.kernel_launch_overhead_us);
  const std::string& citation = hw.sources.at(hw.kernel_latency_source);
  for (const std::string& r : c.training_runs) EXPECT_NE(citation.find(r), std::string::npos) << r;
  for (const std::string& r : c.held_out_runs) EXPECT_NE(citation.find(r), std::string::npos) << r;
}

}  // namespace
}  // namespace k3::profiler
