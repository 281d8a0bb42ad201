// compare and calibrate on the committed fixtures (profiler/fixtures/make_fixtures.py: synthetic,
// not GPU measurements), with the answers worked out by hand from the numbers in that script.
#include "profiler/compare/compare.h"
#include "profiler/compare/calibrate.h"
#include "profiler/trace/chrome_json.h"
#include "profiler/trace/gzip.h"

#include "core/atomic_file.h"
#include "core/hardware.h"
#include "expect_input_error.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace k3::profiler {
namespace {

const std::string kFixtures = std::string(K3PERF_SOURCE_DIR) + "/profiler/fixtures/";
Hardware h200() { return load_hardware(std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/h200-sxm.yaml"); }

TEST(Compare, MedianTakesTheMiddleTwoForEvenCounts) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

TEST(Compare, DecodeFixtureByHand) {
  const PredictionFile p = load_prediction(kFixtures + "decode_prediction.json");
  const Trace t = read_trace(kFixtures + "decode_trace.json.gz");
  const Comparison c = compare(p, t, h200());
  ASSERT_EQ(c.ops.size(), 3u);
  // L001.kda.recurrent: per step the union of two kernels on streams 7 and 8:
  //   [0,70]+[70,120] = 120, [0,60]+[50,125] = 125 (overlap counted once), [0,100]+[100,140] = 140.
  const OpComparison& kda = c.ops[0];
  EXPECT_EQ(kda.predicted->name, "L001.kda.recurrent");
  EXPECT_EQ(kda.measured_us_by_instance, (std::vector<double>{120, 125, 140}));
  EXPECT_DOUBLE_EQ(kda.measured_us, 125);
  EXPECT_DOUBLE_EQ(kda.error_percent, 4.0);                    // (130 - 125) / 125
  EXPECT_DOUBLE_EQ(kda.achieved_bytes_per_s, 4.8e8 / 125e-6);  // 3.84 TB/s
  EXPECT_NEAR(kda.roofline_us, 100, 1e-9);                     // 4.8e8 B / 4.8e12 B/s
  EXPECT_NEAR(*kda.roofline_percent, 80, 1e-9);
  EXPECT_EQ(kda.kernels, 6u);
  // The collective: 40 us each step, predicted 50: +25 %; no roofline.
  EXPECT_EQ(c.ops[1].predicted->name, "L001.moe.all_to_all");
  EXPECT_DOUBLE_EQ(c.ops[1].error_percent, 25.0);
  EXPECT_FALSE(c.ops[1].roofline_percent.has_value());
  // head.lm_head: 200, 240, 260 -> 240; (250 - 240) / 240; roofline max(10 us compute, 200 us memory).
  const OpComparison& lm = c.ops[2];
  EXPECT_DOUBLE_EQ(lm.measured_us, 240);
  EXPECT_NEAR(lm.error_percent, 100.0 / 24.0, 1e-12);
  EXPECT_NEAR(lm.roofline_us, 200, 1e-9);
  EXPECT_NEAR(*lm.roofline_percent, 100.0 * 200 / 240, 1e-9);
  EXPECT_NEAR(lm.achieved_flops_per_s, 9.894e9 / 240e-6, 1);
  // Predicted but not measured; measured but not predicted; not attributed.
  EXPECT_EQ(c.not_measured, (std::vector<std::string>{"L001.attnres.pre_mlp"}));
  ASSERT_EQ(c.not_predicted.size(), 1u);
  EXPECT_EQ(c.not_predicted[0].name, "decode.advance");
  EXPECT_EQ(c.not_predicted[0].instances, 3u);
  EXPECT_DOUBLE_EQ(c.not_predicted[0].measured_us, 5);
  ASSERT_EQ(c.unattributed.size(), 1u);
  EXPECT_EQ(c.unattributed[0].name, "memset_kernel");
  EXPECT_EQ(c.unattributed[0].count, 2u);
  EXPECT_DOUBLE_EQ(c.unattributed[0].total_us, 20);
  // Coverage: kernel time 395 (kda) + 120 (all-to-all) + 700 (lm_head) on predicted ops of
  // 395 + 120 + 700 + 15 (decode.advance) + 20 (memsets) = 1250 us.
  EXPECT_EQ(c.kernels, 17u);
  EXPECT_EQ(c.kernels_on_predicted_ops, 12u);
  EXPECT_DOUBLE_EQ(c.kernel_time_us, 1250);
  EXPECT_NEAR(c.coverage_percent(), 100.0 * 1215 / 1250, 1e-12);
  // Per kind (prediction order of first appearance) and per step.
  ASSERT_EQ(c.by_kind.size(), 3u);
  EXPECT_EQ(c.by_kind[0].group, "kda_recurrent");
  EXPECT_EQ(c.by_kind[1].group, "collective");
  EXPECT_EQ(c.by_kind[2].group, "gemm");
  EXPECT_NEAR(c.median_abs_error_percent, 100.0 / 24.0, 1e-12);  // of {4, 4.1667, 25}
  ASSERT_EQ(c.by_step.size(), 3u);
  // Step 0: kda (130-120)/120 = 8.33 %, a2a 25 %, lm_head (250-200)/200 = 25 % -> 25; measured 360.
  EXPECT_DOUBLE_EQ(c.by_step[0].median_abs_error_percent, 25);
  EXPECT_DOUBLE_EQ(c.by_step[0].measured_us, 360);
  EXPECT_DOUBLE_EQ(c.by_step[0].predicted_us, 430);
  // Step 1: 4, 25, 4.1667 -> 4.1667; step 2: |130-140|/140 = 7.14, 25, |250-260|/260 = 3.85 -> 7.14.
  EXPECT_NEAR(c.by_step[1].median_abs_error_percent, 100.0 / 24.0, 1e-12);
  EXPECT_NEAR(c.by_step[2].median_abs_error_percent, 100.0 / 14.0, 1e-12);
  EXPECT_DOUBLE_EQ(c.by_step[2].measured_us, 440);
  // The outputs carry the same numbers.
  const auto j = to_json(c);
  EXPECT_EQ(j["ops"][0]["measured_us_by_step"], (std::vector<double>{120, 125, 140}));
  EXPECT_TRUE(j["ops"][1]["roofline_percent"].is_null());
  EXPECT_EQ(j["trace_metadata"]["commit"], "fixture");
  const std::string csv = to_csv(c);
  EXPECT_NE(
      csv.find("L001.kda.recurrent,kda_recurrent,memory,130,125,4,3,6,6.69e+08,4.8e+08,3.84e+12,5.352e+12,100,80\n"),
      std::string::npos)
      << csv;
  EXPECT_NE(to_text(c, 5).find("coverage 97.2% of kernel time (12 of 17 kernels on predicted ops)"), std::string::npos);
}

// A gzipped prediction (how a 93-layer rank's is kept) loads as the JSON it holds.
TEST(Compare, GzippedPredictionLoadsAsItsJson) {
  const std::string json = read_file(kFixtures + "decode_prediction.json");
  const std::filesystem::path gz = std::filesystem::temp_directory_path() / "k3perf_compare_prediction.json.gz";
  write_file_atomically(gz.string(), gzip_compress(json));
  const PredictionFile a = load_prediction(kFixtures + "decode_prediction.json"), b = load_prediction(gz.string());
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].name, b.ops[i].name);
    EXPECT_EQ(a.ops[i].time_us, b.ops[i].time_us);
  }
  write_file_atomically(gz.string(), gzip_compress(json).substr(0, 40));  // truncated: the error names the file
  test::expect_input_error([&] { load_prediction(gz.string()); }, {gz.string()});
  std::filesystem::remove(gz);
}

