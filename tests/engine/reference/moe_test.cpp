// Router and MoE reference: hand-made router scores (bias, renormalisation, ties), the forward pass
// against a naive per-token loop written here, and the latent path against the plain one.
#include "engine/reference/moe.h"
#include "core/error.h"
#include "engine/random_tensors.h"
#include "engine/reference/basic_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace k3::ref {
namespace {

using test::random_matrix;

Vector random_vector(Eigen::Index n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Vector v(n);
  for (Eigen::Index i = 0; i < n; ++i) v(i) = dist(rng);
  return v;
}

double sigmoid_d(double a) { return 1.0 / (1.0 + std::exp(-a)); }

// A router over h = 1 with x = 1, so the logits are the router weights themselves.
MoeSpec router_spec(int experts, int top_k, double scaling) {
  MoeSpec s;
  s.num_experts = experts;
  s.top_k = top_k;
  s.routed_scaling_factor = scaling;
  s.score_correction_bias = true;
  return s;
}

MoeWeights router_weights(const std::vector<float>& logits, const std::vector<float>& bias) {
  MoeWeights w;
  w.router = Matrix(Eigen::Index(logits.size()), 1);
  w.correction_bias = Vector(Eigen::Index(bias.size()));
  for (size_t e = 0; e < logits.size(); ++e) w.router(Eigen::Index(e), 0) = logits[e];
  for (size_t e = 0; e < bias.size(); ++e) w.correction_bias(Eigen::Index(e)) = bias[e];
  return w;
}

const Matrix kOne = Matrix::Constant(1, 1, 1.0f);

TEST(MoeRouter, BiasChangesTheSelectionButNotTheWeights) {
  const MoeSpec spec = router_spec(5, 2, 1.0);
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, -1.0f, 0.25f};
  const Routing plain = route(spec, router_weights(logits, {0, 0, 0, 0, 0}), kOne);
  EXPECT_EQ(plain.experts[0], (std::vector<int>{0, 1}));

  // Expert 2 has the third-best score but the bias lifts it to the top: σ(0.5) + 0.9 > σ(2).
  const Routing biased = route(spec, router_weights(logits, {0, 0, 0.9f, 0, 0}), kOne);
  EXPECT_EQ(biased.experts[0], (std::vector<int>{2, 0}));
  const double s0 = sigmoid_d(2.0), s2 = sigmoid_d(0.5);
  EXPECT_NEAR(biased.weights[0][0], s2 / (s0 + s2), 1e-6);  // unbiased scores, renormalised
  EXPECT_NEAR(biased.weights[0][1], s0 / (s0 + s2), 1e-6);
}

TEST(MoeRouter, WeightsAreRenormalisedThenScaled) {
  const std::vector<float> logits = {-0.3f, 1.7f, 0.9f, -2.1f, 0.4f, 1.1f, -0.7f};
  const Routing r = route(router_spec(7, 3, 2.446), router_weights(logits, std::vector<float>(7, 0.1f)), kOne);
  EXPECT_EQ(r.experts[0], (std::vector<int>{1, 5, 2}));
  const double sum = sigmoid_d(1.7) + sigmoid_d(1.1) + sigmoid_d(0.9);
  EXPECT_NEAR(r.weights[0][0], sigmoid_d(1.7) / sum * 2.446, 1e-6);
  EXPECT_NEAR(r.weights[0][1], sigmoid_d(1.1) / sum * 2.446, 1e-6);
  EXPECT_NEAR(r.weights[0][2], sigmoid_d(0.9) / sum * 2.446, 1e-6);
  EXPECT_NEAR(r.weights[0][0] + r.weights[0][1] + r.weights[0][2], 2.446, 1e-5);
}

TEST(MoeRouter, TopOneIsNotRenormalised) {
  const Routing r = route(router_spec(3, 1, 2.0), router_weights({0.3f, -0.2f, 0.1f}, {0, 0, 0}), kOne);
  EXPECT_EQ(r.experts[0], (std::vector<int>{0}));
  EXPECT_NEAR(r.weights[0][0], sigmoid_d(0.3) * 2.0, 1e-6);
}

TEST(MoeRouter, TiesGoToTheLowerIndex) {
  // Experts 1, 2 and 4 tie on s + bias; two slots are left after expert 3.
  const Routing r =
      route(router_spec(6, 3, 1.0), router_weights({0.5f, 0.5f, 0.5f, 0.8f, 0.5f, 0.5f}, {-1, 0, 0, 0, 0, -1}), kOne);
  EXPECT_EQ(r.experts[0], (std::vector<int>{3, 1, 2}));
}

