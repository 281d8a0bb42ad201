// Calibration of the roofline (sim/roofline.h) from measured runs (docs/profile.md):
//   t_op = max(flops / (peak · η_compute[class]), bytes / (HBM bw · η_memory[class])) + kernels · o
// For each op the bound is taken from the current efficiencies; given the bounds the model is
// linear in 1/η_memory, 1/η_compute per efficiency class and in o (per kernel, the launch mode of
// the runs), so these are fitted by least squares (Eigen, column-pivoting QR) on relative residuals
// (each row divided by the measured time, so small and large ops weigh alike), bounds reassigned,
// and refitted until the bounds no longer change. Samples are the per-op medians over steps from
// compare. The fit is then checked on held-out runs: median |error| before (the prediction files'
// own times) and after (the calibrated hardware).
#pragma once

#include "core/hardware.h"
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
  std::optional<double> compute;  // fitted η, when the class has compute-bound samples
  std::optional<double> memory;
  bool clamped = false;  // a fitted η above 1 was set to 1
};

struct FitCheck {  // median |error| in % over the ops of some runs
  std::size_t ops = 0;
  double before_percent = 0;  // the prediction files' times
  double after_percent = 0;   // the calibrated hardware's times
};

struct Calibration {
  std::vector<ClassFit> classes;  // classes with samples, in kAllEfficiencyClasses order
  double overhead_us_per_kernel = 0;
  bool cuda_graphs = true;  // which per-kernel overhead o is (graph replay or eager launch)
  int iterations = 0;
  FitCheck training;
  FitCheck held_out;
  std::vector<std::string> training_runs;  // "prediction + trace (commit c, date d)"
  std::vector<std::string> held_out_runs;
};

// Throws InputError when the runs disagree on the launch mode, have no usable ops, or the fit is
// degenerate (too few distinct samples for the unknowns, a non-positive time per byte or FLOP).
Calibration calibrate(const std::vector<CalibrationRun>& training, const std::vector<CalibrationRun>& held_out,
                      const Hardware& base);

// `base` with the fitted efficiencies and overhead.
Hardware calibrated_hardware(const Hardware& base, const Calibration& c);
// The hardware file: `base`'s file with the new name, the fitted efficiency block and overhead,
// all cited to `source_id`, whose citation lists the runs with their commit and date.
std::string calibrated_hardware_yaml(const Hardware& base, const Calibration& c, const std::string& name,
                                     const std::string& source_id);
nlohmann::ordered_json to_json(const Calibration& c);
std::string to_text(const Calibration& c);

}  // namespace k3::profiler
