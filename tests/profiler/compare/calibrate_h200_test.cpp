// The calibration behind scenarios/hardware/h200-validated.yaml, re-run from the committed H200 traces
// (bench/results/2026-12-01-h200-engine-traces-8: K3's first 4 layers at real width at commit f6c4889, decode at
// batch 1/8/64 and context 8K/128K/1M): fitted on batch 1 and 64 at 8K and batch 1 at 1M, checked on the five runs
// at other batch sizes and contexts. The numbers are those the run of `k3perf calibrate` printed
// (docs/profile.md); the committed hardware file must hold the same fit.
#include "core/hardware.h"
#include "core/op_graph.h"
#include "profiler/compare/calibrate.h"

#include <gtest/gtest.h>

#include <string>

namespace k3::profiler {
namespace {

const std::string kDir = std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-12-01-h200-engine-traces-8/";
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
      {EfficiencyClass::gemm, 0.9451789, -1},        {EfficiencyClass::grouped_gemm, 0.8556576, -1},
      {EfficiencyClass::attention, -1, 0.5520531},   {EfficiencyClass::recurrent, 0.8433431, -1},
      {EfficiencyClass::elementwise, 0.6490919, -1}, {EfficiencyClass::gather, 0.7127312, -1},
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
      {OpKind::embedding, 2.467622},     {OpKind::rmsnorm, 4.584059},         {OpKind::attnres_mix, 5.879186},
      {OpKind::gemm, 5.386193},          {OpKind::elementwise, 4.066586},     {OpKind::kda_preprocess, 5.457576},
      {OpKind::kda_recurrent, 1.481211}, {OpKind::kda_output_norm, 1.396173}, {OpKind::mla_attention, 20.25407},
      {OpKind::router, 16.90505},        {OpKind::moe_experts, 5.820912},
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
  EXPECT_NEAR(c.training.before_percent, 30.43, 0.01);
  EXPECT_NEAR(c.training.after_percent, 2.35, 0.01);
  EXPECT_NEAR(c.training.worst_step_after_percent, 3.77, 0.01);
  EXPECT_EQ(c.held_out.ops, 305u);
  EXPECT_NEAR(c.held_out.before_percent, 29.02, 0.01);
  EXPECT_NEAR(c.held_out.after_percent, 3.77, 0.01);
  EXPECT_NEAR(c.held_out.worst_step_before_percent, 12.50, 0.01);
  EXPECT_NEAR(c.held_out.worst_step_after_percent, 5.79, 0.01);
  // Per held-out run: median |error| per op after, and the step error before and after (%).
  const struct {
    const char* run;
    double op_after, step_before, step_after;
  } runs[] = {
      {"pred_decode_b8_ctx8192.json", 4.14, -4.42, -3.21},     {"pred_decode_b8_ctx131072.json", 3.73, -5.42, -2.80},
      {"pred_decode_b8_ctx1048512.json", 3.85, -12.50, -4.26}, {"pred_decode_b1_ctx131072.json", 1.51, -6.69, -0.34},
      {"pred_decode_b64_ctx131072.json", 8.90, -6.24, -5.79},
  };
  ASSERT_EQ(c.held_out.runs.size(), std::size(runs));
  for (std::size_t i = 0; i < std::size(runs); ++i) {
    const RunCheck& r = c.held_out.runs[i];
    EXPECT_EQ(r.run.rfind(runs[i].run, 0), 0u) << r.run;
    EXPECT_NE(r.run.find("commit f6c4889, date 2026-12-01"), std::string::npos) << r.run;
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
