// Counter mode on the host: the RangeCounters file (write, read, malformed input) and
// compare_counters on a hand-made prediction and hand-made counters, with the answers worked out
// by hand in the comments.
#include "profiler/counters/compare_counters.h"
#include "profiler/counters/range_counters.h"

#include "core/atomic_file.h"
#include "expect_input_error.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace k3::profiler {
namespace {

using test::expect_input_error;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("k3perf_counters_test_" + name)).string();
}

CounterRange range(const std::string& name, int occurrence, double read, double write, double bf16 = 0, double fp8 = 0,
                   double time_ns = 1000) {
  return {name,
          occurrence,
          {{kDramBytesRead, read},
           {kDramBytesWrite, write},
           {kTensorOpsBf16, bf16},
           {kTensorOpsFp8, fp8},
           {kGpuTimeNs, time_ns}}};
}

// Three decode steps; L001.kda.recurrent missed step 2 and the collective ran once.
RangeCounters three_steps() {
  RangeCounters c;
  c.metrics = counter_mode_metrics();
  c.lost_ranges = 0;
  c.metadata["gpu"] = "test GPU";
  c.ranges = {
      range("L001.kda.qkv_proj", 0, 9.0e7, 1.0e7, 1.6e9),         // step 0: 1.0e8 bytes
      range("L001.kda.recurrent", 0, 4.0e7, 4.0e7),               //         8.0e7
      range("L001.moe.all_to_all", 0, 1.0e6, 1.0e6),              //         2.0e6
      range("decode.advance", 0, 100, 100),                       //         200
      range("L001.kda.qkv_proj", 1, 1.1e8, 2.0e7, 1.0e9, 0.6e9),  // step 1: 1.3e8 bytes, 1.6e9 ops
      range("L001.kda.recurrent", 1, 4.0e7, 6.0e7),               //         1.0e8
      range("decode.advance", 1, 300, 100),                       //         400
      range("L001.kda.qkv_proj", 2, 1.0e8, 2.0e7, 2.5e9),         // step 2: 1.2e8 bytes
      range("decode.advance", 2, 200, 200),                       //         400
  };
  return c;
}

// read + written bytes per op: qkv_proj 1.0e8 + 2e6 + 2e6 = 1.04e8; recurrent 4e7 + 4e7 = 8e7;
// all_to_all 2e6; lm_head 2.4e8 (not measured).
const char* kPrediction = R"({
  "scenario": {"name": "hand", "hardware": "H200 SXM", "cuda_graphs": false},
  "ops": [
    {"name": "L001.kda.qkv_proj", "kind": "gemm", "compute": "bf16", "flops": 2.0e9,
     "read": {"weights": 1.0e8, "kv": 0, "state": 0, "activations": 2.0e6},
     "written": {"weights": 0, "kv": 0, "state": 0, "activations": 2.0e6},
     "kernels": 1, "bound": "memory", "time_us": 30},
    {"name": "L001.kda.recurrent", "kind": "kda_recurrent", "compute": "fp32", "flops": 1.0e8,
     "read": {"weights": 0, "kv": 0, "state": 4.0e7, "activations": 0},
     "written": {"weights": 0, "kv": 0, "state": 4.0e7, "activations": 0},
     "kernels": 1, "bound": "memory", "time_us": 20},
    {"name": "L001.moe.all_to_all", "kind": "collective", "compute": "bf16", "flops": 0,
     "read": {"weights": 0, "kv": 0, "state": 0, "activations": 1.0e6},
     "written": {"weights": 0, "kv": 0, "state": 0, "activations": 1.0e6},
     "kernels": 1, "bound": "communication", "time_us": 15},
    {"name": "head.lm_head", "kind": "gemm", "compute": "bf16", "flops": 4.0e9,
     "read": {"weights": 2.4e8, "kv": 0, "state": 0, "activations": 0},
     "written": {"weights": 0, "kv": 0, "state": 0, "activations": 0},
     "kernels": 1, "bound": "memory", "time_us": 60}
  ]})";

