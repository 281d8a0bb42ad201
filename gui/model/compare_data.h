// A comparison as the Compare view reads it: the rows of `k3perf compare --json` (profiler/compare/compare.cpp
// to_json), with the counter comparison (profiler/counters/compare_counters.cpp to_json) joined onto its ops
// when the JSON carries one under "counters" (`k3perf compare --trace … --counters …`). UI-free.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace k3::gui {

// What `k3perf run --counters` measured of one op: DRAM bytes and tensor FLOPs, medians over occurrences.
struct CounterRow {
  double measured_bytes = 0;
  std::optional<double> bytes_error_percent;
  std::optional<double> measured_tensor_flops;  // none when no tensor metric was collected
  std::optional<double> flops_error_percent;
};

struct CompareOpRow {
  std::string name, kind, bound;
  double predicted_us = 0, measured_us = 0;
  double error_percent = 0;  // (predicted − measured) / measured · 100, as compare wrote it
  int kernels = 0;
  double flops = 0, bytes = 0;  // the prediction's
  double achieved_bytes_per_s = 0;
  std::optional<double> roofline_percent;  // none for collectives
  std::optional<CounterRow> counters;      // when the comparison holds counters and this op was measured by them
  double error_us() const { return predicted_us - measured_us; }
};

struct CompareGroupRow {  // per op kind or per step
  std::string group;
  int ops = 0;
  double predicted_us = 0, measured_us = 0;
  double median_abs_error_percent = 0;
  double error_us() const { return predicted_us - measured_us; }
  double error_percent() const { return measured_us > 0 ? 100 * error_us() / measured_us : 0; }
};

struct CounterKindRow {
  std::string kind;
  double predicted_bytes = 0, measured_bytes = 0;
};

struct UnattributedKernelRow {
  std::string name;
  int count = 0;
  double total_us = 0;
};

struct NotPredictedRow {
  std::string name;
  int instances = 0;
  double measured_us = 0;
  bool engine_only = false;  // the prediction names it as one of the engine's own ranges
};

struct CompareData {
  std::string prediction_origin;
  std::vector<std::pair<std::string, std::string>> trace_metadata;
  // The summary.
  int measured_ops = 0, kernels = 0, kernels_on_predicted_ops = 0;
  double kernel_time_us = 0, kernel_time_on_predicted_ops_us = 0;
  double coverage_percent = 0, median_abs_error_percent = 0;
  std::vector<CompareOpRow> ops;  // in prediction order
  std::vector<CompareGroupRow> by_kind, by_step;
  std::vector<std::string> not_measured, fused;
  std::vector<NotPredictedRow> not_predicted;
  std::vector<UnattributedKernelRow> unattributed_kernels;
  // The counter comparison's totals, when there is one.
  bool has_counters = false;
  std::string counters_origin;
  double counters_predicted_bytes = 0, counters_measured_bytes = 0;
  std::optional<double> counters_median_abs_bytes_error_percent, counters_median_abs_flops_error_percent;
  std::vector<CounterKindRow> counters_by_kind;

  // Index of the op named `name` in ops, or -1.
  int find(const std::string& name) const;
  // The measured step: the median over by_step of the steps' measured sums; 0 without steps.
  double median_step_measured_us() const;
};

// Reads a `k3perf compare --json` object; InputError naming `origin` and the key when it is not one.
CompareData compare_from_json(const nlohmann::ordered_json& j, const std::string& origin);

}  // namespace k3::gui