TEST(MoeRouter, WithoutCorrectionBiasSelectsOnScores) {
  MoeSpec spec = router_spec(4, 2, 1.0);
  spec.score_correction_bias = false;
  MoeWeights w = router_weights({0.1f, 0.9f, -0.4f, 0.6f}, {});
  const Routing r = route(spec, w, kOne);
  EXPECT_EQ(r.experts[0], (std::vector<int>{1, 3}));
  w.correction_bias = Vector::Constant(4, 0.5f);  // the spec has none: refused, not ignored
  EXPECT_THROW(route(spec, w, kOne), Error);
}

// ---- forward pass -------------------------------------------------------------------------------

constexpr int kHidden = 13;

ModelConfig moe_config(Activation act, int latent_dim, bool latent_norm, double scaling) {
  ModelConfig cfg;
  cfg.name = "moe-test";
  cfg.hidden_size = kHidden;
  cfg.rms_norm_eps = 1e-5;
  cfg.activation = act;
  if (act == Activation::situ) {
    cfg.situ_beta = 4;
    cfg.situ_linear_beta = 25;
  }
  MoeSpec s;
  s.num_experts = 9;
  s.top_k = 3;
  s.expert_intermediate = 7;
  s.latent_dim = latent_dim;
  s.latent_norm = latent_norm;
  s.shared_intermediate = 5;
  s.routed_scaling_factor = scaling;
  s.score_correction_bias = true;
  cfg.moe = s;
  return cfg;
}

MoeWeights random_moe_weights(const ModelConfig& cfg, std::mt19937& rng) {
  const MoeSpec& s = *cfg.moe;
  const int h = cfg.hidden_size, z = s.expert_input_dim(h), inter = s.expert_intermediate;
  MoeWeights w;
  w.router = random_matrix(s.num_experts, h, rng, 0.5f);
  w.correction_bias = random_vector(s.num_experts, rng, -0.05f, 0.05f);
  for (int e = 0; e < s.num_experts; ++e) {
    w.w1.push_back(random_matrix(inter, z, rng, 0.7f));
    w.w3.push_back(random_matrix(inter, z, rng, 0.7f));
    w.w2.push_back(random_matrix(z, inter, rng, 0.7f));
  }
  if (s.latent_dim > 0) {
    w.latent_down = random_matrix(z, h, rng, 0.5f);
    w.latent_up = random_matrix(h, z, rng, 0.5f);
    if (s.latent_norm) w.latent_norm = random_vector(z, rng, 0.5f, 1.5f);
  }
  w.shared_gate = random_matrix(s.shared_intermediate, h, rng, 0.7f);
  w.shared_up = random_matrix(s.shared_intermediate, h, rng, 0.7f);
  w.shared_down = random_matrix(h, s.shared_intermediate, rng, 0.7f);
  return w;
}

double act(const ModelConfig& cfg, double gate, double up) {
  if (cfg.activation == Activation::situ) {
    return 4 * std::tanh(gate / 4) * sigmoid_d(gate) * 25 * std::tanh(up / 25);
  }
  return gate * sigmoid_d(gate) * up;
}

// down · act(gate · v, up · v) for one vector, all in double.
std::vector<double> naive_glu(const ModelConfig& cfg, const std::vector<double>& v, const Matrix& gate,
                              const Matrix& up, const Matrix& down) {
  std::vector<double> hidden(gate.rows()), out(down.rows(), 0.0);
  for (Eigen::Index j = 0; j < gate.rows(); ++j) {
    double a = 0, u = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      a += gate(j, Eigen::Index(i)) * v[i];
      u += up(j, Eigen::Index(i)) * v[i];
    }
    hidden[j] = act(cfg, a, u);
  }
  for (Eigen::Index o = 0; o < down.rows(); ++o) {
    for (Eigen::Index j = 0; j < down.cols(); ++j) out[o] += down(o, j) * hidden[j];
  }
  return out;
}

std::vector<double> mat_vec(const Matrix& m, const std::vector<double>& v) {
  std::vector<double> out(m.rows(), 0.0);
  for (Eigen::Index o = 0; o < m.rows(); ++o) {
    for (Eigen::Index i = 0; i < m.cols(); ++i) out[o] += m(o, i) * v[i];
  }
  return out;
}