TEST(RangeCounters, WritesAndReadsBackEveryField) {
  const RangeCounters c = three_steps();
  const std::string path = temp_path("roundtrip.json");
  write_range_counters(c, path);
  const RangeCounters back = read_range_counters(path);
  std::filesystem::remove(path);
  EXPECT_EQ(back.origin, path);
  EXPECT_EQ(back.metrics, c.metrics);
  EXPECT_EQ(back.lost_ranges, 0);
  EXPECT_EQ(back.metadata, c.metadata);
  ASSERT_EQ(back.ranges.size(), c.ranges.size());
  for (std::size_t i = 0; i < c.ranges.size(); ++i) {
    EXPECT_EQ(back.ranges[i].name, c.ranges[i].name) << i;
    EXPECT_EQ(back.ranges[i].occurrence, c.ranges[i].occurrence) << i;
    EXPECT_EQ(back.ranges[i].values, c.ranges[i].values) << i;  // doubles written to round trip exactly
  }
}

TEST(RangeCounters, TheMetricsFitTheNamesOfTheHostApi) {
  EXPECT_EQ(counter_mode_metrics(),
            (std::vector<std::string>{"dram__bytes_read.sum", "dram__bytes_write.sum",
                                      "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum",
                                      "gpu__time_duration.sum"}));
}

TEST(RangeCounters, MalformedFilesNameTheKey) {
  // A valid file with one range, edited one way per case.
  auto file = [](const std::string& metrics, const std::string& ranges, const std::string& lost = "0",
                 const std::string& format = "k3perf-range-counters") {
    return R"({"format": ")" + format + R"(", "version": 1, "metadata": {}, "metrics": )" + metrics +
           R"(, "lost_ranges": )" + lost + R"(, "ranges": )" + ranges + "}";
  };
  const std::string two = R"(["dram__bytes_read.sum", "dram__bytes_write.sum"])";
  const std::string ok_range = R"({"name": "a", "occurrence": 0,
      "values": {"dram__bytes_read.sum": 1, "dram__bytes_write.sum": 2}})";
  EXPECT_NO_THROW(parse_range_counters(file(two, "[" + ok_range + "]"), "c.json"));
  expect_input_error([] { parse_range_counters("{not json", "c.json"); }, {"c.json", "malformed JSON"});
  expect_input_error([&] { parse_range_counters(file(two, "[]", "0", "chrome-trace"), "c.json"); },
                     {"c.json", "key 'format'", "k3perf run --counters", "chrome-trace"});
  expect_input_error([&] { parse_range_counters(file("[]", "[]"), "c.json"); },
                     {"c.json", "key 'metrics'", "non-empty array"});
  expect_input_error(
      [&] { parse_range_counters(file(R"(["dram__bytes_read.sum", "dram__bytes_read.sum"])", "[]"), "c.json"); },
      {"key 'metrics[1]'", "appears twice"});
  expect_input_error([&] { parse_range_counters(file(two, "[]", "-1"), "c.json"); },
                     {"key 'lost_ranges'", "expected an integer >= 0, got -1"});
  expect_input_error([&] { parse_range_counters(file(two, "{}"), "c.json"); }, {"key 'ranges'", "array of ranges"});
  expect_input_error(
      [&] { parse_range_counters(file(two, R"([{"name": "", "occurrence": 0, "values": {}}])"), "c.json"); },
      {"key 'ranges[0].name'", "expected a range name"});
  // The second range of name 'a' must be occurrence 1.
  expect_input_error([&] { parse_range_counters(file(two, "[" + ok_range + "," + ok_range + "]"), "c.json"); },
                     {"key 'ranges[1].occurrence'", "expected 1", "got 0"});
  expect_input_error(
      [&] {
        parse_range_counters(file(two, R"([{"name": "a", "occurrence": 0, "values": {"dram__bytes_read.sum": -5,
                 "dram__bytes_write.sum": 2}}])"),
                             "c.json");
      },
      {"key 'ranges[0].values.dram__bytes_read.sum'", "expected a count >= 0, got -5"});
  expect_input_error(
      [&] {
        parse_range_counters(file(two, R"([{"name": "a", "occurrence": 0, "values": {"dram__bytes_read.sum": 1}}])"),
                             "c.json");
      },
      {"c.json", "missing required key 'ranges[0].values.dram__bytes_write.sum'"});
  expect_input_error(
      [&] {
        parse_range_counters(file(two, R"([{"name": "a", "occurrence": 0, "values": {"dram__bytes_read.sum": 1,
                 "dram__bytes_write.sum": 2, "lts__t_bytes.sum": 3}}])"),
                             "c.json");
      },
      {"key 'ranges[0].values'", "metric 'lts__t_bytes.sum' is not in 'metrics'"});
  expect_input_error([] { read_range_counters(temp_path("no_such_file.json")); }, {"no_such_file.json"});
}

