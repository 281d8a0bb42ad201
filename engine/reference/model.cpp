#include "engine/reference/model.h"

#include "core/error.h"
#include "engine/reference/basic_ops.h"

#include <algorithm>

namespace k3::ref {

// The MLA latent norms use the KimiRMSNorm default (1e-6) in the reference code, not rms_norm_eps.
constexpr double kMlaLatentNormEps = 1e-6;

ModelState ModelState::empty(const ModelConfig& config) {
  ModelState s;
  s.layers.resize(config.num_layers);
  for (int l = 0; l < config.num_layers; ++l) {
    if (config.layer_attention[l] == AttentionKind::kda) {
      s.layers[l].kda = KdaState::zeros(*config.kda);
    } else {
      s.layers[l].mla.latent = Matrix(0, config.mla.cache_values_per_token());
    }
  }
  return s;
}

ReferenceModel::ReferenceModel(ModelConfig config, ModelWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
  const ModelConfig& m = config_;
  K3_CHECK(static_cast<int>(weights_.layers.size()) == m.num_layers, "{} layer weights for a {}-layer config",
           weights_.layers.size(), m.num_layers);
  K3_CHECK(weights_.embed.rows() == m.vocab_size && weights_.embed.cols() == m.hidden_size,
           "embedding is [{}, {}], expected [{}, {}]", weights_.embed.rows(), weights_.embed.cols(), m.vocab_size,
           m.hidden_size);
  for (int l = 0; l < m.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    const bool kda = m.layer_attention[l] == AttentionKind::kda;
    K3_CHECK(kda ? w.kda.has_value() && !w.mla : w.mla.has_value() && !w.kda, "layer {} needs {} weights", l,
             kda ? "KDA" : "MLA");
    const bool dense = m.layer_mlp[l] == MlpKind::dense;
    K3_CHECK(dense ? w.dense.has_value() && !w.moe : w.moe.has_value() && !w.dense, "layer {} needs {} MLP weights", l,
             dense ? "dense" : "MoE");
  }
}

Matrix ReferenceModel::forward(const std::vector<int32_t>& tokens, ModelState& state, ForwardTrace* trace) const {
  const ModelConfig& m = config_;
  K3_CHECK(!tokens.empty(), "forward needs at least one token");
  K3_CHECK(static_cast<int>(state.layers.size()) == m.num_layers, "state has {} layers, model {}", state.layers.size(),
           m.num_layers);
  const Eigen::Index T = static_cast<Eigen::Index>(tokens.size());
  Matrix x(T, m.hidden_size);
  for (Eigen::Index t = 0; t < T; ++t) {
    const int32_t id = tokens[t];
    if (id < 0 || id >= m.vocab_size) {
      throw InputError(fmt::format("token id {} is outside the vocabulary [0, {})", id, m.vocab_size));
    }
    x.row(t) = weights_.embed.row(id);
  }
  if (trace) *trace = ForwardTrace{};

  AttnResStack stack(m);
  stack.begin(x);
  for (int l = 0; l < m.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    LayerState& s = state.layers[l];
    const Matrix a_in = rmsnorm(stack.attention_input(l, w.attn_res), w.input_norm, m.rms_norm_eps);
    Matrix a_out;
    if (w.kda) {
      a_out = kda_layer(*m.kda, m.rms_norm_eps, *w.kda, a_in, s.kda, T > 1 ? KdaMode::chunked : KdaMode::recurrent);
    } else {
      a_out = mla_absorbed(m.mla, kMlaLatentNormEps, *w.mla, a_in, s.mla);
    }
    stack.add_attention_output(l, a_out);
    const Matrix m_in = rmsnorm(stack.mlp_input(l, w.mlp_res), w.post_norm, m.rms_norm_eps);
    Matrix m_out;
    if (w.dense) {
      m_out = m.activation == Activation::situ
                  ? glu_mlp_situ(m_in, w.dense->gate, w.dense->up, w.dense->down, m.situ_beta, m.situ_linear_beta)
                  : glu_mlp_silu(m_in, w.dense->gate, w.dense->up, w.dense->down);
    } else {
      m_out = moe_forward(m, *w.moe, m_in);
    }
    stack.add_mlp_output(m_out);
    if (trace) {
      trace->attention_in.push_back(a_in);
      trace->attention_out.push_back(std::move(a_out));
      trace->mlp_in.push_back(m_in);
      trace->mlp_out.push_back(std::move(m_out));
    }
  }
  const Matrix hidden = rmsnorm(stack.final_input(weights_.final_res), weights_.final_norm, m.rms_norm_eps);
  if (trace) trace->final_hidden = hidden;
  state.tokens += T;
  return linear(hidden, weights_.lm_head);
}

std::vector<int32_t> ReferenceModel::generate(const std::vector<int32_t>& prompt, int max_new_tokens) const {
  ModelState state = ModelState::empty(config_);
  std::vector<int32_t> out;
  if (max_new_tokens <= 0) return out;
  Matrix logits = forward(prompt, state);
  for (int i = 0; i < max_new_tokens; ++i) {
    Eigen::Index best = 0;
    logits.row(logits.rows() - 1).maxCoeff(&best);
    out.push_back(static_cast<int32_t>(best));
    if (i + 1 < max_new_tokens) logits = forward({static_cast<int32_t>(best)}, state);
  }
  return out;
}

}  // namespace k3::ref
