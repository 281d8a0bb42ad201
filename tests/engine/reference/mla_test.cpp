// MLA reference: the absorbed (decode) form against the expanded form, prefill against token-by-token
// decode, causality, the cache layout and the refusal of rotary specs.
#include "engine/reference/mla.h"
#include "core/error.h"
#include "engine/random_tensors.h"
#include "engine/reference/basic_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <random>
#include <string>

namespace k3::ref {
namespace {

constexpr double kLatentEps = 1e-6;

using test::random_matrix;

Vector random_norm_weight(Eigen::Index n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  Vector v(n);
  for (Eigen::Index i = 0; i < n; ++i) v(i) = dist(rng);
  return v;
}

// Odd sizes throughout; dn != dv so a swapped k/v split cannot pass.
MlaSpec small_spec(int q_lora_rank, bool output_gate) {
  MlaSpec s;
  s.num_heads = 3;
  s.q_lora_rank = q_lora_rank;
  s.kv_lora_rank = 7;
  s.qk_nope_head_dim = 5;
  s.qk_rope_head_dim = 3;
  s.v_head_dim = 9;
  s.rotary = false;
  s.output_gate = output_gate;
  return s;
}

constexpr int kHidden = 11;

MlaWeights random_weights(const MlaSpec& s, std::mt19937& rng) {
  const int h = kHidden, heads = s.num_heads, qk = s.qk_head_dim();
  MlaWeights w;
  if (s.q_lora_rank > 0) {
    w.q_a = random_matrix(s.q_lora_rank, h, rng, 0.5f);
    w.q_a_norm = random_norm_weight(s.q_lora_rank, rng);
    w.q_b = random_matrix(heads * qk, s.q_lora_rank, rng, 0.5f);
  } else {
    w.q_proj = random_matrix(heads * qk, h, rng, 0.5f);
  }
  w.kv_a = random_matrix(s.kv_lora_rank + s.qk_rope_head_dim, h, rng, 0.5f);
  w.kv_a_norm = random_norm_weight(s.kv_lora_rank, rng);
  w.kv_b = random_matrix(heads * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank, rng, 0.5f);
  if (s.output_gate) w.g_proj = random_matrix(heads * s.v_head_dim, h, rng, 0.5f);
  w.o_proj = random_matrix(h, heads * s.v_head_dim, rng, 0.5f);
  return w;
}

double relative_error(const Matrix& a, const Matrix& b) {
  return (a - b).cwiseAbs().maxCoeff() / b.cwiseAbs().maxCoeff();
}

struct Variant {
  int q_lora_rank;
  bool output_gate;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << "q_lora " << v.q_lora_rank << ", gate " << v.output_gate; }

class MlaForms : public ::testing::TestWithParam<Variant> {};

TEST_P(MlaForms, AbsorbedEqualsNaiveOverPrefillAndDecode) {
  const MlaSpec spec = small_spec(GetParam().q_lora_rank, GetParam().output_gate);
  std::mt19937 rng(20260901);
  const MlaWeights w = random_weights(spec, rng);
  MlaCache naive_cache, absorbed_cache;

  const Matrix prompt = random_matrix(7, kHidden, rng);
  EXPECT_LE(relative_error(mla_absorbed(spec, kLatentEps, w, prompt, absorbed_cache),
                           mla_naive(spec, kLatentEps, w, prompt, naive_cache)),
            1e-5);
  for (int step = 0; step < 3; ++step) {
    const Matrix token = random_matrix(1, kHidden, rng);
    EXPECT_LE(relative_error(mla_absorbed(spec, kLatentEps, w, token, absorbed_cache),
                             mla_naive(spec, kLatentEps, w, token, naive_cache)),
              1e-5)
        << "decode step " << step;
  }
  ASSERT_EQ(naive_cache.latent.rows(), 10);
  EXPECT_EQ(naive_cache.latent.cols(), spec.kv_lora_rank + spec.qk_rope_head_dim);
  EXPECT_EQ(naive_cache.latent, absorbed_cache.latent);
}

TEST_P(MlaForms, PrefillEqualsSingleTokenSteps) {
  const MlaSpec spec = small_spec(GetParam().q_lora_rank, GetParam().output_gate);
  std::mt19937 rng(77);
  const MlaWeights w = random_weights(spec, rng);
  const Matrix x = random_matrix(6, kHidden, rng);
  for (auto form : {&mla_naive, &mla_absorbed}) {
    MlaCache prefill_cache, step_cache;
    const Matrix prefill = form(spec, kLatentEps, w, x, prefill_cache);
    for (Eigen::Index t = 0; t < x.rows(); ++t) {
      const Matrix step = form(spec, kLatentEps, w, Matrix(x.row(t)), step_cache);
      EXPECT_LE(relative_error(step, Matrix(prefill.row(t))), 1e-6) << "token " << t;
    }
    EXPECT_LE(relative_error(step_cache.latent, prefill_cache.latent), 1e-6);  // GEMV vs GEMM rounding
  }
}

INSTANTIATE_TEST_SUITE_P(QLoraAndGate, MlaForms,
                         ::testing::Values(Variant{0, false}, Variant{0, true}, Variant{5, false}, Variant{5, true}),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(info.param.q_lora_rank > 0 ? "QLora" : "QProj") +
                                  (info.param.output_gate ? "Gated" : "Ungated");
                         });

TEST(Mla, LaterTokensDoNotChangeEarlierOutputs) {
  const MlaSpec spec = small_spec(5, true);
  std::mt19937 rng(5);
  const MlaWeights w = random_weights(spec, rng);
  const Matrix x = random_matrix(7, kHidden, rng);
  Matrix changed = x;
  changed.row(4) = random_matrix(1, kHidden, rng);
  for (auto form : {&mla_naive, &mla_absorbed}) {
    MlaCache a, b;
    const Matrix ya = form(spec, kLatentEps, w, x, a), yb = form(spec, kLatentEps, w, changed, b);
    EXPECT_LE(relative_error(Matrix(yb.topRows(4)), Matrix(ya.topRows(4))), 1e-7);
    for (Eigen::Index t = 4; t < 7; ++t) EXPECT_GT((ya.row(t) - yb.row(t)).cwiseAbs().maxCoeff(), 1e-4);
  }
}

// One token with an empty cache attends only to itself: per head the output is its own value,
// v_h = W_kvb[value rows of h] · RMSNorm(c), gated and projected. Checks the k_nope|v split by hand.
TEST(Mla, SingleTokenReturnsItsOwnValue) {
  const MlaSpec spec = small_spec(0, true);
  std::mt19937 rng(11);
  const MlaWeights w = random_weights(spec, rng);
  const Matrix x = random_matrix(1, kHidden, rng);
  MlaCache cache;
  const Matrix y = mla_naive(spec, kLatentEps, w, x, cache);

  const int r = spec.kv_lora_rank, dn = spec.qk_nope_head_dim, dv = spec.v_head_dim;
  const Matrix kv = linear(x, w.kv_a);
  const Matrix c = rmsnorm(Matrix(kv.leftCols(r)), w.kv_a_norm, kLatentEps);
  const Matrix gate = linear(x, w.g_proj);
  Matrix attn(1, spec.num_heads * dv);
  for (int h = 0; h < spec.num_heads; ++h) {
    for (int e = 0; e < dv; ++e) {
      double v = 0;
      for (int i = 0; i < r; ++i) v += double(w.kv_b(h * (dn + dv) + dn + e, i)) * c(0, i);
      attn(0, h * dv + e) = float(v) * sigmoid(gate(0, h * dv + e));
    }
  }
  EXPECT_LE(relative_error(y, linear(attn, w.o_proj)), 1e-6);
}

TEST(Mla, CacheHoldsNormalisedLatentAndUnrotatedRopeKey) {
  const MlaSpec spec = small_spec(5, false);
  std::mt19937 rng(3);
  const MlaWeights w = random_weights(spec, rng);
  const Matrix x = random_matrix(4, kHidden, rng);
  MlaCache cache;
  mla_absorbed(spec, kLatentEps, w, x, cache);
  const Matrix kv = linear(x, w.kv_a);
  const int r = spec.kv_lora_rank;
  EXPECT_LE(relative_error(Matrix(cache.latent.leftCols(r)), rmsnorm(Matrix(kv.leftCols(r)), w.kv_a_norm, kLatentEps)),
            1e-7);
  EXPECT_EQ(Matrix(cache.latent.rightCols(spec.qk_rope_head_dim)), Matrix(kv.rightCols(spec.qk_rope_head_dim)));
}

TEST(Mla, RotarySpecIsRefused) {
  MlaSpec spec = small_spec(0, false);
  std::mt19937 rng(1);
  const MlaWeights w = random_weights(spec, rng);
  spec.rotary = true;
  MlaCache cache;
  const Matrix x = random_matrix(2, kHidden, rng);
  EXPECT_THROW(mla_naive(spec, kLatentEps, w, x, cache), Error);
  EXPECT_THROW(mla_absorbed(spec, kLatentEps, w, x, cache), Error);
  EXPECT_EQ(cache.latent.rows(), 0);
}

TEST(Mla, WrongShapesAreRefused) {
  const MlaSpec spec = small_spec(5, true);
  std::mt19937 rng(2);
  MlaWeights w = random_weights(spec, rng);
  w.g_proj = Matrix();  // the spec says gated
  MlaCache cache;
  EXPECT_THROW(mla_naive(spec, kLatentEps, w, random_matrix(1, kHidden, rng), cache), Error);
}

}  // namespace
}  // namespace k3::ref
