// What-ifs on one scenario: two predictions side by side with their deltas (`k3perf predict S --baseline-set k=v`,
// `--compare other.yaml`), and a sweep, one prediction per point of the cross product of `--sweep key=v1,v2,...`
// axes (docs/predict.md#what-ifs). Both reuse the --set machinery: a point is a list of key=value edits.
#pragma once

#include "sim/predict.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace k3 {

// The baseline and the scenario side by side: step, throughput, exposed time per op kind, memory per GPU, and
// each delta (scenario - baseline, and in percent of the baseline).
std::string format_prediction_diff(const Prediction& baseline, const Prediction& scenario,
                                   const std::string& baseline_label, const std::string& scenario_label);
nlohmann::ordered_json prediction_diff_json(const Prediction& baseline, const Prediction& scenario,
                                            const std::string& baseline_label, const std::string& scenario_label);
// quantity,unit,baseline,scenario,delta: one row per line of the table (quantities in snake case).
std::string prediction_diff_csv(const Prediction& baseline, const Prediction& scenario);

// One axis of a sweep, from "workload.batch=1,8,64" (commas inside [...] or {...} belong to a value).
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};
// InputError naming `flag` ("--sweep") and the text when it has no '=', an empty key or an empty value.
SweepAxis parse_sweep_axis(const std::string& text, const std::string& flag = "--sweep");

// The cross product, the first axis varying slowest: each point as its --set edits ("key=value").
std::vector<std::vector<std::string>> sweep_points(const std::vector<SweepAxis>& axes);

struct SweepRow {
  std::vector<std::string> values;  // one per axis
  double step_ms = 0;
  double tokens_per_s = 0, tokens_per_s_per_gpu = 0;
  double memory_per_gpu_bytes = 0, usable_per_gpu_bytes = 0;
  bool fits = false;
};
// `load` turns a point's edits into a scenario (the caller's file and --set edits first); its InputError is
// prefixed with the point.
std::vector<SweepRow> run_sweep(const std::vector<SweepAxis>& axes,
                                const std::function<Scenario(const std::vector<std::string>&)>& load);

std::string format_sweep(const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows);
// Column names carry their units (step_time_ms, memory_per_gpu_gib, ...).
std::string sweep_csv(const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows);
nlohmann::ordered_json sweep_json(const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows);

}  // namespace k3
