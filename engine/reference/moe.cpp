#include "engine/reference/moe.h"

#include "core/error.h"
#include "engine/reference/basic_ops.h"
#include "engine/reference/shape_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

namespace k3::ref {
namespace {

using Index = Eigen::Index;

void check_empty(const Matrix& m, const char* name) {
  K3_CHECK(m.size() == 0, "MoE {} is {} but the spec does not use it", name, shape_of(m));
}

void check_router(const MoeSpec& s, const MoeWeights& w, const Matrix& x) {
  K3_CHECK(s.num_experts > 0 && s.top_k > 0 && s.top_k <= s.num_experts, "MoE spec has {} experts and top-k {}",
           s.num_experts, s.top_k);
  check_matrix(w.router, s.num_experts, x.cols(), "MoE router");
  const Index bias_values = s.score_correction_bias ? s.num_experts : 0;
  K3_CHECK(w.correction_bias.size() == bias_values, "MoE correction_bias has {} values, expected {}",
           w.correction_bias.size(), bias_values);
}

void check_experts(const ModelConfig& cfg, const MoeWeights& w) {
  const MoeSpec& s = *cfg.moe;
  const Index h = cfg.hidden_size, z = s.expert_input_dim(cfg.hidden_size), inter = s.expert_intermediate;
  K3_CHECK(
      Index(w.w1.size()) == s.num_experts && Index(w.w3.size()) == s.num_experts && Index(w.w2.size()) == s.num_experts,
      "MoE has {}/{}/{} w1/w3/w2 matrices for {} experts", w.w1.size(), w.w3.size(), w.w2.size(), s.num_experts);
  for (int e = 0; e < s.num_experts; ++e) {
    check_matrix(w.w1[e], inter, z, fmt::format("MoE expert {} w1", e));
    check_matrix(w.w3[e], inter, z, fmt::format("MoE expert {} w3", e));
    check_matrix(w.w2[e], z, inter, fmt::format("MoE expert {} w2", e));
  }
  if (s.latent_dim > 0) {
    check_matrix(w.latent_down, z, h, "MoE latent_down");
    check_matrix(w.latent_up, h, z, "MoE latent_up");
  } else {
    check_empty(w.latent_down, "latent_down");
    check_empty(w.latent_up, "latent_up");
  }
  const Index norm_values = s.latent_dim > 0 && s.latent_norm ? z : 0;
  K3_CHECK(w.latent_norm.size() == norm_values, "MoE latent_norm has {} values, expected {}", w.latent_norm.size(),
           norm_values);
  if (s.shared_intermediate > 0) {
    check_matrix(w.shared_gate, s.shared_intermediate, h, "MoE shared_gate");
    check_matrix(w.shared_up, s.shared_intermediate, h, "MoE shared_up");
    check_matrix(w.shared_down, h, s.shared_intermediate, "MoE shared_down");
  } else {
    check_empty(w.shared_gate, "shared_gate");
    check_empty(w.shared_up, "shared_up");
    check_empty(w.shared_down, "shared_down");
  }
}

// The model's gated MLP: SiTU for K3, SiLU (SwiGLU) otherwise.
Matrix glu(const ModelConfig& cfg, const Matrix& x, const Matrix& gate, const Matrix& up, const Matrix& down) {
  if (cfg.activation == Activation::situ) {
    K3_CHECK(cfg.situ_beta > 0 && cfg.situ_linear_beta > 0, "SiTU needs positive betas, got {} and {}", cfg.situ_beta,
             cfg.situ_linear_beta);
    return glu_mlp_situ(x, gate, up, down, cfg.situ_beta, cfg.situ_linear_beta);
  }
  return glu_mlp_silu(x, gate, up, down);
}

// Σ_e w_e · expert_e(z) per token, [T, z]. Tokens are grouped per expert so each expert runs once.
Matrix combine_experts(const ModelConfig& cfg, const MoeWeights& w, const Routing& routing, const Matrix& z) {
  std::vector<std::vector<std::pair<Index, double>>> users(cfg.moe->num_experts);  // (token, weight)
  for (Index t = 0; t < z.rows(); ++t) {
    for (size_t slot = 0; slot < routing.experts[t].size(); ++slot) {
      users[routing.experts[t][slot]].emplace_back(t, routing.weights[t][slot]);
    }
  }
  MatrixD sum = MatrixD::Zero(z.rows(), z.cols());
  for (size_t e = 0; e < users.size(); ++e) {
    if (users[e].empty()) continue;
    Matrix rows(Index(users[e].size()), z.cols());
    for (size_t i = 0; i < users[e].size(); ++i) rows.row(Index(i)) = z.row(users[e][i].first);
    const Matrix y = glu(cfg, rows, w.w1[e], w.w3[e], w.w2[e]);
    for (size_t i = 0; i < users[e].size(); ++i) {
      sum.row(users[e][i].first) += users[e][i].second * y.row(Index(i)).cast<double>();
    }
  }
  return sum.cast<float>();
}

}  // namespace

Routing route(const MoeSpec& spec, const MoeWeights& w, const Matrix& x) {
  check_router(spec, w, x);
  const int experts = spec.num_experts, k = spec.top_k;
  Routing routing;
  routing.experts.resize(x.rows());
  routing.weights.resize(x.rows());
  std::vector<float> score(experts), choice(experts);
  std::vector<int> order(experts);
  for (Index t = 0; t < x.rows(); ++t) {
    for (int e = 0; e < experts; ++e) {
      double logit = 0;
      for (Index i = 0; i < x.cols(); ++i) logit += double(x(t, i)) * w.router(e, i);
      score[e] = sigmoid(float(logit));  // fp32 logits and scores, as the HF gate computes them
      choice[e] = spec.score_correction_bias ? score[e] + w.correction_bias(e) : score[e];
      K3_CHECK(!std::isnan(choice[e]), "router score of expert {} for token {} is NaN", e, t);
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);  // ties: lower index first
    });
    // Renormalise over the selected experts (moe_renormalize / norm_topk_prob; HF skips it for top-1).
    double denominator = 1.0;
    if (k > 1) {
      denominator = 1e-20;
      for (int slot = 0; slot < k; ++slot) denominator += score[order[slot]];
    }
    for (int slot = 0; slot < k; ++slot) {
      const int e = order[slot];
      routing.experts[t].push_back(e);
      routing.weights[t].push_back(float(score[e] / denominator * spec.routed_scaling_factor));
    }
  }
  return routing;
}

Matrix moe_forward(const ModelConfig& cfg, const MoeWeights& w, const Matrix& x) {
  K3_CHECK(cfg.moe.has_value(), "model {} has no MoE spec", cfg.name);
  K3_CHECK(x.cols() == cfg.hidden_size, "MoE input is {}, expected [T, {}]", shape_of(x), cfg.hidden_size);
  const MoeSpec& s = *cfg.moe;
  check_experts(cfg, w);
  const Routing routing = route(s, w, x);
  const bool latent = s.latent_dim > 0;
  Matrix out = combine_experts(cfg, w, routing, latent ? linear(x, w.latent_down) : x);
  if (latent) {
    if (s.latent_norm) out = rmsnorm(out, w.latent_norm, cfg.rms_norm_eps);
    out = linear(out, w.latent_up);
  }
  if (s.shared_intermediate > 0) out += glu(cfg, x, w.shared_gate, w.shared_up, w.shared_down);
  return out;
}

}  // namespace k3::ref
