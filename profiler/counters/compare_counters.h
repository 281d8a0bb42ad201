// A prediction's bytes and FLOPs against the counters measured per op range (docs/profile.md,
// "Counter mode"), joined on op names:
//   measured bytes of one occurrence = dram__bytes_read + dram__bytes_write of its range;
//   measured tensor FLOPs of one occurrence = (bf16 + fp8 tensor math ops) · kTensorFlopsPerMathOp;
//   per op: the median over occurrences (steps), the mean of the middle two for even counts;
//   error % = (predicted − measured) / measured · 100 (positive: the prediction counts more), none
//     when the measurement is 0 or the op is a collective; FLOP errors only where tensor work was
//     measured (the counters see tensor-core math only, not the FLOPs of norms, softmax or glue);
//   summary: median |error| per op kind and over all ops.
// Predicted bytes are every class read and written (weights, KV, state, activations); DRAM counts
// only what misses L2, so activations that stay in L2 make the measurement lower.
#pragma once

#include "profiler/compare/prediction_file.h"
#include "profiler/counters/range_counters.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace k3::profiler {

struct OpCounterComparison {
  const PredictedOp* predicted = nullptr;  // into the PredictionFile
  std::vector<double> measured_bytes_by_occurrence;
  double measured_read_bytes = 0;   // median over occurrences
  double measured_write_bytes = 0;  // median over occurrences
  double measured_bytes = 0;        // median of read + write
  std::optional<double> bytes_error_percent;
  std::optional<double> measured_tensor_flops;  // median; none when no tensor metric was collected
  std::optional<double> flops_error_percent;
};

struct MeasuredOnlyCounterOp {  // a range whose name the prediction does not have
  std::string name;
  std::size_t occurrences = 0;
  double measured_bytes = 0;  // median over occurrences
};

struct CounterGroupError {  // per op kind
  std::string group;
  std::size_t ops = 0;
  double predicted_bytes = 0;  // sums over the group's measured ops
  double measured_bytes = 0;
  std::optional<double> median_abs_bytes_error_percent;
  std::size_t ops_with_tensor_flops = 0;
  std::optional<double> median_abs_flops_error_percent;
};

struct CounterComparison {
  std::string prediction_origin;
  std::string counters_origin;
  std::map<std::string, std::string> counters_metadata;
  int64_t lost_ranges = 0;
  std::vector<OpCounterComparison> ops;              // measured ops, in prediction order
  std::vector<std::string> not_measured;             // predicted, no range of that name
  std::vector<MeasuredOnlyCounterOp> not_predicted;  // sorted by name
  std::vector<CounterGroupError> by_kind;            // in order of first appearance in the prediction
  double predicted_bytes = 0;                        // sums over the measured ops (one step)
  double measured_bytes = 0;
  std::optional<double> median_abs_bytes_error_percent;
  std::optional<double> median_abs_flops_error_percent;
};

// `prediction` must outlive the result. InputError when the counters lack the DRAM metrics.
CounterComparison compare_counters(const PredictionFile& prediction, const RangeCounters& counters);

nlohmann::ordered_json to_json(const CounterComparison& c);
std::string to_text(const CounterComparison& c);  // summary, per kind, and every measured op

}  // namespace k3::profiler
