#include "core/parameters.h"

namespace k3 {

namespace {
long long ll(int v) { return static_cast<long long>(v); }
}  // namespace

BlockParams kda_layer_params(const ModelConfig& m) {
  BlockParams p;
  if (!m.kda) return p;
  const KdaSpec& k = *m.kda;
  const long long h = m.hidden_size, P = k.projection_dim(), r = k.gate_rank;
  p.linear += 3 * P * h;                                        // q, k, v projections
  p.linear += r * h + P * r;                                    // forget gate f_a, f_b (low rank)
  p.linear += ll(k.num_heads) * h;                              // beta projection
  p.linear += k.full_rank_output_gate ? P * h : r * h + P * r;  // output gate g
  p.linear += h * P;                                            // o_proj
  p.other += 3 * P * k.conv_kernel;                             // depthwise conv weights for q, k, v
  p.other += k.a_log_stored_values;                             // A_log
  p.other += P;                                                 // dt_bias
  p.other += k.head_dim;                                        // gated output RMSNorm weight (shared by heads)
  return p;
}

BlockParams mla_layer_params(const ModelConfig& m) {
  BlockParams p;
  const MlaSpec& a = m.mla;
  const long long h = m.hidden_size, H = a.num_heads;
  if (a.q_lora_rank > 0) {
    p.linear += ll(a.q_lora_rank) * h + H * a.qk_head_dim() * ll(a.q_lora_rank);
    p.other += a.q_lora_rank;  // q_a_layernorm
  } else {
    p.linear += H * a.qk_head_dim() * h;
  }
  p.linear += ll(a.cache_values_per_token()) * h;                            // kv_a_proj_with_mqa
  p.other += a.kv_lora_rank;                                                 // kv_a_layernorm
  p.linear += H * (a.qk_nope_head_dim + a.v_head_dim) * ll(a.kv_lora_rank);  // kv_b_proj
  p.linear += h * H * a.v_head_dim;                                          // o_proj
  if (a.output_gate) p.linear += H * a.v_head_dim * h;                       // g_proj
  return p;
}

BlockParams dense_mlp_params(const ModelConfig& m) { return {3 * ll(m.dense_intermediate) * m.hidden_size, 0}; }

BlockParams routed_expert_params(const ModelConfig& m) {
  if (!m.moe) return {};
  return {3 * ll(m.moe->expert_intermediate) * m.moe->expert_input_dim(m.hidden_size), 0};
}

BlockParams moe_shared_params(const ModelConfig& m) {
  if (!m.moe) return {};
  return {3 * ll(m.moe->shared_intermediate) * m.hidden_size, 0};
}

BlockParams moe_latent_params(const ModelConfig& m) {
  BlockParams p;
  if (!m.moe || m.moe->latent_dim == 0) return p;
  p.linear = 2 * ll(m.moe->latent_dim) * m.hidden_size;
  if (m.moe->latent_norm) p.other = m.moe->latent_dim;
  return p;
}

BlockParams moe_router_params(const ModelConfig& m) {
  if (!m.moe) return {};
  // The router stays in high precision in every published checkpoint: count it as "other".
  return {0, ll(m.moe->num_experts) * m.hidden_size + (m.moe->score_correction_bias ? m.moe->num_experts : 0)};
}

long long layer_norm_params(const ModelConfig& m) {
  const long long two_norms = 2 * ll(m.hidden_size);
  // Two mixers per layer, each with a pseudo-query and a key-norm weight.
  const long long attnres = m.residual == ResidualKind::block_attnres ? 4 * ll(m.hidden_size) : 0;
  return two_norms + attnres;
}

long long final_norm_params(const ModelConfig& m) {
  return m.hidden_size + (m.residual == ResidualKind::block_attnres ? 2 * ll(m.hidden_size) : 0);
}

long long embedding_params(const ModelConfig& m) { return ll(m.vocab_size) * m.hidden_size; }
long long lm_head_params(const ModelConfig& m) { return m.tie_word_embeddings ? 0 : ll(m.vocab_size) * m.hidden_size; }

long long ParameterCounts::total() const {
  return embedding + lm_head + attention_mla + attention_kda + dense_mlp + moe_routed + moe_non_routed + norms;
}

ParameterCounts count_parameters(const ModelConfig& m) {
  ParameterCounts c;
  c.embedding = embedding_params(m);
  c.lm_head = lm_head_params(m);
  c.attention_mla = m.count_layers(AttentionKind::mla) * mla_layer_params(m).total();
  c.attention_kda = m.count_layers(AttentionKind::kda) * kda_layer_params(m).total();
  c.dense_mlp = m.count_layers(MlpKind::dense) * dense_mlp_params(m).total();
  const long long moe_layers = m.count_layers(MlpKind::moe);
  long long routed_active = 0;
  if (m.moe) {
    c.moe_routed = moe_layers * m.moe->num_experts * routed_expert_params(m).total();
    c.moe_non_routed =
        moe_layers * (moe_router_params(m).total() + moe_shared_params(m).total() + moe_latent_params(m).total());
    routed_active = moe_layers * m.moe->top_k * routed_expert_params(m).total();
  }
  c.norms = m.num_layers * layer_norm_params(m) + final_norm_params(m);
  c.active_per_token = c.total() - c.embedding - c.moe_routed + routed_active;
  return c;
}

}  // namespace k3
