// The predicted step as a trace: one event per op in graph order with its predicted time, side ops beside their
// partner, collectives on their own stream, the step's range; nothing Perfetto would drop in either format; and
// compare reads it back as a measurement that matches the prediction op for op.
#include "profiler/trace/prediction_trace.h"

#include "profiler/compare/compare.h"
#include "profiler/compare/prediction_file.h"
#include "profiler/trace/chrome_json.h"
#include "sim/test_data.h"

#include "perfetto_drop_rule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace k3::profiler {
namespace {

// K3 on 16 H200s: the MLA output gate runs beside attention, expert parallelism adds all-to-alls.
Prediction h200x16() {
  return predict(load_scenario(test::scenario_path("k3-h200x16-decode-128k.yaml"), test::data(),
                               {"workload.batch=2", "overrides.layers=8"}));
}

TEST(PredictionTrace, OpsInGraphOrderWithTheirTimesSideOpsAndCollectivesApart) {
  const Prediction p = h200x16();
  const Trace t = prediction_trace(p);
  const std::vector<Op>& ops = p.graph.ops;
  // Index the events by op name (names are unique in one step).
  std::map<std::string, std::size_t> event_of;
  std::size_t kernels = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] != EventKind::kernel) continue;
    ++kernels;
    EXPECT_TRUE(event_of.emplace(t.name_of(i), i).second) << t.name_of(i);
    EXPECT_EQ(t.op_of(i), t.name_of(i));
    EXPECT_EQ(t.op_instance[i], 0);
  }
  ASSERT_EQ(kernels, ops.size());
  int side = 0, collectives = 0;
  double clock_us = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::size_t e = event_of.at(ops[i].name());
    const OpTime& time = p.step.ops[i];
    EXPECT_NEAR(double(t.end_ns[e] - t.start_ns[e]), time.time_us * 1000, 1.0) << ops[i].name();
    if (ops[i].concurrent_with >= 0) {
      ++side;
      EXPECT_EQ(t.stream[e], kPredictedSideStream);
      EXPECT_EQ(t.start_ns[e], t.start_ns[event_of.at(ops[ops[i].concurrent_with].name())]);
    } else {
      EXPECT_NEAR(double(t.start_ns[e]), clock_us * 1000, 1.0) << ops[i].name();
      EXPECT_EQ(t.stream[e], ops[i].collective ? kPredictedCommStream : kPredictedComputeStream) << ops[i].name();
      collectives += ops[i].collective.has_value();
    }
    clock_us += time.exposed_us;
  }
  EXPECT_GT(side, 0);
  EXPECT_GT(collectives, 0);
  // The step: its range is the predicted step time, the sum of exposed times.
  std::size_t steps = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] != EventKind::range) continue;
    ++steps;
    EXPECT_EQ(t.name_of(i), "step 0");
    EXPECT_EQ(t.thread[i], kStepTrackThread);
    EXPECT_NEAR(double(t.end_ns[i] - t.start_ns[i]), p.step.step_us * 1000, 1.0);
  }
  EXPECT_EQ(steps, 1u);
  EXPECT_NEAR(clock_us, p.step.step_us, 1e-6 * p.step.step_us);
}

TEST(PredictionTrace, OpensWholeAndComparesAsTheMeasurementOfItsPrediction) {
  const Prediction p = h200x16();
  const Trace t = prediction_trace(p);
  for (TraceFormat f : {TraceFormat::k3perf, TraceFormat::kineto}) {
    const std::string json = to_chrome_json(t, f);
    const std::vector<std::string> dropped = test::perfetto_would_drop(json);
    EXPECT_TRUE(dropped.empty()) << to_string(f) << ": " << dropped.size() << " dropped";
  }
  // The op spans on GPU 0 carry the op names, as the measured trace's do.
  const nlohmann::json doc = nlohmann::json::parse(to_chrome_json(t));
  std::set<std::string> span_names;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "gpu_user_annotation") span_names.insert(e.at("name"));
  }
  EXPECT_EQ(span_names.size(), p.graph.ops.size());
  std::map<long long, std::string> tracks;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("pid") == 0)
      tracks[e.at("tid")] = e.at("args").at("name");
  }
  EXPECT_EQ(tracks, (std::map<long long, std::string>{{kPredictedComputeStream, "stream 1: ops"},
                                                      {kPredictedSideStream, "stream 2: beside another op"},
                                                      {kPredictedCommStream, "stream 3: collectives"}}));
  EXPECT_TRUE(span_names.count("L004.mla.attn_decode"));
  // compare: the trace read back against the prediction's JSON; every op measured at its predicted time.
  const PredictionFile file = parse_prediction(to_json(p).dump(), "prediction.json");
  const Comparison c = compare(file, parse_chrome_json(to_chrome_json(t), "predicted.json"), p.scenario.hardware);
  EXPECT_EQ(c.ops.size(), p.graph.ops.size());
  EXPECT_TRUE(c.not_measured.empty());
  EXPECT_TRUE(c.not_predicted.empty());
  EXPECT_NEAR(c.coverage_percent(), 100.0, 1e-9);
  for (const OpComparison& op : c.ops) {
    EXPECT_NEAR(op.measured_us, op.predicted->time_us, 0.0011) << op.predicted->name;
  }
  EXPECT_LT(c.median_abs_error_percent, 0.05);
}

}  // namespace
}  // namespace k3::profiler
