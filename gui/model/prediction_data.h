// A prediction as the GUI's views read it: the rows of `k3perf predict --json` (sim/predict.cpp), whether
// the prediction was made live from a scenario or opened from a file. One format, one reader, so an opened
// bench/results prediction shows exactly as a live one. UI-free.
#pragma once

#include "profiler/compare/prediction_file.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace k3 {
struct Prediction;
}

namespace k3::gui {

struct PredictedOpRow {
  std::string name;     // "L004.mla.attn_decode"
  std::string kind;     // op kind: "mla_attention", "gemm", "collective", ...
  std::string module;   // "mla", "moe", "comm", "embed", "head", ...
  std::string bound;    // compute, memory, communication, overhead
  std::string compute;  // tensor-core type of the op's FLOPs ("bf16", "fp8", ...)
  int layer = 0;        // 1-based; 0 for embed.* and head.*
  double flops = 0;
  double bytes = 0;  // read + written, every class
  double intensity_flops_per_byte = 0;
  int kernels = 0;
  double compute_us = 0, memory_us = 0, communication_us = 0, overhead_us = 0;
  double time_us = 0;           // the op alone
  double exposed_us = 0;        // what it adds to the step
  double collective_bytes = 0;  // collectives only
  int group_size = 0;           // collectives only
  std::string runs_inside;      // the op whose range the engine runs this one in; empty: its own
  bool collective() const { return kind == "collective"; }
  // The op name without its layer prefix: "mla.attn_decode" for "L004.mla.attn_decode".
  std::string base_name() const;
};

struct GroupRow {
  std::string group;
  int count = 0;
  double time_us = 0, flops = 0, bytes = 0;
};

struct PredictionData {
  std::string origin;  // the scenario file, "<embedded default: …>" or the prediction JSON's path
  // The scenario echo.
  std::string name, model, hardware, phase;
  int gpus = 1, tp = 1, attention_dp = 1, ep = 1, pp = 1;
  std::string weights, routed_experts, kv_cache, kda_state, gemm_compute;
  long long batch = 0, context_tokens = 0, new_tokens = 0;
  bool cuda_graphs = true;
  std::vector<std::string> overrides;
  // The step.
  double step_us = 0, tokens_per_s = 0, tokens_per_s_per_gpu = 0;
  // Memory per GPU.
  double weights_bytes = 0, kv_bytes = 0, kda_state_bytes = 0, activation_bytes = 0, reserved_bytes = 0;
  double total_bytes = 0, usable_bytes = 0;
  bool fits = true;
  long long max_batch_at_context = 0;
  std::vector<GroupRow> by_layer_kind, by_module, by_bound;
  std::vector<PredictedOpRow> ops;
  std::vector<std::string> engine_only_ops;

  // "Kimi K3 … decode, batch 8, 128K": one line for window titles and legends.
  std::string title() const;
  // Exposed time per op kind, in order of first appearance.
  std::vector<GroupRow> by_kind() const;
  // Index of the op named `name` in ops, or -1.
  int find(const std::string& name) const;
};

// The rows of a live prediction, field for field what prediction_from_json(to_json(p)) reads, without the
// JSON round trip (a what-if edit on full K3 must stay under 50 ms).
PredictionData prediction_data(const Prediction& p, const std::string& origin);
// The prediction as `k3perf compare` reads it from the JSON (profiler::parse_prediction), straight from the ops.
profiler::PredictionFile prediction_file(const Prediction& p, const std::string& origin);
// Reads a prediction JSON; InputError naming `origin` and the key when it is not one.
PredictionData prediction_from_json(const nlohmann::ordered_json& j, const std::string& origin);

}  // namespace k3::gui
