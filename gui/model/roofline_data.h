// What the Roofline tab draws: the hardware's roofs (HBM bandwidth, a compute peak per tensor-core type)
// and every GPU op of the prediction at its arithmetic intensity (FLOP per byte) and attained rate (FLOP
// over its predicted time), with the measured rate of the same op when a comparison is loaded (joined by
// name). Collectives and ops without FLOPs have no place on these axes and are counted instead. UI-free.
#pragma once

#include "core/hardware.h"
#include "gui/model/prediction_data.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace k3::gui {

struct ComputeRoof {
  std::string compute;  // "bf16", "fp8", ...
  double peak_flops_per_s = 0;
  double ridge_flops_per_byte = 0;  // where the memory roof meets this one
};

struct RooflinePoint {
  std::string name, kind, bound, compute;
  double intensity_flops_per_byte = 0;
  double flops = 0;
  double predicted_us = 0;
  double predicted_flops_per_s = 0;
  double roof_flops_per_s = 0;  // min(peak of its compute type, HBM bandwidth x intensity)
  std::optional<double> measured_us, measured_flops_per_s;
  double predicted_percent_of_roof() const { return predicted_flops_per_s / roof_flops_per_s * 100.0; }
};

struct RooflineData {
  std::string hardware;
  double hbm_bandwidth_bytes_per_s = 0;
  std::vector<ComputeRoof> compute_roofs;  // lowest peak first
  std::vector<RooflinePoint> points;       // in graph order
  int collectives_left_out = 0;
  int zero_flop_left_out = 0;  // no FLOPs, no bytes or no time: no intensity or rate to place
  int comparison_ops = 0;      // comparison ops with FLOPs and a measured time
  int measured_joined = 0;     // of those, the ones whose name is a point here
  // The roof over `intensity` for compute type `compute` (the highest peak when the hardware has none).
  double roof_at(double intensity_flops_per_byte, const std::string& compute) const;
};

// `comparison` is `k3perf compare --json` (its ops: name, measured_us, flops); nullptr when none.
RooflineData roofline_data(const PredictionData& p, const Hardware& hw, const nlohmann::ordered_json* comparison);

// "2.5 PFLOP/s", "120 TFLOP/s", "3.1 GFLOP/s"; "4.8 TB/s" with unit "B/s".
std::string rate_text(double per_s, const std::string& unit = "FLOP/s");

}  // namespace k3::gui