TEST(Compare, PredictionFileErrorsNameTheKey) {
  using test::expect_input_error;
  expect_input_error([] { parse_prediction("{\"scenario\":{\"hardware\":\"x\",\"cuda_graphs\":true}}", "p.json"); },
                     {"p.json", "'ops'"});
  const std::string head = R"({"scenario":{"hardware":"x","cuda_graphs":true},"ops":[)";
  const std::string zero = R"({"weights":0,"kv":0,"state":0,"activations":0})";
  const std::string good = R"({"name":"a","kind":"gemm","compute":"bf16","flops":1,"read":)" + zero + R"(,"written":)" +
                           zero + R"(,"kernels":1,"bound":"memory","time_us":1})";
  EXPECT_EQ(parse_prediction(head + good + "]}", "ok.json").ops.size(), 1u);
  expect_input_error([&] { parse_prediction(head + good + "," + good + "]}", "q.json"); },
                     {"q.json", "ops[1].name", "twice"});
  std::string bad_kind = good;
  bad_kind.replace(bad_kind.find("\"gemm\""), 6, "\"gemmm\"");
  expect_input_error([&] { parse_prediction(head + bad_kind + "]}", "r.json"); }, {"r.json", "ops[0].kind", "gemmm"});
  std::string bad_time = good;
  bad_time.replace(bad_time.find("\"time_us\":1"), 11, "\"time_us\":-1");
  expect_input_error([&] { parse_prediction(head + bad_time + "]}", "s.json"); }, {"s.json", "ops[0].time_us"});
}

