// Block Attention Residuals: the mixer by hand, the stack against a literal transcription of the
// K3-SPEC §2 loop, the candidate counts of the published K3 config, and the plain residual.
#include "engine/reference/attnres.h"
#include "core/error.h"
#include "core/model_config.h"
#include "engine/random_tensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>

namespace k3::ref {
namespace {

using test::random_matrix;

AttnResMixer random_mixer(Eigen::Index h, std::mt19937& rng) {
  std::uniform_real_distribution<float> query(-1.0f, 1.0f), norm(0.5f, 1.5f);
  AttnResMixer m{Vector(h), Vector(h)};
  for (Eigen::Index i = 0; i < h; ++i) {
    m.query(i) = query(rng);
    m.key_norm(i) = norm(rng);
  }
  return m;
}

double relative_error(const Matrix& a, const Matrix& b) {
  return (a - b).cwiseAbs().maxCoeff() / b.cwiseAbs().maxCoeff();
}

TEST(AttnResMix, TwoCandidatesByHand) {
  Matrix v1(1, 3), v2(1, 3);
  v1 << 1, 2, 2;     // mean square 3
  v2 << -1, 0.5, 3;  // mean square 10.25/3
  AttnResMixer m{Vector(3), Vector(3)};
  m.query << 0.5, -1, 2;
  m.key_norm << 1, 2, 0.25;  // γ ⊙ w = (0.5, -2, 0.5)
  const double eps = 1e-5;
  const double s1 = (1 * 0.5 + 2 * -2 + 2 * 0.5) / std::sqrt(3 + eps);             // -2.5 / rms
  const double s2 = (-1 * 0.5 + 0.5 * -2 + 3 * 0.5) / std::sqrt(10.25 / 3 + eps);  // 0 / rms
  const double p1 = std::exp(s1) / (std::exp(s1) + std::exp(s2)), p2 = 1 - p1;
  const Matrix y = attnres_mix({&v1, &v2}, m, eps);
  EXPECT_NEAR(y(0, 0), p1 * 1 + p2 * -1, 1e-6);
  EXPECT_NEAR(y(0, 1), p1 * 2 + p2 * 0.5, 1e-6);
  EXPECT_NEAR(y(0, 2), p1 * 2 + p2 * 3, 1e-6);
}

// Scores see the RMS-normalised candidate, the mix the raw one: V and 2V score alike, mix to 1.5 V.
TEST(AttnResMix, ScoresAreScaleFreeButTheMixIsRaw) {
  std::mt19937 rng(12);
  const Matrix v = random_matrix(3, 7, rng);
  const Matrix doubled = 2 * v;
  const Matrix y = attnres_mix({&v, &doubled}, random_mixer(7, rng), 0.0);
  EXPECT_LE(relative_error(y, 1.5f * v), 1e-6);
}

TEST(AttnResMix, OneCandidateIsReturnedAsIs) {
  std::mt19937 rng(13);
  const Matrix v = random_matrix(2, 5, rng);
  EXPECT_EQ(attnres_mix({&v}, random_mixer(5, rng)), v);
}

struct Layer {
  AttnResMixer before_attention, before_mlp;
  Matrix attention, mlp;  // sublayer f(h) = tanh(h · Wᵀ), a stand-in for norm + attention / MLP
};

Matrix sublayer(const Matrix& h, const Matrix& w) { return (h * w.transpose()).array().tanh().matrix(); }

// K3-SPEC §2, line by line, with std::optional for "p = None".
Matrix spec_loop(const std::vector<Layer>& layers, const AttnResMixer& final_mixer, const Matrix& embedding,
                 int block) {
  std::vector<Matrix> blocks;
  std::optional<Matrix> p = embedding;
  auto mix = [&](const AttnResMixer& m) {
    std::vector<const Matrix*> v;
    for (const Matrix& b : blocks) v.push_back(&b);
    v.push_back(&*p);
    return attnres_mix(v, m, 1e-5);
  };
  for (int l = 0; l < int(layers.size()); ++l) {
    Matrix h = blocks.empty() ? *p : mix(layers[l].before_attention);
    if (l % block == 0) {
      blocks.push_back(*p);
      p.reset();
    }
    const Matrix a = sublayer(h, layers[l].attention);
    p = p ? Matrix(*p + a) : a;
    h = mix(layers[l].before_mlp);
    *p += sublayer(h, layers[l].mlp);
  }
  return mix(final_mixer);
}

TEST(AttnResStack, MatchesTheSpecLoop) {
  const int h = 9, block = 3;
  std::mt19937 rng(93);
  std::vector<Layer> layers;
  for (int l = 0; l < 8; ++l) {
    layers.push_back({random_mixer(h, rng), random_mixer(h, rng), random_matrix(h, h, rng), random_matrix(h, h, rng)});
  }
  const AttnResMixer final_mixer = random_mixer(h, rng);
  const Matrix embedding = random_matrix(5, h, rng);

  AttnResStack stack(ResidualKind::block_attnres, block, 1e-5);
  stack.begin(embedding);
  for (int l = 0; l < int(layers.size()); ++l) {
    stack.add_attention_output(l, sublayer(stack.attention_input(l, layers[l].before_attention), layers[l].attention));
    stack.add_mlp_output(sublayer(stack.mlp_input(l, layers[l].before_mlp), layers[l].mlp));
  }
  EXPECT_EQ(stack.stored_blocks(), 3);  // closed at 0, 3, 6
  EXPECT_LE(relative_error(stack.final_input(final_mixer), spec_loop(layers, final_mixer, embedding, block)), 1e-6);
}

TEST(AttnResStack, PlainResidualAddsEachSublayer) {
  const int h = 7;
  std::mt19937 rng(27);
  const Matrix embedding = random_matrix(3, h, rng);
  const AttnResMixer unused = random_mixer(h, rng);
  Matrix x = embedding;
  AttnResStack stack(ResidualKind::plain, 0, 1e-5);
  stack.begin(embedding);
  for (int l = 0; l < 5; ++l) {
    const Matrix wa = random_matrix(h, h, rng), wm = random_matrix(h, h, rng);
    x += sublayer(x, wa);
    stack.add_attention_output(l, sublayer(stack.attention_input(l, unused), wa));
    EXPECT_EQ(stack.candidates(), 0);
    x += sublayer(x, wm);
    stack.add_mlp_output(sublayer(stack.mlp_input(l, unused), wm));
  }
  EXPECT_LE(relative_error(stack.final_input(unused), x), 1e-6);
  EXPECT_EQ(stack.stored_blocks(), 0);
}

TEST(AttnResStack, CallsOutOfOrderAreRefused) {
  std::mt19937 rng(1);
  const AttnResMixer m = random_mixer(4, rng);
  AttnResStack stack(ResidualKind::block_attnres, 12, 1e-5);
  EXPECT_THROW(stack.attention_input(0, m), Error);  // before begin
  stack.begin(random_matrix(2, 4, rng));
  EXPECT_THROW(stack.mlp_input(0, m), Error);
  EXPECT_THROW(stack.attention_input(1, m), Error);
  stack.attention_input(0, m);
  EXPECT_THROW(stack.add_mlp_output(random_matrix(2, 4, rng)), Error);
}

// The published K3 config: 93 layers, blocks of 12. The stack's counts must agree with ModelConfig's
// (which the simulator uses), stay ≤ 9, and blocks must close exactly at ℓ = 0, 12, …, 84.
TEST(AttnResStack, KimiK3CandidateCountsMatchTheConfig) {
  const ModelConfig cfg = load_model_config(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/kimi-k3.json");
  ASSERT_EQ(cfg.residual, ResidualKind::block_attnres);
  ASSERT_EQ(cfg.attn_res_block_layers, 12);
  ASSERT_EQ(cfg.num_layers, 93);

  const int h = 5;  // the bookkeeping does not depend on the width
  std::mt19937 rng(7168);
  const AttnResMixer m = random_mixer(h, rng);
  AttnResStack stack(cfg);
  stack.begin(random_matrix(1, h, rng));
  std::vector<int> closed_at;
  int most = 0;
  for (int l = 0; l < cfg.num_layers; ++l) {
    const int stored = stack.stored_blocks();
    stack.attention_input(l, m);
    EXPECT_EQ(stack.candidates(), cfg.attnres_candidates_before_attention(l)) << "layer " << l;
    most = std::max(most, stack.candidates());
    if (stack.stored_blocks() > stored) closed_at.push_back(l);
    stack.add_attention_output(l, random_matrix(1, h, rng));
    stack.mlp_input(l, m);
    EXPECT_EQ(stack.candidates(), cfg.attnres_candidates_before_mlp(l)) << "layer " << l;
    most = std::max(most, stack.candidates());
    stack.add_mlp_output(random_matrix(1, h, rng));
  }
  stack.final_input(m);
  EXPECT_EQ(stack.candidates(), cfg.attnres_candidates_final());
  EXPECT_EQ(stack.candidates(), 9);
  EXPECT_EQ(most, 9);
  EXPECT_EQ(stack.stored_blocks(), 8);
  EXPECT_EQ(closed_at, (std::vector<int>{0, 12, 24, 36, 48, 60, 72, 84}));
}

}  // namespace
}  // namespace k3::ref
