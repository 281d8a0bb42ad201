#include "sim/claims/claim_scenario.h"

#include "core/error.h"
#include "core/limits.h"

#include <fmt/format.h>

namespace k3 {

std::vector<std::string> scenario_param_keys(std::vector<std::string> extra) {
  for (const char* k : {"model", "hardware", "tp", "attention_dp", "ep", "pp", "weights", "kda_state", "kv_cache",
                        "routed_experts", "cuda_graphs"}) {
    extra.push_back(k);
  }
  return extra;
}

namespace {

std::string string_or(const YamlNode& keys, const std::string& key, const std::string& fallback) {
  const auto v = keys.find(key);
  return v ? v->as_string() : fallback;
}

int degree_or(const YamlNode& keys, const std::string& key, int fallback) {
  const auto v = keys.find(key);
  return v ? read_int<int>(*v, limit::parallel_degree) : fallback;
}

StorageFormat storage_or(const YamlNode& keys, const std::string& key, StorageFormat fallback,
                         const std::vector<std::string>& allowed) {
  const auto v = keys.find(key);
  if (!v) return fallback;
  StorageFormat f{};
  parse_storage_format(v->as_choice(allowed), &f);
  return f;
}

}  // namespace

Scenario scenario_from_keys(const YamlNode& keys, const std::string& claim_file, const DataPaths& data,
                            const Phase& phase, const std::string& default_model, const std::string& default_hardware) {
  Scenario s;
  s.source = claim_file;
  const std::string model = string_or(keys, "model", default_model);
  if (model.empty()) keys["model"].as_string();  // "missing required key" naming the file and path
  s.model = load_model_config_by_name(model, data.models_dir);
  const std::string hardware = string_or(keys, "hardware", default_hardware);
  if (!hardware.empty()) s.hardware = load_hardware_by_name(hardware, data.hardware_dir);
  s.parallelism.tp = degree_or(keys, "tp", 1);
  s.parallelism.attention_dp = degree_or(keys, "attention_dp", 1);
  s.parallelism.ep = degree_or(keys, "ep", 1);
  s.parallelism.pp = degree_or(keys, "pp", 1);
  s.precision.weights =
      storage_or(keys, "weights", s.model.quantize_attention_and_dense ? s.model.weight_format : StorageFormat::bf16,
                 {"bf16", "fp8", "mxfp8"});
  s.precision.routed_experts =
      storage_or(keys, "routed_experts", s.model.routed_expert_format, {"bf16", "fp8", "mxfp8", "mxfp4", "int4"});
  s.precision.kda_state = storage_or(keys, "kda_state", StorageFormat::fp32, {"fp32", "bf16"});
  s.precision.kv_cache = storage_or(keys, "kv_cache", StorageFormat::bf16, {"bf16", "fp8"});
  if (const auto v = keys.find("cuda_graphs")) s.runtime.cuda_graphs = v->as_bool();
  s.phase = phase;
  return s;
}

Scenario claim_scenario(const ClaimInputs& c, const DataPaths& data, const Phase& phase,
                        const std::string& default_model, const std::string& default_hardware) {
  const YamlNode keys = c.params ? *c.params : YamlNode(YAML::Node(YAML::NodeType::Map), c.file, "params");
  Scenario s = scenario_from_keys(keys, c.file, data, phase, default_model, default_hardware);
  s.name = c.id;
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
