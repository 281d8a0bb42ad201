#include "sim/claims/claim_scenario.h"

#include "core/error.h"

#include <fmt/format.h>

namespace k3 {

std::vector<std::string> scenario_param_keys(std::vector<std::string> extra) {
  for (const char* k : {"model", "hardware", "tp", "attention_dp", "ep", "pp", "kda_state", "kv_cache",
                        "routed_experts", "cuda_graphs"}) {
    extra.push_back(k);
  }
  return extra;
}

Scenario claim_scenario(const Claim& c, const DataPaths& data, const Phase& phase,
                        const std::string& default_model, const std::string& default_hardware) {
  Scenario s;
  s.source = c.file;
  s.name = c.id;
  s.model = load_model_config_by_name(param_string(c, "model", default_model), data.models_dir);
  s.hardware = load_hardware_by_name(param_string(c, "hardware", default_hardware), data.hardware_dir);
  s.parallelism.tp = static_cast<int>(param_count(c, "tp", 1));
  s.parallelism.attention_dp = static_cast<int>(param_count(c, "attention_dp", 1));
  s.parallelism.ep = static_cast<int>(param_count(c, "ep", 1));
  s.parallelism.pp = static_cast<int>(param_count(c, "pp", 1));
  s.precision.weights = s.model.quantize_attention_and_dense ? s.model.weight_format : StorageFormat::bf16;
  s.precision.routed_experts = param_storage(c, "routed_experts", s.model.routed_expert_format,
                                             {"bf16", "fp8", "mxfp8", "mxfp4", "int4"});
  s.precision.kda_state = param_storage(c, "kda_state", StorageFormat::fp32, {"fp32", "bf16"});
  s.precision.kv_cache = param_storage(c, "kv_cache", StorageFormat::bf16, {"bf16", "fp8"});
  s.runtime.cuda_graphs = param_bool(c, "cuda_graphs", true);
  s.phase = phase;
  validate(s);
  return s;
}

Scenario with_model(const Scenario& s, const ModelConfig& model) {
  Scenario out = s;
  out.model = model;
  validate(out);
  return out;
}

std::optional<Scenario> on_hardware(const Scenario& s, const Hardware& hw, int tp) {
  Scenario out = s;
  out.hardware = hw;
  out.parallelism = Parallelism{tp, 1, out.model.moe ? tp : 1, 1};
  try {
    validate(out);
  } catch (const InputError&) {
    return std::nullopt;  // e.g. tp does not divide the heads
  }
  return out;
}

std::string gib(double bytes) { return fmt::format("{:.3f} GiB", bytes / double(1ull << 30)); }

}  // namespace k3
