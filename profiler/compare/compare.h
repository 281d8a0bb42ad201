// Prediction against measurement, joined on op names (docs/profile.md):
//   measured time of one op instance = the length of the union of the intervals of the kernels,
//     copies and sets attributed to it (GPU busy time: overlapping streams count once);
//   measured_us = the median over instances (steps); even counts take the mean of the middle two;
//   error % = (predicted - measured) / measured · 100 (positive: the prediction is slower);
//   achieved bandwidth = bytes / measured, FLOP rate = flops / measured (the prediction's counts);
//   roofline_us = max(flops / peak[compute type], bytes / HBM bandwidth) at 100 % of the hardware's
//     peaks; % of roofline = roofline_us / measured · 100 (none for collectives);
//   coverage = kernel time attributed to predicted ops / all kernel time;
//   a step on the GPU = from the first to the last GPU event attributed to an op of that instance (step);
//     its idle time = that span minus the union of every kernel, copy and set inside it (any stream);
//     the step's error compares the median span with the prediction's step_time_us.
// Fused ops: an engine may run a predicted op inside its neighbour's kernel and range (the AttnRes
// mixer with the RMSNorm after it); the prediction records which (PredictedOp::runs_inside, from the op
// graph's Op::runs_inside). When the trace has no range of such an op but has its host's, the op's
// prediction (time, FLOPs, bytes) is added to the host's, or stands for the host when the prediction has
// none (the first layer's norm, whose mixer the op graph does not predict); the comparison lists each such
// fusion. Measured ops the prediction lacks are listed with whether the prediction names them as the
// engine's own ranges (engine_only_ops: residual adds, sampling, decode.advance).
// Compute and communication apart: collective ops are summed apart from the rest. A rank run on one GPU
// (trace metadata `collectives: emulated`, engine/parallel/emulated_communicator.h) records its collectives
// without executing them; their ranges hold only the emulation's copies, so they are listed as emulated
// (predicted time, the copies' time beside it) and never compared, and the step is measured compute +
// predicted communication against the predicted step.
#pragma once

#include "core/hardware.h"
#include "profiler/compare/prediction_file.h"
#include "profiler/trace/trace.h"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace k3::profiler {

struct OpComparison {
  const PredictedOp* predicted = nullptr;       // into the PredictionFile
  std::vector<double> measured_us_by_instance;  // index = instance (step)
  double measured_us = 0;                       // median over instances
  double error_percent = 0;
  double achieved_bytes_per_s = 0;
  double achieved_flops_per_s = 0;
  double roofline_us = 0;
  std::optional<double> roofline_percent;  // none for collectives or ops that move nothing
  std::size_t kernels = 0;                 // attributed kernels, all instances
};

struct UnattributedKernel {
  std::string name;
  std::size_t count = 0;
  double total_us = 0;
};

struct MeasuredOnlyOp {  // attributed to a range whose name the prediction does not have
  std::string name;
  std::size_t instances = 0;
  double measured_us = 0;    // median over instances
  bool engine_only = false;  // the prediction lists it among the engine's own ranges
};

struct GroupError {  // per op kind, or per step
  std::string group;
  std::size_t ops = 0;
  double predicted_us = 0;  // sums over the group's ops (per step: that step's instances)
  double measured_us = 0;
  double median_abs_error_percent = 0;
};

struct EmulatedCollective {  // recorded by a rank run on one GPU, not executed
  const PredictedOp* predicted = nullptr;
  double emulation_us = 0;  // median time of the emulation's own copies in its range (not communication)
};

// Per step (sums of the per-op medians): compute ops and collectives apart.
struct ComputeCommunication {
  bool emulated = false;  // the trace's collectives were recorded, not executed
  std::size_t compute_ops = 0, collectives = 0;
  double predicted_compute_us = 0, measured_compute_us = 0;
  double predicted_communication_us = 0;
  std::optional<double> measured_communication_us;  // none when emulated
  double predicted_step_us() const { return predicted_compute_us + predicted_communication_us; }
  // Measured compute + measured communication, or + predicted communication when it was emulated.
  double step_us() const {
    return measured_compute_us + measured_communication_us.value_or(predicted_communication_us);
  }
};

struct StepWindow {    // one step (op instance) on the GPU
  double span_us = 0;  // first to last GPU event attributed to the step's ops
  double busy_us = 0;  // union of every GPU event inside the span
  double idle_us() const { return span_us - busy_us; }
};

struct Comparison {
  std::string prediction_origin;
  double predicted_step_us = 0;     // the prediction's step_time_us (0: not in the file)
  std::vector<StepWindow> steps;    // by instance
  double measured_step_us = 0;      // median span
  double gpu_idle_in_steps_us = 0;  // median idle time inside a step
  bool records_engine = false;      // the prediction lists the engine's own ranges (PredictionFile::records_engine)
  std::map<std::string, std::string> trace_metadata;
  std::vector<OpComparison> ops;             // measured ops, in prediction order
  std::vector<EmulatedCollective> emulated;  // in prediction order (collectives: emulated)
  ComputeCommunication split;
  std::vector<std::string> fused;  // "L001.norm.attn_in -> L001.attnres.pre_attn", ...
  std::shared_ptr<const std::vector<PredictedOp>> fused_predictions;  // what ops[i].predicted may point to
  std::vector<std::string> not_measured;                              // predicted, no kernel attributed
  std::vector<MeasuredOnlyOp> not_predicted;                          // sorted by name
  std::vector<UnattributedKernel> unattributed;                       // by total time, largest first
  std::size_t kernels = 0;
  std::size_t kernels_on_predicted_ops = 0;
  double kernel_time_us = 0;
  double kernel_time_on_predicted_ops_us = 0;
  double coverage_percent() const {
    return kernel_time_us > 0 ? 100 * kernel_time_on_predicted_ops_us / kernel_time_us : 0;
  }
  std::vector<GroupError> by_kind;      // in order of first appearance in the prediction
  std::vector<GroupError> by_step;      // "0", "1", ...
  double median_abs_error_percent = 0;  // over all measured ops
};

double median(std::vector<double> values);                // mean of the middle two for even counts; 0 when empty
double error_percent(double predicted, double measured);  // signed, of the measured; 0 when measured <= 0

// `prediction` must outlive the result (OpComparison points into it).
Comparison compare(const PredictionFile& prediction, const Trace& trace, const Hardware& hw);

// What a prediction and a trace both record of the shape run, where they differ: model, layers, batch, context
// (or prompt tokens of a prefill), phase, hardware (the trace's GPU name, "NVIDIA " dropped, must be words of the
// prediction's hardware name). One line each, "batch: the prediction has 8, the trace 1"; empty when they agree
// or the trace does not record the shape (metadata `model`, `shape`, `gpu` of `k3perf run --trace`).
std::vector<std::string> shape_mismatches(const PredictionFile& prediction,
                                          const std::map<std::string, std::string>& trace_metadata);

enum class ErrorOrder { absolute_us, percent };  // how to_text ranks the largest errors

nlohmann::ordered_json to_json(const Comparison& c);
std::string to_csv(const Comparison& c);  // one row per measured op
// Summary, the step and its GPU idle time, then the `top_ops` largest errors (by |predicted - measured| us, or by
// |error %|).
std::string to_text(const Comparison& c, int top_ops, ErrorOrder order = ErrorOrder::absolute_us);

}  // namespace k3::profiler