// The fixture's measured times are built from gemm η (compute 0.70, memory 0.80), attention
// (0.60, 0.88), elementwise memory 0.75 and 0.6 us per graph-replayed kernel; the median over
// steps is that time rounded to whole ns. The model keeps the base file's 0.5 us replay overhead, so
// the fit recovers the efficiencies and a latency of 0.1 us per kernel for each kind, to rounding. The fixture's times
// take the plain max of the compute and memory times, so the base here has no ridge term (exponent 0).
TEST(Calibrate, RecoversTheFixturesEfficienciesAndChecksHeldOutRuns) {
  Hardware base = h200();
  base.ridge_smooth_max_exponent = 0;
  const std::vector<CalibrationRun> training = {
      load_calibration_run(kFixtures + "calib_micro_prediction.json", kFixtures + "calib_micro_trace.json.gz"),
      load_calibration_run(kFixtures + "calib_engine_prediction.json", kFixtures + "calib_engine_trace.json.gz")};
  const std::vector<CalibrationRun> held_out = {
      load_calibration_run(kFixtures + "calib_heldout_prediction.json", kFixtures + "calib_heldout_trace.json.gz")};
  const Calibration c = calibrate(training, held_out, base);
  ASSERT_EQ(c.classes.size(), 3u);
  EXPECT_EQ(c.classes[0].cls, EfficiencyClass::gemm);
  EXPECT_NEAR(*c.classes[0].compute, 0.70, 1e-4);
  EXPECT_NEAR(*c.classes[0].memory, 0.80, 1e-4);
  EXPECT_EQ(c.classes[1].cls, EfficiencyClass::attention);
  EXPECT_NEAR(*c.classes[1].compute, 0.60, 1e-4);
  EXPECT_NEAR(*c.classes[1].memory, 0.88, 1e-4);
  EXPECT_EQ(c.classes[2].cls, EfficiencyClass::elementwise);
  EXPECT_FALSE(c.classes[2].compute.has_value());
  EXPECT_NEAR(*c.classes[2].memory, 0.75, 1e-4);
  EXPECT_TRUE(c.undetermined.empty());
  ASSERT_EQ(c.latencies.size(), 3u);  // OpKind order
  EXPECT_EQ(c.latencies[0].kind, OpKind::rmsnorm);
  EXPECT_EQ(c.latencies[1].kind, OpKind::gemm);
  EXPECT_EQ(c.latencies[2].kind, OpKind::mla_attention);
  for (const LatencyFit& l : c.latencies) EXPECT_NEAR(l.latency_us_per_kernel, 0.1, 1e-3) << to_string(l.kind);
  EXPECT_EQ(c.training.ops, 20u);
  EXPECT_EQ(c.held_out.ops, 6u);
  EXPECT_GT(c.held_out.before_percent, 1.0);  // the base efficiencies are off by several %
  EXPECT_LT(c.held_out.after_percent, 0.05);
  ASSERT_EQ(c.held_out.runs.size(), 1u);
  EXPECT_GT(c.held_out.worst_step_before_percent, 1.0);
  EXPECT_LT(c.held_out.worst_step_after_percent, 0.05);
  ASSERT_EQ(c.training_runs.size(), 2u);
  EXPECT_EQ(c.training_runs[0],
            "calib_micro_prediction.json + calib_micro_trace.json.gz (commit fixture-calib_micro, date fixture)");

  // The written hardware file loads, cites the runs, and times ops with the fitted numbers.
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_calibrate_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "h200-validated.yaml").string();
  write_file_atomically(path, calibrated_hardware_yaml(base, c, "H200 SXM (validated)", "k3perf-calibration"));
  const Hardware hw = load_hardware(path);
  EXPECT_EQ(hw.name, "H200 SXM (validated)");
  EXPECT_NEAR(hw.efficiency_of(EfficiencyClass::gemm).memory, 0.80, 1e-4);
  EXPECT_NEAR(hw.efficiency_of(EfficiencyClass::attention).compute, 0.60, 1e-4);
  EXPECT_DOUBLE_EQ(hw.efficiency_of(EfficiencyClass::elementwise).compute,
                   base.efficiency_of(EfficiencyClass::elementwise).compute);
  EXPECT_EQ(hw.efficiency_of(EfficiencyClass::recurrent).memory, default_efficiency(EfficiencyClass::recurrent).memory);
  EXPECT_NEAR(hw.kernel_latency_of(OpKind::gemm), 0.1, 1e-3);
  EXPECT_NEAR(hw.kernel_latency_of(OpKind::rmsnorm), 0.1, 1e-3);
  // Kinds the runs do not measure keep the base file's floor, and the base file's ridge block is kept as written.
  ASSERT_GT(base.kernel_latency_of(OpKind::router), 0.0);
  EXPECT_DOUBLE_EQ(hw.kernel_latency_of(OpKind::router), base.kernel_latency_of(OpKind::router));
  const double base_file_ridge = h200().ridge_smooth_max_exponent;  // as written in the base file
  ASSERT_GT(base_file_ridge, 0.0);
  EXPECT_DOUBLE_EQ(hw.ridge_smooth_max_exponent, base_file_ridge);
  EXPECT_EQ(hw.sources.at("k3perf-h200-ridge"), base.sources.at("k3perf-h200-ridge"));
  EXPECT_EQ(hw.kernel_latency_source, "k3perf-calibration");
  EXPECT_DOUBLE_EQ(hw.graph_kernel_overhead_us, base.graph_kernel_overhead_us);
  EXPECT_DOUBLE_EQ(hw.kernel_launch_overhead_us, base.kernel_launch_overhead_us);
  const std::string citation = hw.sources.at("k3perf-calibration");
  EXPECT_NE(citation.find("commit fixture-calib_engine"), std::string::npos);
  EXPECT_NE(citation.find("Kernel latencies carried over from h200-sxm.yaml: embedding,"), std::string::npos);
  // The fixture traces name no engine, so the file records none; traces that do (every `k3perf run --trace` writes
  // its engine_sources) give the file its calibrated_on.
  EXPECT_TRUE(hw.calibrated_engine_sources.empty());
  Calibration named = c;
  named.engine_sources = "0123456789abcdef";
  named.commit = "abc1234";
  write_file_atomically(path, calibrated_hardware_yaml(base, named, "H200 SXM (validated)", "k3perf-calibration"));
  const Hardware on = load_hardware(path);
  EXPECT_EQ(on.calibrated_engine_sources, "0123456789abcdef");
  EXPECT_EQ(on.calibrated_commit, "abc1234");
  EXPECT_NE(citation.find("Held out: calib_heldout_prediction.json"), std::string::npos);
  EXPECT_EQ(citation.find(K3PERF_SOURCE_DIR), std::string::npos);  // no machine paths
  std::filesystem::remove_all(dir);
}