TEST(CompareCounters, HandMadeStepsByHand) {
  const PredictionFile p = parse_prediction(kPrediction, "pred.json");
  RangeCounters counters = three_steps();
  counters.origin = "c.json";
  const CounterComparison c = compare_counters(p, counters);
  ASSERT_EQ(c.ops.size(), 3u);

  // qkv_proj: bytes per step 1.0e8, 1.3e8, 1.2e8 -> median 1.2e8; reads 9e7, 1.1e8, 1e8 -> 1e8;
  // writes 1e7, 2e7, 2e7 -> 2e7; error (1.04e8 - 1.2e8) / 1.2e8 = -13.33 %.
  // Tensor ops 1.6e9, 1.0e9 + 0.6e9, 2.5e9 -> median 1.6e9 FLOPs; error (2e9 - 1.6e9) / 1.6e9 = +25 %.
  const OpCounterComparison& qkv = c.ops[0];
  EXPECT_EQ(qkv.predicted->name, "L001.kda.qkv_proj");
  EXPECT_EQ(qkv.measured_bytes_by_occurrence, (std::vector<double>{1.0e8, 1.3e8, 1.2e8}));
  EXPECT_DOUBLE_EQ(qkv.measured_bytes, 1.2e8);
  EXPECT_DOUBLE_EQ(qkv.measured_read_bytes, 1.0e8);
  EXPECT_DOUBLE_EQ(qkv.measured_write_bytes, 2.0e7);
  ASSERT_TRUE(qkv.bytes_error_percent.has_value());
  EXPECT_NEAR(*qkv.bytes_error_percent, -40.0 / 3.0, 1e-12);
  ASSERT_TRUE(qkv.measured_tensor_flops.has_value());
  EXPECT_DOUBLE_EQ(*qkv.measured_tensor_flops, 1.6e9);
  ASSERT_TRUE(qkv.flops_error_percent.has_value());
  EXPECT_NEAR(*qkv.flops_error_percent, 25.0, 1e-12);

  // recurrent: two occurrences, 8e7 and 1e8 -> 9e7 (mean of the middle two); error -11.11 %.
  // No tensor work measured: no FLOP error.
  const OpCounterComparison& kda = c.ops[1];
  EXPECT_EQ(kda.predicted->name, "L001.kda.recurrent");
  EXPECT_DOUBLE_EQ(kda.measured_bytes, 9.0e7);
  EXPECT_DOUBLE_EQ(kda.measured_write_bytes, 5.0e7);
  EXPECT_NEAR(*kda.bytes_error_percent, -100.0 / 9.0, 1e-12);
  EXPECT_DOUBLE_EQ(*kda.measured_tensor_flops, 0);
  EXPECT_FALSE(kda.flops_error_percent.has_value());

  // The collective: measured, but no error.
  EXPECT_EQ(c.ops[2].predicted->name, "L001.moe.all_to_all");
  EXPECT_DOUBLE_EQ(c.ops[2].measured_bytes, 2.0e6);
  EXPECT_FALSE(c.ops[2].bytes_error_percent.has_value());

  EXPECT_EQ(c.not_measured, (std::vector<std::string>{"head.lm_head"}));
  ASSERT_EQ(c.not_predicted.size(), 1u);
  EXPECT_EQ(c.not_predicted[0].name, "decode.advance");
  EXPECT_EQ(c.not_predicted[0].occurrences, 3u);
  EXPECT_DOUBLE_EQ(c.not_predicted[0].measured_bytes, 400);  // 200, 400, 400

  // Sums over the measured ops: predicted 1.04e8 + 8e7 + 2e6, measured 1.2e8 + 9e7 + 2e6.
  EXPECT_DOUBLE_EQ(c.predicted_bytes, 1.86e8);
  EXPECT_DOUBLE_EQ(c.measured_bytes, 2.12e8);
  // median |error| of 13.33 % and 11.11 % = 12.22 %; FLOPs: only qkv_proj, 25 %.
  EXPECT_NEAR(*c.median_abs_bytes_error_percent, (40.0 / 3.0 + 100.0 / 9.0) / 2, 1e-12);
  EXPECT_NEAR(*c.median_abs_flops_error_percent, 25.0, 1e-12);

  ASSERT_EQ(c.by_kind.size(), 3u);  // gemm, kda_recurrent, collective (prediction order)
  EXPECT_EQ(c.by_kind[0].group, "gemm");
  EXPECT_EQ(c.by_kind[0].ops, 1u);  // lm_head was not measured
  EXPECT_DOUBLE_EQ(c.by_kind[0].predicted_bytes, 1.04e8);
  EXPECT_DOUBLE_EQ(c.by_kind[0].measured_bytes, 1.2e8);
  EXPECT_NEAR(*c.by_kind[0].median_abs_bytes_error_percent, 40.0 / 3.0, 1e-12);
  EXPECT_EQ(c.by_kind[0].ops_with_tensor_flops, 1u);
  EXPECT_NEAR(*c.by_kind[0].median_abs_flops_error_percent, 25.0, 1e-12);
  EXPECT_EQ(c.by_kind[1].group, "kda_recurrent");
  EXPECT_EQ(c.by_kind[1].ops_with_tensor_flops, 0u);
  EXPECT_FALSE(c.by_kind[1].median_abs_flops_error_percent.has_value());
  EXPECT_EQ(c.by_kind[2].group, "collective");
  EXPECT_FALSE(c.by_kind[2].median_abs_bytes_error_percent.has_value());

  const std::string text = to_text(c);
  EXPECT_NE(text.find("DRAM bytes: 3 ops measured of 4 predicted; 1 predicted ops not measured, 1 measured ops not "
                      "predicted; 0 ranges lost"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("predicted 186.000 MB, measured 212.000 MB; median |error| 12.2% (bytes), 25.0% (tensor FLOPs)"),
            std::string::npos)
      << text;
  const nlohmann::ordered_json j = to_json(c);
  EXPECT_EQ(j["ops"][0]["name"], "L001.kda.qkv_proj");
  EXPECT_DOUBLE_EQ(j["ops"][0]["measured_bytes"].get<double>(), 1.2e8);
  EXPECT_TRUE(j["ops"][1]["flops_error_percent"].is_null());
  EXPECT_EQ(j["not_predicted"][0]["name"], "decode.advance");
}

TEST(CompareCounters, WithoutTensorMetricsThereIsNoFlopComparison) {
  const PredictionFile p = parse_prediction(kPrediction, "pred.json");
  RangeCounters counters;
  counters.metrics = {kDramBytesRead, kDramBytesWrite};
  counters.ranges = {{"head.lm_head", 0, {{kDramBytesRead, 2.0e8}, {kDramBytesWrite, 0}}}};
  const CounterComparison c = compare_counters(p, counters);
  ASSERT_EQ(c.ops.size(), 1u);
  EXPECT_NEAR(*c.ops[0].bytes_error_percent, 20.0, 1e-12);  // (2.4e8 - 2e8) / 2e8
  EXPECT_FALSE(c.ops[0].measured_tensor_flops.has_value());
  EXPECT_FALSE(c.median_abs_flops_error_percent.has_value());
}

TEST(CompareCounters, CountersWithoutDramBytesAreRefused) {
  const PredictionFile p = parse_prediction(kPrediction, "pred.json");
  RangeCounters counters;
  counters.origin = "c.json";
  counters.metrics = {kDramBytesRead, kTensorOpsBf16};
  expect_input_error([&] { compare_counters(p, counters); },
                     {"c.json", "key 'metrics'", "has no 'dram__bytes_write.sum'"});
}

}  // namespace
}  // namespace k3::profiler