// The whole MoE one token at a time, following K3-SPEC §5 literally (routing from route()).
Matrix naive_moe(const ModelConfig& cfg, const MoeWeights& w, const Matrix& x) {
  const MoeSpec& s = *cfg.moe;
  const Routing routing = route(s, w, x);
  Matrix out(x.rows(), x.cols());
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    std::vector<double> xt(x.cols());
    for (Eigen::Index i = 0; i < x.cols(); ++i) xt[i] = x(t, i);
    const std::vector<double> z = s.latent_dim > 0 ? mat_vec(w.latent_down, xt) : xt;
    std::vector<double> routed(z.size(), 0.0);
    for (int slot = 0; slot < s.top_k; ++slot) {
      const int e = routing.experts[t][slot];
      const std::vector<double> y = naive_glu(cfg, z, w.w1[e], w.w3[e], w.w2[e]);
      for (size_t i = 0; i < y.size(); ++i) routed[i] += routing.weights[t][slot] * y[i];
    }
    if (s.latent_dim > 0) {
      if (s.latent_norm) {
        double ms = 0;
        for (double v : routed) ms += v * v;
        const double inv = 1.0 / std::sqrt(ms / double(routed.size()) + cfg.rms_norm_eps);
        for (size_t i = 0; i < routed.size(); ++i) routed[i] *= inv * w.latent_norm(Eigen::Index(i));
      }
      routed = mat_vec(w.latent_up, routed);
    }
    const std::vector<double> shared = naive_glu(cfg, xt, w.shared_gate, w.shared_up, w.shared_down);
    for (Eigen::Index i = 0; i < x.cols(); ++i) out(t, i) = float(routed[i] + shared[i]);
  }
  return out;
}

double relative_error(const Matrix& a, const Matrix& b) {
  return (a - b).cwiseAbs().maxCoeff() / b.cwiseAbs().maxCoeff();
}

TEST(MoeForward, KimiLinearFormMatchesNaiveLoop) {
  const ModelConfig cfg = moe_config(Activation::silu, 0, false, 2.446);
  std::mt19937 rng(2446);
  const MoeWeights w = random_moe_weights(cfg, rng);
  const Matrix x = random_matrix(5, kHidden, rng);
  EXPECT_LE(relative_error(moe_forward(cfg, w, x), naive_moe(cfg, w, x)), 1e-5);
}

TEST(MoeForward, StableLatentFormMatchesNaiveLoop) {
  const ModelConfig cfg = moe_config(Activation::situ, 9, true, 1.0);
  std::mt19937 rng(896);
  const MoeWeights w = random_moe_weights(cfg, rng);
  const Matrix x = random_matrix(5, kHidden, rng);
  EXPECT_LE(relative_error(moe_forward(cfg, w, x), naive_moe(cfg, w, x)), 1e-5);
}

// With z = h, identity down/up projections and no latent norm, the latent path is the plain path.
TEST(MoeForward, LatentPathWithIdentityProjectionsEqualsPlainPath) {
  const ModelConfig plain = moe_config(Activation::situ, 0, false, 1.7);
  const ModelConfig latent = moe_config(Activation::situ, kHidden, false, 1.7);
  std::mt19937 rng(17);
  MoeWeights w = random_moe_weights(plain, rng);
  const Matrix x = random_matrix(4, kHidden, rng);
  const Matrix y_plain = moe_forward(plain, w, x);
  w.latent_down = Matrix::Identity(kHidden, kHidden);
  w.latent_up = Matrix::Identity(kHidden, kHidden);
  EXPECT_LE(relative_error(moe_forward(latent, w, x), y_plain), 1e-6);
}

// The latent norm makes the routed output invariant to the routed scale (exactly so with eps = 0).
TEST(MoeForward, LatentNormAbsorbsTheRoutedScale) {
  ModelConfig a = moe_config(Activation::situ, 9, true, 1.0);
  ModelConfig b = moe_config(Activation::situ, 9, true, 3.0);
  a.rms_norm_eps = b.rms_norm_eps = 0;
  std::mt19937 rng(3);
  const MoeWeights w = random_moe_weights(a, rng);
  const Matrix x = random_matrix(3, kHidden, rng);
  EXPECT_LE(relative_error(moe_forward(b, w, x), moe_forward(a, w, x)), 1e-6);
}

TEST(MoeForward, MissingExpertWeightsAreRefused) {
  const ModelConfig cfg = moe_config(Activation::silu, 0, false, 1.0);
  std::mt19937 rng(4);
  MoeWeights w = random_moe_weights(cfg, rng);
  w.w2.pop_back();
  EXPECT_THROW(moe_forward(cfg, w, random_matrix(1, kHidden, rng)), Error);
}

}  // namespace
}  // namespace k3::ref
