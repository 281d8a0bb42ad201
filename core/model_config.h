// A model's architecture, read from a Hugging Face config.json exactly as published.
// Supported forms (see docs/models.md):
//   - Kimi K3: top-level "text_config" with model_type "kimi_linear" and K3 fields
//     (gate_lower_bound, use_full_rank_gate, attn_res_block_size, routed_expert_hidden_size, SiTU);
//   - Kimi Linear (model_type "kimi_linear", flat);
//   - DeepSeek-V3 / Kimi K2 (model_type "deepseek_v3" / "kimi_k2", DeepSeek-V3 field names).
// Layers are indexed 0-based here; op names use 1-based numbers (L001 = index 0), as the
// published "full_attn_layers" lists do.
#pragma once

#include "core/dtype.h"

#include <optional>
#include <string>
#include <vector>

namespace k3 {

enum class AttentionKind { mla, kda };
enum class MlpKind { dense, moe };
enum class Activation { silu, situ };
enum class KdaGateForm { softplus, bounded_sigmoid };
enum class ResidualKind { plain, block_attnres };

std::string to_string(AttentionKind k);
std::string to_string(KdaGateForm f);

struct MlaSpec {
  int num_heads = 0;
  int q_lora_rank = 0;  // 0: direct q_proj (Kimi Linear)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool rotary = true;        // false for NoPE (K3, Kimi Linear): the rope dims are never rotated
  bool output_gate = false;  // K3: y = W_o(attn ⊙ sigmoid(W_g x))

  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // Values cached per token in the absorbed form: latent c plus the shared rope key.
  int cache_values_per_token() const { return kv_lora_rank + qk_rope_head_dim; }
};

struct KdaSpec {
  int num_heads = 0;
  int head_dim = 0;
  int conv_kernel = 0;  // depthwise causal short conv; the decode cache keeps conv_kernel-1 inputs
  KdaGateForm gate_form = KdaGateForm::softplus;
  double gate_lower_bound = 0;         // only for bounded_sigmoid (K3: -5)
  bool full_rank_output_gate = false;  // K3: W_g is hidden -> P; Kimi Linear: hidden -> rank -> P
  int gate_rank = 0;                   // rank of the low-rank forget gate (and output gate when low rank)
  int a_log_stored_values = 0;         // A_log as stored: K3 pads 96 heads to 128 values

  int projection_dim() const { return num_heads * head_dim; }  // P
};

struct MoeSpec {
  int num_experts = 0;
  int top_k = 0;
  int expert_intermediate = 0;  // moe_intermediate_size
  int latent_dim = 0;           // routed_expert_hidden_size; 0 = experts work at hidden size
  bool latent_norm = false;     // Stable LatentMoE: RMSNorm on the aggregated latent output
  int shared_intermediate = 0;  // all shared experts fused: num_shared_experts * moe_intermediate
  double routed_scaling_factor = 1.0;
  bool score_correction_bias = false;  // noaux_tc: e_score_correction_bias[num_experts]
  int first_k_dense = 0;               // layers [0, first_k_dense) use a dense MLP

  // Width the experts consume: the latent when present, else the hidden size.
  int expert_input_dim(int hidden) const { return latent_dim > 0 ? latent_dim : hidden; }
};

struct ModelConfig {
  std::string name;         // from the file name or an explicit scenario label
  std::string source_file;  // where it was read from
  std::string model_type;   // as published: kimi_linear, kimi_k2, deepseek_v3

  int hidden_size = 0;
  int num_layers = 0;
  int vocab_size = 0;
  bool tie_word_embeddings = false;
  double rms_norm_eps = 1e-6;  // when the config has none (HF DeepSeek-V3 default)
  long long max_position_embeddings = 0;

  Activation activation = Activation::silu;
  double situ_beta = 0;         // SiTU gate beta (K3: 4)
  double situ_linear_beta = 0;  // SiTU linear beta (K3: 25)
  int dense_intermediate = 0;   // intermediate_size of the dense MLP layers

  ResidualKind residual = ResidualKind::plain;
  int attn_res_block_layers = 0;  // Block AttnRes block size, counted in layers (K3: 12)

  std::vector<AttentionKind> layer_attention;  // [num_layers]
  std::vector<MlpKind> layer_mlp;              // [num_layers]

  MlaSpec mla;
  std::optional<KdaSpec> kda;
  std::optional<MoeSpec> moe;

  // Checkpoint storage as published: routed experts may be quantised separately.
  StorageFormat weight_format = StorageFormat::bf16;         // linear layers outside the experts
  StorageFormat routed_expert_format = StorageFormat::bf16;  // routed expert weights
  bool quantize_attention_and_dense = false;  // true when weight_format also covers attention/dense (DeepSeek FP8)

  int count_layers(AttentionKind k) const;
  int count_layers(MlpKind k) const;
  // Number of AttnRes blocks closed before the given layer's attention (ℓ % block == 0 closes one).
  int attnres_candidates_before_attention(int layer) const;
  int attnres_candidates_before_mlp(int layer) const;
  int attnres_candidates_final() const;
};

// Reads config.json; every error names the file and the key path ("text_config.num_experts").
ModelConfig load_model_config(const std::string& path);
ModelConfig parse_model_config(const std::string& json_text, const std::string& origin);
// Resolves a name ("kimi-k3") or a path; names are looked up as <models_dir>/<name>.json.
ModelConfig load_model_config_by_name(const std::string& name_or_path, const std::string& models_dir);

// Counterfactual variants used by claim checks and break-even (each returns a modified copy).
ModelConfig with_all_attention(const ModelConfig& m, AttentionKind kind);  // every layer MLA (or KDA)
ModelConfig without_attnres(const ModelConfig& m);                         // plain x + f(x) residual
// The first `layers` layers (1..num_layers), as the engine slices a config.json (its --layers);
// InputError otherwise.
ModelConfig with_first_layers(const ModelConfig& m, int layers);

}  // namespace k3
