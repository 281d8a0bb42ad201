#include "gui/model/scenario_fields.h"

#include "gui/model/document.h"
#include "gui/model/prediction_data.h"

#include <algorithm>

namespace k3::gui {
namespace {

// Suggested values of the integer fields; any other integer can be typed.
const std::vector<std::string> kGpuCounts = {"1", "2", "4", "8", "16", "32", "64"};
const std::vector<std::string> kPipelineStages = {"1", "2", "4", "8"};
const std::vector<std::string> kBatches = {"1", "2", "4", "8", "16", "32", "64", "128", "256"};
const std::vector<std::string> kContexts = {"0",      "4096",   "8192",   "32768",  "65536",
                                            "131072", "262144", "524288", "1048512"};
const std::vector<std::string> kPromptTokens = {"1024", "4096", "16384", "65536", "131072"};
const std::vector<std::string> kDraftTokens = {"1", "2", "3", "4", "7"};

// The reader's value lists (core/scenario.cpp, docs/scenarios.md).
const std::vector<std::string> kWeightFormats = {"bf16", "fp8", "mxfp8"};
const std::vector<std::string> kExpertFormats = {"bf16", "fp8", "mxfp8", "mxfp4", "int4"};

std::string override_value(const PredictionData& p, const std::string& name, const std::string& otherwise) {
  const std::string prefix = name + ": ";
  for (const std::string& o : p.overrides) {
    if (o.rfind(prefix, 0) == 0) return o.substr(prefix.size());
  }
  return otherwise;
}

ScenarioField make(std::string key, std::string label, std::string group, FieldKind kind,
                   std::vector<std::string> choices = {}, std::vector<std::string> phases = {},
                   bool only_if_in_scenario = false) {
  return {std::move(key),     std::move(label),  std::move(group),   kind,
          std::move(choices), std::move(phases), only_if_in_scenario};
}

}  // namespace

bool ScenarioField::applies_to(const std::string& phase) const {
  return phases.empty() || std::find(phases.begin(), phases.end(), phase) != phases.end();
}

std::vector<ScenarioField> scenario_fields(const DataPaths& data) {
  using K = FieldKind;
  return {
      make("model", "Model", "Scenario", K::choice, list_names(data.models_dir, ".json")),
      make("hardware", "Hardware", "Scenario", K::choice, list_names(data.hardware_dir, ".yaml")),
      make("gpus", "GPUs", "Scenario", K::integer, kGpuCounts, {}, true),
      make("parallelism.tp", "TP", "Parallelism", K::integer, kGpuCounts),
      make("parallelism.ep", "EP", "Parallelism", K::integer, kGpuCounts),
      make("parallelism.attention_dp", "Attention DP", "Parallelism", K::integer, kGpuCounts),
      make("parallelism.pp", "PP", "Parallelism", K::integer, kPipelineStages),
      make("precision.routed_experts", "Routed experts", "Precision", K::choice, kExpertFormats),
      make("precision.kv_cache", "KV cache", "Precision", K::choice, {"bf16", "fp8"}),
      make("precision.kda_state", "KDA state", "Precision", K::choice, {"fp32", "bf16"}),
      make("precision.gemm_compute", "GEMM compute", "Precision", K::choice, {"bf16", "fp8", "fp4"}),
      make("precision.weights", "Weights", "Precision", K::choice, kWeightFormats),
      make("phase", "Phase", "Workload", K::choice, {"decode", "prefill", "verify"}),
      make("workload.batch", "Batch (sequences)", "Workload", K::integer, kBatches),
      make("workload.context_tokens", "Context (tokens)", "Workload", K::integer, kContexts),
      make("workload.new_tokens", "Prompt (tokens)", "Workload", K::integer, kPromptTokens, {"prefill"}),
      make("workload.draft_tokens", "Draft (tokens)", "Workload", K::integer, kDraftTokens, {"verify"}),
      make("runtime.cuda_graphs", "CUDA graphs", "Runtime", K::boolean),
      make("overrides.attention", "Attention", "Overrides", K::choice, {"as_published", "all_mla", "all_kda"}),
      make("overrides.attnres", "Block AttnRes", "Overrides", K::boolean),
  };
}

std::string echoed_value(const std::string& key, const PredictionData& p) {
  // An opened prediction file records display names only ("kimi-k3", "H200 SXM").
  if (key == "model") return p.model;
  if (key == "hardware") return p.hardware;
  if (key == "gpus") return std::to_string(p.gpus);
  if (key == "parallelism.tp") return std::to_string(p.tp);
  if (key == "parallelism.ep") return std::to_string(p.ep);
  if (key == "parallelism.attention_dp") return std::to_string(p.attention_dp);
  if (key == "parallelism.pp") return std::to_string(p.pp);
  if (key == "precision.routed_experts") return p.routed_experts;
  if (key == "precision.kv_cache") return p.kv_cache;
  if (key == "precision.kda_state") return p.kda_state;
  if (key == "precision.gemm_compute") return p.gemm_compute;
  if (key == "precision.weights") return p.weights;
  if (key == "phase") return p.phase;
  if (key == "workload.batch") return std::to_string(p.batch);
  if (key == "workload.context_tokens") return std::to_string(p.context_tokens);
  if (key == "workload.new_tokens" && p.phase == "prefill") return std::to_string(p.new_tokens);
  if (key == "workload.draft_tokens" && p.phase == "verify") return std::to_string(p.new_tokens - 1);
  if (key == "runtime.cuda_graphs") return p.cuda_graphs ? "true" : "false";
  if (key == "overrides.attention") return override_value(p, "attention", "as_published");
  if (key == "overrides.attnres") return override_value(p, "attnres", "true");
  return "";
}

std::string shown_value(const ScenarioField& field, const Document& document) {
  std::string value = document.value_of(field.key);
  if (value.empty() && document.prediction()) value = echoed_value(field.key, *document.prediction());
  if (field.kind == FieldKind::boolean && !value.empty()) value = is_true(value) ? "true" : "false";
  return value;
}

void FieldValues::refresh(const Document& document) {
  if (document.edits().empty()) scenario_values_.clear();
}

std::string FieldValues::shown(const ScenarioField& field, const Document& document) {
  std::string value;
  if (auto edit = document.edits().find(field.key); edit != document.edits().end()) {
    value = edit->second;
  } else {
    auto [it, inserted] = scenario_values_.emplace(field.key, "");
    if (inserted) it->second = document.value_of(field.key);  // no edit of this key: the YAML's value
    value = it->second;
  }
  if (value.empty() && document.prediction()) value = echoed_value(field.key, *document.prediction());
  if (field.kind == FieldKind::boolean && !value.empty()) value = is_true(value) ? "true" : "false";
  return value;
}

std::vector<std::pair<std::string, std::string>> edits_for(const ScenarioField& field, const std::string& value,
                                                           const std::vector<ScenarioField>& fields,
                                                           const Document& document) {
  std::vector<std::pair<std::string, std::string>> out;
  if (field.key == "phase") {
    for (const ScenarioField& f : fields) {
      if (!f.applies_to(value) && document.edits().count(f.key)) out.emplace_back(f.key, "");
    }
  }
  out.emplace_back(field.key, value);
  return out;
}

bool is_true(const std::string& value) { return value == "true" || value == "True" || value == "yes"; }

}  // namespace k3::gui
