#include "core/scenario.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/yaml_reader.h"
#include "core/yaml_set.h"

#include <filesystem>

namespace k3 {

namespace fs = std::filesystem;

// An fp8 latent cache stores E4M3 values with one fp32 scale per token and layer.
double Precision::kv_bytes_per_value() const {
  return kv_cache == StorageFormat::fp8 ? 1.0 : bytes_per_element(kv_cache);
}
double Precision::kv_scale_bytes_per_token() const { return kv_cache == StorageFormat::fp8 ? 4.0 : 0.0; }

std::string to_string(PhaseKind p) {
  switch (p) {
    case PhaseKind::prefill: return "prefill";
    case PhaseKind::decode: return "decode";
    case PhaseKind::verify: return "verify";
  }
  return "?";
}

Phase Phase::decode(long long batch, long long context_tokens) {
  return Phase{PhaseKind::decode, batch, context_tokens, 1, 16384};
}

Phase Phase::prefill(long long batch, long long prompt_tokens, long long cached_prefix_tokens, long long chunk_tokens) {
  return Phase{PhaseKind::prefill, batch, cached_prefix_tokens, prompt_tokens, chunk_tokens};
}

Phase Phase::verify(long long batch, long long draft_tokens, long long context_tokens) {
  return Phase{PhaseKind::verify, batch, context_tokens, draft_tokens + 1, 16384};
}

namespace {

StorageFormat storage(const YamlNode& n, const std::vector<std::string>& allowed) {
  StorageFormat f{};
  parse_storage_format(n.as_choice(allowed), &f);
  return f;
}

// A model or hardware reference: a path relative to the scenario file, or a name in the data dir.
std::string resolve_reference(const YamlNode& n, const std::string& origin) {
  const std::string ref = n.as_string();
  const fs::path beside = fs::path(origin).parent_path() / ref;
  std::error_code ec;  // a name the file system refuses (too long, …) is not a file beside the scenario
  if (!origin.empty() && origin[0] != '<' && fs::is_regular_file(beside, ec)) return beside.string();
  return ref;
}

void read_workload(const YamlNode& w, Phase& ph) {
  w.expect_keys({"batch", "context_tokens", "new_tokens", "draft_tokens", "prefill_chunk_tokens"});
  constexpr IntLimit new_tokens = at_least(limit::tokens, 1);
  ph.batch = read_int<long long>(w["batch"], limit::batch);
  if (auto c = w.find("context_tokens")) ph.context_tokens = read_int<long long>(*c, limit::tokens);
  switch (ph.kind) {
    case PhaseKind::decode:
      if (auto n = w.find("new_tokens"); n && n->as_int() != 1)
        n->fail("a decode step processes 1 new token per sequence");
      ph.new_tokens = 1;
      break;
    case PhaseKind::prefill:
      ph.new_tokens = read_int<long long>(w["new_tokens"], new_tokens);
      if (auto c = w.find("prefill_chunk_tokens")) ph.prefill_chunk_tokens = read_int<long long>(*c, new_tokens);
      break;
    case PhaseKind::verify: ph.new_tokens = read_int<long long>(w["draft_tokens"], new_tokens) + 1; break;
  }
}

}  // namespace

Scenario parse_scenario(const std::string& yaml_text, const std::string& origin, const DataPaths& data,
                        const std::vector<std::string>& sets) {
  // Edits go into the parsed document itself, so the file's line numbers survive in errors.
  YamlNode y = YamlNode::load_string(yaml_text, origin);
  apply_sets(y.raw(), sets);
  y.mark_overridden(sets);
  y.expect_keys(
      {"name", "model", "hardware", "gpus", "parallelism", "precision", "phase", "workload", "runtime", "overrides"});

  Scenario s;
  s.source = origin;
  s.name = y.has("name") ? y["name"].as_string() : fs::path(origin).stem().string();
  // A reference that does not load is reported at the scenario key that names it.
  const YamlNode model_ref = y["model"];
  const YamlNode hardware_ref = y["hardware"];
  try {
    s.model = load_model_config_by_name(resolve_reference(model_ref, origin), data.models_dir);
  } catch (const InputError& e) {
    model_ref.fail(e.what());
  }
  try {
    s.hardware = load_hardware_by_name(resolve_reference(hardware_ref, origin), data.hardware_dir);
  } catch (const InputError& e) {
    hardware_ref.fail(e.what());
  }

  if (auto o = y.find("overrides")) {
    o->expect_keys({"attention", "attnres", "layers"});
    if (auto a = o->find("attention")) {
      const std::string kind = a->as_choice({"as_published", "all_mla", "all_kda"});
      if (kind != "as_published") {
        s.model = with_all_attention(s.model, kind == "all_mla" ? AttentionKind::mla : AttentionKind::kda);
        s.overrides.push_back("attention: " + kind);
      }
    }
    if (auto r = o->find("attnres"); r && !r->as_bool() && s.model.residual == ResidualKind::block_attnres) {
      s.model = without_attnres(s.model);
      s.overrides.push_back("attnres: false");
    }
    if (auto l = o->find("layers")) {
      const int layers = read_int<int>(*l, limit::layers);
      if (layers > s.model.num_layers) {
        l->fail(fmt::format("{} has {} layers; expected 1..{}", s.model.name, s.model.num_layers, s.model.num_layers));
      }
      if (layers < s.model.num_layers) {
        s.model = with_first_layers(s.model, layers);
        s.overrides.push_back(fmt::format("layers: {}", layers));
      }
    }
  }

  if (auto p = y.find("parallelism")) {
    p->expect_keys({"tp", "attention_dp", "ep", "pp", "sequence_parallel"});
    Parallelism& par = s.parallelism;
    const std::pair<const char*, int*> degrees[] = {
        {"tp", &par.tp}, {"attention_dp", &par.attention_dp}, {"ep", &par.ep}, {"pp", &par.pp}};
    for (auto [key, degree] : degrees) {
      if (auto v = p->find(key)) *degree = read_int<int>(*v, limit::parallel_degree);
    }
    if (auto v = p->find("sequence_parallel")) par.sequence_parallel = v->as_bool();
  }
  // Before validate(), which would name a symptom (a tp that does not divide the heads) of a wrong layout. The
  // product is formed in 64 bits: each degree is checked, their product only in validate().
  if (auto g = y.find("gpus")) {
    const Parallelism& par = s.parallelism;
    const long long layout = 1LL * par.tp * par.attention_dp * par.pp;
    if (read_int<int>(*g, limit::gpus) != layout) {
      g->fail(fmt::format("{} GPUs given, but tp {} x attention_dp {} x pp {} = {}", g->as_int(), par.tp,
                          par.attention_dp, par.pp, layout));
    }
  }

  // Precision defaults follow the checkpoint as published.
  s.precision.weights = s.model.quantize_attention_and_dense ? s.model.weight_format : StorageFormat::bf16;
  s.precision.routed_experts = s.model.routed_expert_format;
  if (auto p = y.find("precision")) {
    p->expect_keys({"weights", "routed_experts", "kv_cache", "kda_state", "activations", "gemm_compute"});
    if (auto v = p->find("weights")) s.precision.weights = storage(*v, {"bf16", "fp8", "mxfp8"});
    if (auto v = p->find("routed_experts"))
      s.precision.routed_experts = storage(*v, {"bf16", "fp8", "mxfp8", "mxfp4", "int4"});
    if (auto v = p->find("kv_cache")) s.precision.kv_cache = storage(*v, {"bf16", "fp8"});
    if (auto v = p->find("kda_state")) s.precision.kda_state = storage(*v, {"fp32", "bf16"});
    if (auto v = p->find("activations")) s.precision.activations = storage(*v, {"bf16", "fp8"});
    if (auto v = p->find("gemm_compute")) {
      parse_compute_type(v->as_choice({"bf16", "fp8", "fp4"}), &s.precision.gemm_compute);
      if (!s.hardware.supports(s.precision.gemm_compute)) {
        v->fail(fmt::format("{} has no {} tensor-core rate", s.hardware.name, to_string(s.precision.gemm_compute)));
      }
    }
  }

  s.phase.kind = PhaseKind::decode;
  if (auto ph = y.find("phase")) {
    const std::string kind = ph->as_choice({"decode", "prefill", "verify"});
    s.phase.kind = kind == "prefill" ? PhaseKind::prefill : kind == "verify" ? PhaseKind::verify : PhaseKind::decode;
  }
  read_workload(y["workload"], s.phase);

  if (auto r = y.find("runtime")) {
    r->expect_keys({"cuda_graphs", "memory_utilization", "reserved_gib"});
    if (auto v = r->find("cuda_graphs")) s.runtime.cuda_graphs = v->as_bool();
    if (auto v = r->find("memory_utilization")) s.runtime.memory_utilization = v->as_fraction();
    if (auto v = r->find("reserved_gib")) s.runtime.reserved_bytes = v->as_non_negative() * double(1ull << 30);
  }
  validate(s);
  return s;
}

Scenario load_scenario(const std::string& path, const DataPaths& data, const std::vector<std::string>& sets) {
  return parse_scenario(read_file(path), path, data, sets);
}

void validate(const Scenario& s) {
  const Parallelism& par = s.parallelism;
  const ModelConfig& m = s.model;
  auto fail = [&](const std::string& what) { throw InputError(fmt::format("{}: {}", s.source, what)); };
  // Each degree was read within limit::parallel_degree; their product must fit too before gpus() is used.
  const long long gpus = 1LL * par.tp * par.attention_dp * par.pp;
  if (gpus > limit::gpus.max) {
    fail(fmt::format("parallelism: tp {} x attention_dp {} x pp {} = {}", par.tp, par.attention_dp, par.pp,
                     exceeds(gpus, limit::gpus)));
  }
  if (m.count_layers(AttentionKind::mla) > 0 && m.mla.num_heads % par.tp != 0) {
    fail(fmt::format("parallelism.tp {} does not divide the {} MLA heads", par.tp, m.mla.num_heads));
  }
  if (m.kda && m.count_layers(AttentionKind::kda) > 0 && m.kda->num_heads % par.tp != 0) {
    fail(fmt::format("parallelism.tp {} does not divide the {} KDA heads", par.tp, m.kda->num_heads));
  }
  if (m.moe) {
    if (par.stage_gpus() % par.ep != 0) {
      fail(fmt::format("parallelism.ep {} must divide tp x attention_dp = {}", par.ep, par.stage_gpus()));
    }
    if (m.moe->num_experts % par.ep != 0) {
      fail(fmt::format("parallelism.ep {} does not divide the {} routed experts", par.ep, m.moe->num_experts));
    }
    if (m.moe->expert_intermediate % par.moe_tp() != 0) {
      fail(
          fmt::format("experts split over {} GPUs each (tp x attention_dp / ep), which does not divide their "
                      "intermediate size {}",
                      par.moe_tp(), m.moe->expert_intermediate));
    }
    if (par.attention_dp > 1 && par.ep == 1) {
      fail(
          fmt::format("parallelism.attention_dp {} needs ep > 1: the attention groups reach shared experts only "
                      "through expert-parallel all-to-all",
                      par.attention_dp));
    }
  } else if (par.ep != 1) {
    fail("parallelism.ep > 1 needs a model with routed experts");
  }
  if (par.pp > m.num_layers) fail(fmt::format("parallelism.pp {} exceeds the {} layers", par.pp, m.num_layers));
  if (s.phase.batch < par.attention_dp) {
    fail(fmt::format("workload.batch {} is smaller than attention_dp {}: some attention groups would idle",
                     s.phase.batch, par.attention_dp));
  }
  if (s.phase.context_tokens + s.phase.new_tokens > m.max_position_embeddings) {
    fail(fmt::format("workload.context_tokens {} + {} new tokens exceeds the model's {} positions",
                     s.phase.context_tokens, s.phase.new_tokens, m.max_position_embeddings));
  }
  if (s.precision.gemm_compute == ComputeType::fp4 && !s.hardware.supports(ComputeType::fp4)) {
    fail(fmt::format("{} has no fp4 tensor cores", s.hardware.name));
  }
}

}  // namespace k3
