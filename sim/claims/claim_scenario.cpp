#include "sim/claims/claim_scenario.h"

#include <fmt/format.h>

namespace k3 {

Scenario claim_scenario(const Claim& c, const DataPaths& data, const Phase& phase,
                        const std::string& default_model, const std::string& default_hardware) {
  Scenario s;
  s.source = c.file;
  s.name = c.id;
  s.model = load_model_config_by_name(param_string(c, "model", default_model), data.models_dir);
  s.hardware = load_hardware_by_name(param_string(c, "hardware", default_hardware), data.hardware_dir);
  s.parallelism.tp = static_cast<int>(param_double(c, "tp", 1));
  s.parallelism.attention_dp = static_cast<int>(param_double(c, "attention_dp", 1));
  s.parallelism.ep = static_cast<int>(param_double(c, "ep", 1));
  s.parallelism.pp = static_cast<int>(param_double(c, "pp", 1));
  s.precision.weights = s.model.quantize_attention_and_dense ? s.model.weight_format : StorageFormat::bf16;
  s.precision.routed_experts = s.model.routed_expert_format;
  parse_storage_format(param_string(c, "kda_state", "fp32"), &s.precision.kda_state);
  parse_storage_format(param_string(c, "kv_cache", "bf16"), &s.precision.kv_cache);
  parse_storage_format(param_string(c, "routed_experts", to_string(s.precision.routed_experts)),
                       &s.precision.routed_experts);
  s.runtime.cuda_graphs = param_string(c, "cuda_graphs", "true") == "true";
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

std::string gib(double bytes) { return fmt::format("{:.3f} GiB", bytes / double(1ull << 30)); }

}  // namespace k3
