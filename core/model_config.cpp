#include "core/model_config.h"

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace k3 {

std::string to_string(AttentionKind k) { return k == AttentionKind::mla ? "mla" : "kda"; }
std::string to_string(KdaGateForm f) { return f == KdaGateForm::bounded_sigmoid ? "bounded_sigmoid" : "softplus"; }

int ModelConfig::count_layers(AttentionKind k) const {
  int n = 0;
  for (AttentionKind a : layer_attention) n += a == k;
  return n;
}

int ModelConfig::count_layers(MlpKind k) const {
  int n = 0;
  for (MlpKind a : layer_mlp) n += a == k;
  return n;
}

// Block AttnRes bookkeeping (K3-SPEC §2): a block closes at every layer ℓ with ℓ % B == 0, just
// before that layer's attention; each mixer sees the closed blocks plus the running partial sum.
int ModelConfig::attnres_candidates_before_attention(int layer) const {
  if (residual != ResidualKind::block_attnres || layer == 0) return 0;  // ℓ=0: h = embedding, no mixer
  const int closed = (layer - 1) / attn_res_block_layers + 1;
  return closed + 1;
}

int ModelConfig::attnres_candidates_before_mlp(int layer) const {
  if (residual != ResidualKind::block_attnres) return 0;
  return layer / attn_res_block_layers + 1 + 1;
}

int ModelConfig::attnres_candidates_final() const {
  if (residual != ResidualKind::block_attnres) return 0;
  return (num_layers - 1) / attn_res_block_layers + 1 + 1;
}

namespace {

int read(const JsonNode& node, const IntLimit& limit) { return read_int<int>(node, limit); }

// The schedule of attention kinds from linear_attn_config's 1-based layer lists.
std::vector<AttentionKind> parse_layer_schedule(const JsonNode& lin, int num_layers) {
  const std::vector<long long> full = lin["full_attn_layers"].as_int_list();
  const std::vector<long long> kda = lin["kda_layers"].as_int_list();
  std::vector<int> seen(num_layers, 0);
  std::vector<AttentionKind> schedule(num_layers, AttentionKind::kda);
  auto mark = [&](const std::vector<long long>& list, AttentionKind kind, const char* key) {
    for (long long one_based : list) {
      if (one_based < 1 || one_based > num_layers) {
        lin[key].fail(fmt::format("layer {} is outside 1..num_hidden_layers ({})", one_based, num_layers));
      }
      if (seen[one_based - 1]++) {
        lin[key].fail(fmt::format("layer {} is listed twice across kda_layers and full_attn_layers", one_based));
      }
      schedule[one_based - 1] = kind;
    }
  };
  mark(full, AttentionKind::mla, "full_attn_layers");
  mark(kda, AttentionKind::kda, "kda_layers");
  for (int i = 0; i < num_layers; ++i) {
    if (!seen[i]) lin.fail(fmt::format("layer {} (1-based) is in neither kda_layers nor full_attn_layers", i + 1));
  }
  return schedule;
}

void parse_mla(const JsonNode& t, ModelConfig& m) {
  m.mla.num_heads = read(t["num_attention_heads"], limit::heads);
  if (std::optional<JsonNode> kv = t.find("num_key_value_heads")) {
    if (kv->as_positive_int() != m.mla.num_heads) {
      kv->fail("MLA needs num_key_value_heads == num_attention_heads");
    }
  }
  m.mla.q_lora_rank = t.has("q_lora_rank") ? read(t["q_lora_rank"], limit::model_dim) : 0;
  m.mla.kv_lora_rank = read(t["kv_lora_rank"], limit::model_dim);
  m.mla.qk_nope_head_dim = read(t["qk_nope_head_dim"], limit::head_dim);
  m.mla.qk_rope_head_dim = read(t["qk_rope_head_dim"], limit::head_dim);
  m.mla.v_head_dim = read(t["v_head_dim"], limit::head_dim);
}

void parse_moe_common(const JsonNode& t, ModelConfig& m, const char* experts_key, const char* topk_key,
                      const char* shared_key) {
  MoeSpec moe;
  moe.num_experts = read(t[experts_key], limit::experts);
  moe.top_k = read(t[topk_key], limit::experts);
  if (moe.top_k > moe.num_experts) t[topk_key].fail("top-k exceeds the number of experts");
  moe.expert_intermediate = read(t["moe_intermediate_size"], limit::model_dim);
  const int shared = t.has(shared_key) ? read(t[shared_key], limit::shared_experts) : 0;
  moe.shared_intermediate = shared * moe.expert_intermediate;
  moe.first_k_dense = t.has("first_k_dense_replace") ? read(t["first_k_dense_replace"], limit::dense_layers) : 0;
  if (moe.first_k_dense > m.num_layers) t["first_k_dense_replace"].fail("exceeds num_hidden_layers");
  moe.routed_scaling_factor = t.has("routed_scaling_factor") ? t["routed_scaling_factor"].as_double() : 1.0;
  if (t.has("moe_layer_freq") && t["moe_layer_freq"].as_int() != 1) {
    t["moe_layer_freq"].fail("only moe_layer_freq 1 (every layer after first_k_dense_replace) is supported");
  }
  m.dense_intermediate = moe.first_k_dense > 0 ? read(t["intermediate_size"], limit::model_dim) : 0;
  m.layer_mlp.assign(m.num_layers, MlpKind::moe);
  for (int i = 0; i < moe.first_k_dense; ++i) m.layer_mlp[i] = MlpKind::dense;
  m.moe = moe;
}

void parse_activation(const JsonNode& t, ModelConfig& m) {
  const std::string act = t["hidden_act"].as_string();
  if (act == "silu") {
    m.activation = Activation::silu;
  } else if (act == "situ") {
    m.activation = Activation::situ;
    m.situ_beta = t["activation_situ_beta"].as_double();
    m.situ_linear_beta = t["activation_situ_linear_beta"].as_double();
    if (m.situ_beta <= 0) t["activation_situ_beta"].fail("expected a positive number");
    if (m.situ_linear_beta <= 0) t["activation_situ_linear_beta"].fail("expected a positive number");
  } else {
    t["hidden_act"].fail(fmt::format("expected \"silu\" or \"situ\", got \"{}\"", act));
  }
}

void parse_kimi_linear(const JsonNode& t, bool k3_layout, ModelConfig& m) {
  parse_mla(t, m);
  m.mla.rotary = !(t.has("mla_use_nope") && t["mla_use_nope"].as_bool());
  m.mla.output_gate = t.has("mla_use_output_gate") && t["mla_use_output_gate"].as_bool();

  const JsonNode lin = t["linear_attn_config"];
  m.layer_attention = parse_layer_schedule(lin, m.num_layers);
  KdaSpec kda;
  kda.num_heads = read(lin["num_heads"], limit::heads);
  kda.head_dim = read(lin["head_dim"], limit::head_dim);
  kda.conv_kernel = read(lin["short_conv_kernel_size"], limit::head_dim);
  // The gate form is chosen by the config, never defaulted: a lower bound selects the bounded sigmoid.
  if (std::optional<JsonNode> lb = lin.find("gate_lower_bound")) {
    kda.gate_form = KdaGateForm::bounded_sigmoid;
    kda.gate_lower_bound = lb->as_double();
    if (!(kda.gate_lower_bound < 0)) lb->fail("expected a negative log-decay bound (K3: -5.0)");
  } else {
    kda.gate_form = KdaGateForm::softplus;
  }
  kda.full_rank_output_gate = lin.has("use_full_rank_gate") && lin["use_full_rank_gate"].as_bool();
  // FLA's KDA layer projects the forget gate (and a low-rank output gate) through head_dim.
  kda.gate_rank = kda.head_dim;
  // The K3 checkpoint pads A_log to 128 values (96 heads + 32 zeros); Kimi Linear stores one per head.
  kda.a_log_stored_values = k3_layout ? ((kda.num_heads + 127) / 128) * 128 : kda.num_heads;
  m.kda = kda;

  parse_moe_common(t, m, "num_experts", "num_experts_per_token", "num_shared_experts");
  MoeSpec& moe = *m.moe;
  moe.latent_dim = t.has("routed_expert_hidden_size") ? read(t["routed_expert_hidden_size"], limit::model_dim) : 0;
  moe.latent_norm = moe.latent_dim > 0 && t.has("latent_moe_use_norm") && t["latent_moe_use_norm"].as_bool();
  // Kimi's sigmoid router always carries e_score_correction_bias (used for selection only).
  moe.score_correction_bias = true;

  parse_activation(t, m);
  if (std::optional<JsonNode> block = t.find("attn_res_block_size")) {
    m.residual = ResidualKind::block_attnres;
    m.attn_res_block_layers = read(*block, limit::layers);
  }
}

void parse_deepseek(const JsonNode& t, ModelConfig& m) {
  parse_mla(t, m);
  m.mla.rotary = true;
  m.layer_attention.assign(m.num_layers, AttentionKind::mla);
  parse_moe_common(t, m, "n_routed_experts", "num_experts_per_tok", "n_shared_experts");
  m.moe->score_correction_bias = t.has("topk_method") && t["topk_method"].as_string() == "noaux_tc";
  parse_activation(t, m);
}

// Storage formats from quantization_config (absent = bf16 everywhere).
void parse_quantization(const JsonNode& q, ModelConfig& m) {
  const std::string method = q["quant_method"].as_string();
  if (method == "fp8") {
    // DeepSeek-style block FP8: every linear layer of the decoder (attention, dense, shared, experts);
    // embedding, lm_head, router and norms stay bf16.
    m.weight_format = StorageFormat::fp8;
    m.routed_expert_format = StorageFormat::fp8;
    m.quantize_attention_and_dense = true;
    return;
  }
  if (method != "compressed-tensors") {
    q["quant_method"].fail(fmt::format("expected \"fp8\" or \"compressed-tensors\", got \"{}\"", method));
  }
  // compressed-tensors: the published K3 and K2 Thinking ignore lists exempt everything but the
  // routed experts, so the quantised format applies to the routed experts only.
  const std::string dump = q.raw().dump();
  if (dump.find("mxfp4") != std::string::npos) {
    m.routed_expert_format = StorageFormat::mxfp4;
    return;
  }
  const JsonNode groups = q["config_groups"];
  for (const auto& item : groups.raw().items()) {
    const JsonNode weights = groups[item.key()]["weights"];
    const long long bits = weights["num_bits"].as_positive_int();
    const std::string type = weights["type"].as_string();
    if (bits == 4 && type == "int") {
      m.routed_expert_format = StorageFormat::int4;
      return;
    }
    if (bits == 8 && type == "float") {
      m.routed_expert_format = StorageFormat::fp8;
      return;
    }
    weights.fail(fmt::format("unsupported weight quantisation: {} bits of type \"{}\"", bits, type));
  }
  groups.fail("expected at least one quantisation group");
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& origin) {
  const JsonNode root = JsonNode::parse(json_text, origin);
  const bool nested = root.has("text_config");
  const JsonNode t = nested ? root["text_config"] : root;

  ModelConfig m;
  m.source_file = origin;
  m.name = std::filesystem::path(origin).stem().string();
  m.model_type = t["model_type"].as_string();
  m.hidden_size = read(t["hidden_size"], limit::model_dim);
  m.num_layers = read(t["num_hidden_layers"], limit::layers);
  m.vocab_size = read(t["vocab_size"], limit::vocab);
  m.tie_word_embeddings = t.has("tie_word_embeddings") && t["tie_word_embeddings"].as_bool();
  m.rms_norm_eps = t.has("rms_norm_eps") ? t["rms_norm_eps"].as_double() : 1e-6;
  // Kimi Linear's published config names the context limit model_max_length.
  m.max_position_embeddings = t.has("max_position_embeddings") || !t.has("model_max_length")
                                  ? read_int<long long>(t["max_position_embeddings"], limit::positions)
                                  : read_int<long long>(t["model_max_length"], limit::positions);

  if (m.model_type == "kimi_linear") {
    parse_kimi_linear(t, nested, m);
  } else if (m.model_type == "deepseek_v3" || m.model_type == "kimi_k2") {
    parse_deepseek(t, m);
  } else {
    t["model_type"].fail(
        fmt::format("unsupported model_type \"{}\" (expected kimi_linear, kimi_k2 or deepseek_v3)", m.model_type));
  }

  if (std::optional<JsonNode> q = t.find("quantization_config")) {
    parse_quantization(*q, m);
  } else if (nested && root.has("quantization_config")) {
    parse_quantization(root["quantization_config"], m);
  }
  return m;
}

ModelConfig load_model_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open model config", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_model_config(buffer.str(), path);
}

ModelConfig load_model_config_by_name(const std::string& name_or_path, const std::string& models_dir) {
  return load_model_config(DataPaths::find_model_file(name_or_path, models_dir));
}

ModelConfig with_all_attention(const ModelConfig& m, AttentionKind kind) {
  ModelConfig out = m;
  out.layer_attention.assign(m.num_layers, kind);
  if (kind == AttentionKind::kda && !m.kda) {
    throw InputError(fmt::format("{}: cannot make every layer KDA: the model has no KDA configuration", m.source_file));
  }
  out.name = m.name + (kind == AttentionKind::mla ? "+all-mla" : "+all-kda");
  return out;
}

ModelConfig without_attnres(const ModelConfig& m) {
  ModelConfig out = m;
  out.residual = ResidualKind::plain;
  out.attn_res_block_layers = 0;
  out.name = m.name + "+no-attnres";
  return out;
}

ModelConfig with_first_layers(const ModelConfig& m, int layers) {
  if (layers < 1 || layers > m.num_layers) {
    throw InputError(fmt::format("{}: {} layers is outside 1..{}", m.source_file, layers, m.num_layers));
  }
  ModelConfig out = m;
  out.num_layers = layers;
  out.layer_attention.resize(static_cast<std::size_t>(layers));
  out.layer_mlp.resize(static_cast<std::size_t>(layers));
  return out;
}

}  // namespace k3