// The per-kernel overhead is the base file's for each run's launch mode, not fitted: the same held-out
// run declared eager is predicted slower by kernels · (eager − graph overhead) per op, after as before.
TEST(Calibrate, EachRunIsTimedWithItsOwnLaunchOverhead) {
  const Hardware base = h200();
  const CalibrationRun graph =
      load_calibration_run(kFixtures + "calib_heldout_prediction.json", kFixtures + "calib_heldout_trace.json.gz");
  CalibrationRun eager = graph;
  eager.prediction.cuda_graphs = false;
  const Calibration c = calibrate(
      {load_calibration_run(kFixtures + "calib_micro_prediction.json", kFixtures + "calib_micro_trace.json.gz"),
       load_calibration_run(kFixtures + "calib_engine_prediction.json", kFixtures + "calib_engine_trace.json.gz")},
      {graph, eager}, base);
  ASSERT_EQ(c.held_out.runs.size(), 2u);
  const RunCheck& g = c.held_out.runs[0];
  const RunCheck& e = c.held_out.runs[1];
  ASSERT_EQ(g.ops.size(), e.ops.size());
  const double step = base.kernel_launch_overhead_us - base.graph_kernel_overhead_us;
  double kernels = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const int k = graph.prediction.ops[i].kernels;
    ASSERT_EQ(graph.prediction.ops[i].name, g.ops[i].name);
    EXPECT_NEAR(e.ops[i].after_us - g.ops[i].after_us, k * step, 1e-9) << g.ops[i].name;
    kernels += k;
  }
  EXPECT_NEAR(e.predicted_step_after_us - g.predicted_step_after_us, kernels * step, 1e-9);
  EXPECT_DOUBLE_EQ(e.measured_step_us, g.measured_step_us);
}

