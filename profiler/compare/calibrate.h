// Calibration of the roofline (sim/roofline.h) from measured runs (docs/profile.md):
//   t_op = ridge_max(flops / (peak · η_compute[class]), bytes / (HBM bw · η_memory[class])) + steps · σ[kind]
//          + kernels · (o + λ[kind])
// o is the base file's per-kernel launch (eager) or replay (CUDA graph) overhead, by each run's launch
// mode; σ[kind] is the base file's serial step time (measured, not fitted: a constant of the op's row);
// λ[kind] is the op kind's fixed GPU latency per kernel (what a small kernel costs beyond its bytes
// and FLOPs). For each op the bound is taken from the current efficiencies; given the bounds the
// model is linear in u = 1/η - 1 per (class, bound) and in λ per kind, all >= 0 (so η <= 1), fitted by
// weighted least absolute deviations of the relative residuals (each row divided by the measured time; every run
// weighs 1, half spread over its ops, half by their shares of its step; iteratively reweighted non-negative least
// squares); the bounds and ridge factors are reassigned and the fit repeated until they settle. An
// efficiency the samples cannot separate from its kinds' latencies (all its ops of one size) keeps the
// base value. Samples are the per-op medians over steps from compare; collectives are left out. The
// fit is checked per op and per step on the training runs and on held-out runs: before (the
// prediction files' own times) and after (sim/roofline with the calibrated hardware).
#pragma once

#include "core/hardware.h"
#include "core/op_graph.h"
#include "profiler/compare/compare.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace k3::profiler {

// One measured run: its prediction and its attributed trace.
struct CalibrationRun {
  std::string prediction_path;
  std::string trace_path;
  PredictionFile prediction;
  Trace trace;
};
CalibrationRun load_calibration_run(const std::string& prediction_path, const std::string& trace_path);

struct ClassFit {
  EfficiencyClass cls = EfficiencyClass::gemm;
  std::size_t compute_samples = 0;  // ops of the class bound by compute at the fitted efficiencies
  std::size_t memory_samples = 0;
  std::optional<double> compute;  // fitted η; none: no such samples, or they do not determine it
  std::optional<double> memory;
  bool compute_at_peak = false;  // the fit reached the constraint η = 1
  bool memory_at_peak = false;
};

struct LatencyFit {
  OpKind kind = OpKind::gemm;
  std::size_t samples = 0;
  double latency_us_per_kernel = 0;  // λ, >= 0
};

struct OpCheck {  // one op of one run
  std::string name;
  OpKind kind = OpKind::gemm;
  double measured_us = 0;  // median over steps
  double before_us = 0;    // the prediction file's time
  double after_us = 0;     // the calibrated hardware's time
};

struct RunCheck {
  std::string run;    // "prediction + trace (commit c, date d)"
  std::string phase;  // the prediction's scenario phase
  std::vector<OpCheck> ops;
  double op_error_before_percent = 0;  // median |error| over its ops
  double op_error_after_percent = 0;
  // The step: the sum of its ops' predicted times against the median over steps of the sum of the
  // same ops' measured times.
  double measured_step_us = 0;
  double predicted_step_before_us = 0;
  double predicted_step_after_us = 0;
  double step_error_before_percent() const {
    return 100 * (predicted_step_before_us - measured_step_us) / measured_step_us;
  }
  double step_error_after_percent() const {
    return 100 * (predicted_step_after_us - measured_step_us) / measured_step_us;
  }
};

struct FitCheck {  // over the ops of some runs
  std::size_t ops = 0;
  double before_percent = 0;             // median |error| per op: the prediction files' times
  double after_percent = 0;              // the calibrated hardware's times
  double worst_step_before_percent = 0;  // largest |step error| over the runs
  double worst_step_after_percent = 0;
  std::vector<RunCheck> runs;
};

struct Calibration {
  std::vector<ClassFit> classes;          // classes with samples, in kAllEfficiencyClasses order
  std::vector<LatencyFit> latencies;      // kinds with samples, in OpKind order
  std::vector<std::string> undetermined;  // efficiencies kept at the base value, with the reason
  int iterations = 0;
  FitCheck training;
  FitCheck held_out;
  std::vector<std::string> training_runs;  // "prediction + trace (commit c, date d)"
  std::vector<std::string> held_out_runs;
  // The engine the training traces ran (their metadata's engine_sources and commit) when every one names the same;
  // written as the calibrated file's `calibrated_on` (core/engine_sources.h). Empty otherwise.
  std::string engine_sources, commit;
};

// Throws InputError when no training run is given or a run has no measured op. Unknowns the ops do not
// determine are not fitted (the selection keeps the rank), so any number of ops gives an answer.
Calibration calibrate(const std::vector<CalibrationRun>& training, const std::vector<CalibrationRun>& held_out,
                      const Hardware& base);

// `base` with the fitted efficiencies and kernel latencies.
Hardware calibrated_hardware(const Hardware& base, const Calibration& c);
// The hardware file: `base`'s file with the new name, the fitted efficiency and kernel_latency_us
// blocks, cited to `source_id`, whose citation lists the runs with their commit and date and the
// checks' errors.
std::string calibrated_hardware_yaml(const Hardware& base, const Calibration& c, const std::string& name,
                                     const std::string& source_id);
nlohmann::ordered_json to_json(const Calibration& c);
std::string to_text(const Calibration& c);

}  // namespace k3::profiler
