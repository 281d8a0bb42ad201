#include "profiler/trace/prediction_trace.h"

#include "core/error.h"

#include <fmt/format.h>

#include <cmath>

namespace k3::profiler {

Trace prediction_trace(const Prediction& p) {
  const std::vector<Op>& ops = p.graph.ops;
  K3_CHECK(p.step.ops.size() == ops.size(), "{} op times for {} ops", p.step.ops.size(), ops.size());
  const auto ns = [](double us) { return static_cast<std::int64_t>(std::llround(us * 1000.0)); };
  Trace t;
  t.reserve(ops.size() + 1);
  std::vector<double> start_us(ops.size(), 0);
  double clock_us = 0;  // the step so far: the sum of exposed times
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const OpTime& time = p.step.ops[i];
    const int partner = op.concurrent_with;
    K3_CHECK(partner < static_cast<int>(i), "op {} runs beside op {}, which comes after it", op.name(), partner);
    std::int32_t stream = op.collective ? kPredictedCommStream : kPredictedComputeStream;
    start_us[i] = clock_us;
    if (partner >= 0) {
      stream = kPredictedSideStream;
      start_us[i] = start_us[partner];
    }
    clock_us += time.exposed_us;
    const std::string name = op.name();
    t.add(Event{EventKind::kernel, name, ns(start_us[i]), ns(start_us[i] + time.time_us), 0, stream, kNone, 0, 0, 0,
                name, 0});
  }
  t.add(Event{EventKind::range, "step 0", 0, ns(p.step.step_us), kNone, kNone, kStepTrackThread, 0, 0, 0, "", kNone});
  const Scenario& s = p.scenario;
  t.metadata["source"] = "k3perf predict";
  t.metadata["prediction"] = s.name;
  t.metadata["hardware"] = s.hardware.name;
  t.metadata["clock"] = "predicted: ns from the start of the step";
  t.metadata["step_time_ns"] = std::to_string(ns(p.step.step_us));
  t.integer_keys.insert("step_time_ns");
  t.set_integer("ops", static_cast<std::int64_t>(ops.size()));
  t.set_integer("steps", 1);
  t.stream_names[{0, kPredictedComputeStream}] = fmt::format("stream {}: ops", kPredictedComputeStream);
  t.stream_names[{0, kPredictedSideStream}] = fmt::format("stream {}: beside another op", kPredictedSideStream);
  t.stream_names[{0, kPredictedCommStream}] = fmt::format("stream {}: collectives", kPredictedCommStream);
  t.sort();
  return t;
}

}  // namespace k3::profiler