// An op's serial chain adds steps · the base file's step time (kept, not fitted) to its time after the fit, and
// changes nothing else.
TEST(Calibrate, AnOpBoundByItsChainIsTimedByItsSteps) {
  const CalibrationRun plain =
      load_calibration_run(kFixtures + "calib_heldout_prediction.json", kFixtures + "calib_heldout_trace.json.gz");
  const std::vector<CalibrationRun> training = {
      load_calibration_run(kFixtures + "calib_micro_prediction.json", kFixtures + "calib_micro_trace.json.gz"),
      load_calibration_run(kFixtures + "calib_engine_prediction.json", kFixtures + "calib_engine_trace.json.gz")};
  CalibrationRun chained = plain;
  PredictedOp& first = chained.prediction.ops.front();
  first.serial_steps = 1000;
  Hardware base = h200();
  base.serial_step_us[first.kind] = 5.0;
  const Calibration with = calibrate(training, {chained}, base);
  const Calibration without = calibrate(training, {plain}, base);
  const RunCheck& w = with.held_out.runs.front();
  const RunCheck& o = without.held_out.runs.front();
  ASSERT_EQ(w.ops.front().name, first.name);
  EXPECT_NEAR(w.ops.front().after_us - o.ops.front().after_us, 1000 * 5.0, 1e-6);
  for (std::size_t i = 1; i < w.ops.size(); ++i)
    EXPECT_DOUBLE_EQ(w.ops[i].after_us, o.ops[i].after_us) << w.ops[i].name;
}

TEST(Calibrate, RefusesRunsWithoutOps) {
  const Hardware base = h200();
  CalibrationRun a =
      load_calibration_run(kFixtures + "calib_micro_prediction.json", kFixtures + "calib_micro_trace.json.gz");
  test::expect_input_error([&] { calibrate({}, {}, base); }, {"no training runs"});
  CalibrationRun c = a;
  c.trace = Trace();
  test::expect_input_error([&] { calibrate({c}, {}, base); }, {"no measured op"});
  test::expect_input_error([&] { calibrate({a}, {c}, base); }, {"calib_micro_prediction.json", "no measured op"});
}

}  // namespace
}  // namespace k3::profiler
