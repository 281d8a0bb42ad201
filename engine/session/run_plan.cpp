#include "engine/session/run_plan.h"

#include "core/error.h"
#include "engine/parallel/rank_shape.h"
#include "engine/weights/weights_source.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>

namespace k3::session {

std::string to_string(RunPhase p) { return p == RunPhase::prefill ? "prefill" : "decode"; }

namespace {

[[noreturn]] void unsupported(const Scenario& s, const std::string& key, const std::string& value,
                              const std::string& why) {
  throw InputError(fmt::format("{}: key '{}': {}: {}", s.source, key, value, why));
}

// The engine runs one rank of a TP/EP layout within one attention group; the rest is out of its reach.
void check_parallelism(const Scenario& s) {
  const Parallelism& p = s.parallelism;
  if (p.pp != 1) unsupported(s, "parallelism.pp", std::to_string(p.pp), "the engine has no pipeline stages (give 1)");
  if (p.sequence_parallel && p.tp > 1) {
    unsupported(s, "parallelism.sequence_parallel", "true", "the engine's ranks run no sequence parallelism");
  }
  if (p.attention_dp != 1) {
    unsupported(s, "parallelism.attention_dp", std::to_string(p.attention_dp),
                "the engine emulates one attention group (the attention-DP all-to-all is not there; give 1)");
  }
  if (p.ep > 1 && p.moe_tp() > 1) {
    unsupported(
        s, "parallelism.ep", std::to_string(p.ep),
        fmt::format("the engine splits experts over ranks, not within one (moe_tp {}; give ep = tp)", p.moe_tp()));
  }
}

// What the rank holds, in the simulator's terms: its shards, the latent cache of its attention group's sequences
// and the KDA state of its heads (engine/parallel/sharding.h), for `sequences` sequences of `tokens` tokens.
runtime::MemoryPlan rank_memory(const Scenario& s, const parallel::RankShape& shape, int64_t sequences,
                                int64_t tokens) {
  const parallel::RankState st = parallel::rank_state(s.model, s.precision, shape.layout);
  const std::string who = shape.single_gpu() ? "the model's" : fmt::format("rank {}'s", shape.layout.rank);
  return runtime::MemoryPlan{{
      {fmt::format("weights ({} checkpoint shards)", who), uint64_t(shape.weight_bytes)},
      {fmt::format("MLA latent cache ({} sequences x {} tokens)", sequences, tokens),
       uint64_t(st.mla_cache_bytes_per_token * double(sequences * tokens))},
      {fmt::format("KDA state ({} sequences)", sequences),
       uint64_t((st.kda_state_bytes_per_sequence + st.kda_conv_bytes_per_sequence) * double(sequences))},
  }};
}

// The engine's formats: bf16 weights outside the experts, the experts as the checkpoint stores
// them, a bf16 latent cache, fp32 KDA state, bf16 activations and GEMMs.
void check_precision(const Scenario& s) {
  const Precision& p = s.precision;
  const auto require = [&](const char* key, StorageFormat got, StorageFormat engine, const char* why) {
    if (got != engine) unsupported(s, key, to_string(got), fmt::format("{} (give {})", why, to_string(engine)));
  };
  require("precision.weights", p.weights, StorageFormat::bf16, "the engine's linear layers are bf16");
  require("precision.routed_experts", p.routed_experts, s.model.routed_expert_format,
          "the engine runs the routed experts as the checkpoint stores them");
  require("precision.kv_cache", p.kv_cache, StorageFormat::bf16, "the engine's MLA latent cache is bf16");
  require("precision.kda_state", p.kda_state, StorageFormat::fp32, "the engine's KDA state is fp32");
  require("precision.activations", p.activations, StorageFormat::bf16, "the engine's activations are bf16");
  if (p.gemm_compute != ComputeType::bf16) {
    unsupported(s, "precision.gemm_compute", to_string(p.gemm_compute),
                "the engine's GEMMs compute in bf16 (give bf16)");
  }
}

void check_overrides(const Scenario& s) {
  for (const std::string& o : s.overrides) {
    if (o.rfind("layers:", 0) == 0) continue;     // the engine keeps the same layers
    if (o.rfind("attention:", 0) == 0) continue;  // and the same attention kinds (RunOptions::attention)
    const std::size_t colon = o.find(':');
    unsupported(s, "overrides." + o.substr(0, colon), o.substr(colon + 2),
                "the engine runs the model's layers as published (only overrides.layers and overrides.attention "
                "apply)");
  }
}

int as_int(const Scenario& s, const char* key, long long v) {
  if (v > INT_MAX) unsupported(s, key, std::to_string(v), "too large for the engine");
  return static_cast<int>(v);
}

}  // namespace

RunPlan plan_run(const Scenario& s, const EngineKnobs& k) {
  check_parallelism(s);
  check_precision(s);
  check_overrides(s);
  if (k.decode_tokens < 2) throw InputError(fmt::format("decode tokens {}: the run needs at least 2", k.decode_tokens));
  if (k.prompt_tokens < 1) throw InputError(fmt::format("prompt tokens {}: expected at least 1", k.prompt_tokens));

  RunPlan plan;
  plan.scenario = s;
  runtime::RunOptions& o = plan.options;
  o.model_path = s.model.source_file;
  o.weights = k.weights;
  (void)weights::parse_weights_source(k.weights);  // a bad seed is an input error before any GPU work
  const bool sliced = std::any_of(s.overrides.begin(), s.overrides.end(),
                                  [](const std::string& e) { return e.rfind("layers:", 0) == 0; });
  o.layers = sliced ? s.model.num_layers : 0;
  for (const std::string& e : s.overrides) {
    if (e.rfind("attention:", 0) == 0) o.attention = e.substr(e.find(':') + 2);
  }
  o.decode_tokens = k.decode_tokens;
  o.page_tokens = k.page_tokens;
  o.prompt_seed = k.prompt_seed;
  o.warmup_tokens = k.warmup_tokens;
  o.tile_experts = k.tile_experts;
  o.use_cuda_graph = s.runtime.cuda_graphs;
  o.parallelism = s.parallelism;
  o.rank = k.rank;
  const parallel::RankShape shape =
      parallel::rank_shape(s.model, parallel::rank_layout(s.parallelism, k.rank, s.model.num_layers));
  const Phase& ph = s.phase;
  switch (ph.kind) {
    case PhaseKind::verify:
      unsupported(s, "phase", "verify", "the engine has no verify step (run a decode or a prefill scenario)");
    case PhaseKind::decode:
      if (ph.context_tokens < 1) {
        unsupported(s, "workload.context_tokens", std::to_string(ph.context_tokens),
                    "the engine decodes after a prompt of at least 1 token");
      }
      plan.subject = RunPhase::decode;
      o.batch = as_int(s, "workload.batch", ph.batch);
      o.prompt_tokens = std::min<int64_t>(k.prompt_tokens, ph.context_tokens);
      o.context_tokens = ph.context_tokens > o.prompt_tokens ? ph.context_tokens : 0;
      o.chunk_tokens = k.chunk_tokens;
      break;
    case PhaseKind::prefill:
      if (ph.batch != 1) {
        unsupported(s, "workload.batch", std::to_string(ph.batch),
                    "the engine prefills one sequence at a time (a prefill scenario has batch 1)");
      }
      if (ph.context_tokens != 0) {
        unsupported(s, "workload.context_tokens", std::to_string(ph.context_tokens),
                    "the engine has no prefix cache (a prefill scenario starts from an empty cache)");
      }
      plan.subject = RunPhase::prefill;
      o.batch = 1;
      o.prompt_tokens = ph.new_tokens;
      o.context_tokens = 0;
      o.chunk_tokens = as_int(s, "workload.prefill_chunk_tokens", ph.prefill_chunk_tokens);
      break;
  }
  plan.decode = s;
  plan.decode.runtime.cuda_graphs = o.use_cuda_graph;
  plan.decode.phase = Phase::decode(o.batch, std::max(o.context_tokens, o.prompt_tokens));
  plan.prefill = s;
  plan.prefill.runtime.cuda_graphs = false;  // the engine prefills eagerly
  plan.prefill.phase = Phase::prefill(1, o.prompt_tokens, 0, o.chunk_tokens);
  validate(plan.decode);
  validate(plan.prefill);
  plan.memory = rank_memory(s, shape, o.batch, std::max(o.context_tokens, o.prompt_tokens) + o.decode_tokens);
  const double capacity_bytes = s.hardware.hbm_capacity_bytes;
  if (!shape.single_gpu() && double(plan.memory.total_bytes()) > capacity_bytes) {
    unsupported(s, "parallelism.tp", std::to_string(s.parallelism.tp),
                fmt::format("{} needs {:.3f} GiB, more than the {:.3f} GiB of a {}:\n{}", shape.layout.describe(),
                            plan.memory.total_bytes() / double(1ull << 30), capacity_bytes / double(1ull << 30),
                            s.hardware.name, plan.memory.describe()));
  }
  return plan;
}

std::string shorthand_scenario_yaml(const std::string& model, const std::string& hardware) {
  if (model.empty()) {
    throw InputError("k3perf run: no model: give a scenario file, --model, or a checkpoint (--weights <dir>)");
  }
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "k3perf run" << YAML::Key << "model" << YAML::Value
      << model << YAML::Key << "hardware" << YAML::Value << hardware << YAML::Key << "phase" << YAML::Value << "decode"
      << YAML::Key << "workload" << YAML::Value << YAML::BeginMap << YAML::Key << "batch" << YAML::Value << 1
      << YAML::Key << "context_tokens" << YAML::Value << EngineKnobs{}.prompt_tokens << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Scenario load_run_scenario(const std::string& scenario_path, const std::string& model, const std::string& hardware,
                           const DataPaths& data, const std::vector<std::string>& sets) {
  if (scenario_path.empty()) {
    return parse_scenario(shorthand_scenario_yaml(model, hardware), "<k3perf run>", data, sets);
  }
  std::vector<std::string> all;
  if (!model.empty()) all.push_back("model=" + model);
  if (!hardware.empty()) all.push_back("hardware=" + hardware);
  all.insert(all.end(), sets.begin(), sets.end());
  return load_scenario(scenario_path, data, all);
}

}  // namespace k3::session
