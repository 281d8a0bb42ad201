// The calibration behind scenarios/hardware/h200-validated.yaml, re-run from the committed H200 traces
// (bench/results/2026-12-03-h200-moe-wgmma, `scripts/engine-refit.sh`: K3's first 4 layers at real width, decode at
// batch 1/8/64 and context 8K/128K/1M and prefills of 8K/16K/32K, and one TP16/EP16 rank of all 93 layers at batch 1
// and 8, 128K; engine sources c1f86c126f5ac051), every prediction on h200-sxm by the simulator with the KDA state
// pass's serial term (bench/results/2026-12-04-cpu-refit-serial/predictions). Trained and held out as the script does.
// The numbers are those the run of `k3perf calibrate` printed (that folder's calibrate.txt); the committed hardware
// file must hold the same fit.
#include "core/hardware.h"
#include "core/op_graph.h"
#include "profiler/compare/calibrate.h"
#include "profiler/compare/calibration_report.h"

#include "core/atomic_file.h"

#include <gtest/gtest.h>

#include <string>

namespace k3::profiler {
namespace {

const std::string kDir = std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-12-03-h200-moe-wgmma/";
const std::string kPredictions =
    std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-12-04-cpu-refit-serial/predictions/";
const std::string kHardwareDir = std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/";
const std::string kRank = "k3_tp16_rank15_decode_";

CalibrationRun slice(const std::string& name) {
  return load_calibration_run(kPredictions + "pred_" + name + ".json.gz", kDir + "trace_" + name + ".json.gz");
}
CalibrationRun rank(const std::string& shape) {
  const std::string name = kRank + shape + "_traced";
  return load_calibration_run(kPredictions + "prediction_" + name + ".json.gz", kDir + "trace_" + name + ".json.gz");
}

const Calibration& h200_calibration() {
  static const Calibration c = calibrate(
      {slice("decode_b1_ctx8192"), slice("decode_b64_ctx8192"), slice("decode_b1_ctx1048512"), slice("prefill_8192"),
       slice("prefill_32768"), rank("b1_ctx131072")},
      {slice("decode_b8_ctx8192"), slice("decode_b1_ctx131072"), slice("decode_b8_ctx131072"),
       slice("decode_b64_ctx131072"), slice("decode_b8_ctx1048512"), slice("prefill_16384"), rank("b8_ctx131072")},
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
      {EfficiencyClass::gemm, 0.8927578, 0.8054713},  {EfficiencyClass::grouped_gemm, 0.8625963, 0.4083429},
      {EfficiencyClass::attention, 1.0, 0.5693640},   {EfficiencyClass::recurrent, 0.8449561, -1},
      {EfficiencyClass::elementwise, 0.2889293, -1},  {EfficiencyClass::gather, 0.8832099, -1},
      {EfficiencyClass::chunked_scan, 0.4142666, -1},
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
  EXPECT_EQ(c.engine_sources, "c1f86c126f5ac051");
  const struct {
    OpKind kind;
    double us;
  } latencies[] = {
      {OpKind::embedding, 2.501119},      {OpKind::rmsnorm, 4.460911},     {OpKind::attnres_mix, 5.155895},
      {OpKind::gemm, 4.016022},           {OpKind::elementwise, 4.060219}, {OpKind::kda_preprocess, 4.827538},
      {OpKind::kda_recurrent, 1.549803},  {OpKind::kda_chunk, 0.0},        {OpKind::kda_output_norm, 1.334335},
      {OpKind::mla_attention, 17.773381}, {OpKind::router, 13.844040},     {OpKind::moe_experts, 11.372430},
  };
  ASSERT_EQ(c.latencies.size(), std::size(latencies));
  for (std::size_t i = 0; i < c.latencies.size(); ++i) {
    EXPECT_EQ(c.latencies[i].kind, latencies[i].kind);
    EXPECT_NEAR(c.latencies[i].latency_us_per_kernel, latencies[i].us, 2e-5) << to_string(latencies[i].kind);
  }
}

TEST(CalibrateH200, HeldOutErrorsPerOpAndPerStep) {
  const Calibration& c = h200_calibration();
  EXPECT_EQ(c.training.ops, 1687u);
  EXPECT_NEAR(c.training.before_percent, 9.45, 0.01);
  EXPECT_NEAR(c.training.after_percent, 4.76, 0.01);
  EXPECT_NEAR(c.training.worst_step_after_percent, 31.49, 0.01);
  EXPECT_EQ(c.held_out.ops, 1784u);
  EXPECT_NEAR(c.held_out.before_percent, 11.40, 0.01);
  EXPECT_NEAR(c.held_out.after_percent, 8.43, 0.01);
  EXPECT_NEAR(c.held_out.worst_step_before_percent, 34.19, 0.01);
  EXPECT_NEAR(c.held_out.worst_step_after_percent, 17.54, 0.01);
  // Per held-out run: its ops, median |error| per op after, and the step error before and after (%).
  const struct {
    const char* run;
    std::size_t ops;
    double op_after, step_before, step_after;
  } runs[] = {
      {"pred_decode_b8_ctx8192.json", 61, 4.10, 6.11, -1.41},
      {"pred_decode_b1_ctx131072.json", 61, 2.00, 10.93, 3.21},
      {"pred_decode_b8_ctx131072.json", 61, 3.33, 5.36, -0.80},
      {"pred_decode_b64_ctx131072.json", 61, 12.57, 0.42, -3.31},
      {"pred_decode_b8_ctx1048512.json", 61, 3.53, 0.44, -0.07},
      {"pred_prefill_16384.json", 60, 9.92, -34.19, -17.54},
      {"prediction_k3_tp16_rank15_decode_b8_ctx131072_traced.json.gz", 1419, 9.41, 1.43, -6.39},
  };
  ASSERT_EQ(c.held_out.runs.size(), std::size(runs));
  for (std::size_t i = 0; i < std::size(runs); ++i) {
    const RunCheck& r = c.held_out.runs[i];
    EXPECT_EQ(r.run.rfind(runs[i].run, 0), 0u) << r.run;
    EXPECT_NE(r.run.find("date 2026-12-03"), std::string::npos) << r.run;
    EXPECT_EQ(r.ops.size(), runs[i].ops) << r.run;
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
    EXPECT_NEAR(hw.kernel_latency_of(kind), us, 1e-6 * us + 1e-5) << to_string(kind);  // written to 7 digits
  }
  EXPECT_EQ(hw.graph_kernel_overhead_us, base.graph_kernel_overhead_us);
  EXPECT_EQ(hw.kernel_launch_overhead_us, base.kernel_launch_overhead_us);
  const std::string& citation = hw.sources.at(hw.kernel_latency_source);
  for (const std::string& r : c.training_runs) EXPECT_NE(citation.find(r), std::string::npos) << r;
  for (const std::string& r : c.held_out_runs) EXPECT_NE(citation.find(r), std::string::npos) << r;
}

// docs/fidelity.md's tables are this fit's (scripts/engine-refit.sh report writes them).
TEST(CalibrateH200, TheFidelityReportShowsThisFit) {
  const std::string doc = read_file(std::string(K3PERF_SOURCE_DIR) + "/docs/fidelity.md");
  const std::string begin = "<!-- engine-fit tables: scripts/engine-refit.sh report -->\n";
  const std::size_t from = doc.find(begin), to = doc.find("<!-- engine-fit tables end -->");
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(doc.substr(from + begin.size(), to - from - begin.size()), calibration_markdown(h200_calibration()))
      << "run K3PERF_PREDICTIONS=bench/results/2026-12-04-cpu-refit-serial/predictions scripts/engine-refit.sh report "
         "bench/results/2026-12-03-h200-moe-wgmma";
}

}  // namespace
}  // namespace k3::profiler
