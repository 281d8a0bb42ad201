// KDA reference: chunked (UT transform) against token-by-token recurrence, layer prefill against decode steps,
// hand-computed steps and gates, short-conv state carry-over, and the chunked form's speed.
#include "engine/reference/kda.h"

#include "core/error.h"
#include "engine/reference/basic_ops.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

namespace k3::ref {
namespace {

using Eigen::Index;

// Uniform in [lo, hi): fresh, non-zero test data from a fixed seed.
Matrix random_matrix(std::mt19937& rng, Index rows, Index cols, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Matrix m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = dist(rng);
  return m;
}
Vector random_vector(std::mt19937& rng, Index n, float lo = -1, float hi = 1) {
  return random_matrix(rng, n, 1, lo, hi).col(0);
}

// max |a − b| / max |b|: relative to the size of the reference values.
template <class A, class B>
double relative_error(const A& a, const B& b) {
  const double scale = b.template cast<double>().cwiseAbs().maxCoeff();
  return (a.template cast<double>() - b.template cast<double>()).cwiseAbs().maxCoeff() / std::max(scale, 1e-300);
}

double state_error(const std::vector<MatrixD>& a, const std::vector<MatrixD>& b) {
  double worst = 0;
  for (size_t h = 0; h < b.size(); ++h) worst = std::max(worst, relative_error(a[h], b[h]));
  return worst;
}

KdaSpec make_spec(int heads, int d, KdaGateForm form, bool full_rank_gate = false) {
  KdaSpec s;
  s.num_heads = heads;
  s.head_dim = d;
  s.conv_kernel = 4;
  s.gate_form = form;
  s.gate_lower_bound = form == KdaGateForm::bounded_sigmoid ? -5.0 : 0.0;
  s.full_rank_output_gate = full_rank_gate;
  s.gate_rank = 5;
  s.a_log_stored_values = heads;
  return s;
}

// Normalises each head's d channels to unit length, then multiplies by scale (what kda_layer hands the kernels).
Matrix unit_per_head(const Matrix& x, int heads, double scale) {
  const Index d = x.cols() / heads;
  Matrix y = x;
  for (Index t = 0; t < x.rows(); ++t)
    for (int h = 0; h < heads; ++h) y.row(t).segment(h * d, d) = y.row(t).segment(h * d, d).normalized() * scale;
  return y;
}

struct KernelInputs {
  Matrix q, k, v, g, beta;
};

// strong: push f + dt_bias far positive, so decays sit at the lower bound (bounded) or are huge (softplus).
KernelInputs random_kernel_inputs(std::mt19937& rng, const KdaSpec& spec, Index T, bool strong) {
  const int H = spec.num_heads, d = spec.head_dim;
  KernelInputs in;
  in.q = unit_per_head(random_matrix(rng, T, H * d), H, 1.0 / std::sqrt(double(d)));
  in.k = unit_per_head(random_matrix(rng, T, H * d), H, 1.0);
  in.v = random_matrix(rng, T, H * d, -2, 2);
  const Vector a_log = random_vector(rng, H, 0.0f, 2.5f);  // exp(A_log) in [1, 12)
  const Vector dt_bias = random_vector(rng, H * d, strong ? 8.0f : -2.0f, strong ? 12.0f : 1.0f);
  in.g = kda_gate(spec, random_matrix(rng, T, H * d, -3, 3), a_log, dt_bias);
  in.beta = random_matrix(rng, T, H, -4, 4).unaryExpr([](float a) { return sigmoid(a); });
  return in;
}

std::vector<MatrixD> random_state(std::mt19937& rng, int heads, int d) {
  std::vector<MatrixD> S;
  for (int h = 0; h < heads; ++h) S.push_back(random_matrix(rng, d, d, -3, 3).cast<double>());
  return S;
}

TEST(Kda, RecurrentStepByHand) {
  // One head, d = 2. S₀ = [[1, 2], [3, 4]] (rows: key index), α = e^g = (0.5, 0.25), β = 0.5,
  // k = (0.6, 0.8), v = (1, −1), q = (1, −1).
  //   decayed S = [[0.5, 1], [0.75, 1]];  Sᵀk = (0.9, 1.4);  u = 0.5·((1, −1) − (0.9, 1.4)) = (0.05, −1.2)
  //   S₁ = S + k uᵀ = [[0.53, 0.28], [0.79, 0.04]];  o = S₁ᵀ q = (−0.26, 0.24)
  Matrix q(1, 2), k(1, 2), v(1, 2), g(1, 2), beta(1, 1);
  q << 1, -1;
  k << 0.6f, 0.8f;
  v << 1, -1;
  g << float(std::log(0.5)), float(std::log(0.25));
  beta << 0.5f;
  MatrixD S0(2, 2);
  S0 << 1, 2, 3, 4;
  MatrixD S1(2, 2);
  S1 << 0.53, 0.28, 0.79, 0.04;

  for (KdaMode mode : {KdaMode::recurrent, KdaMode::chunked}) {
    std::vector<MatrixD> S{S0};
    const Matrix o =
        mode == KdaMode::recurrent ? kda_recurrent(q, k, v, g, beta, 1, S) : kda_chunked(q, k, v, g, beta, 1, S);
    EXPECT_NEAR(o(0, 0), -0.26, 1e-6);
    EXPECT_NEAR(o(0, 1), 0.24, 1e-6);
    EXPECT_LT((S[0] - S1).cwiseAbs().maxCoeff(), 1e-6);
  }
}

TEST(Kda, ChunkedEqualsRecurrent) {
  std::mt19937 rng(20260901);
  int cases = 0;
  for (KdaGateForm form : {KdaGateForm::bounded_sigmoid, KdaGateForm::softplus})
    for (int d : {16, 32})
      for (bool strong : {false, true})
        for (bool nonzero_state : {false, true})
          for (Index T : {1, 7, 63, 64, 65, 130, 200}) {
            const KdaSpec spec = make_spec(3, d, form);
            const KernelInputs in = random_kernel_inputs(rng, spec, T, strong);
            std::vector<MatrixD> s_rec = nonzero_state ? random_state(rng, 3, d) : KdaState::zeros(spec).S;
            std::vector<MatrixD> s_chunk = s_rec;
            const Matrix o_rec = kda_recurrent(in.q, in.k, in.v, in.g, in.beta, 3, s_rec);
            const Matrix o_chunk = kda_chunked(in.q, in.k, in.v, in.g, in.beta, 3, s_chunk);
            const std::string what =
                fmt::format("{} d={} strong={} state={} T={}", to_string(form), d, strong, nonzero_state, T);
            EXPECT_LE(relative_error(o_chunk, o_rec), 1e-5) << what;
            EXPECT_LE(state_error(s_chunk, s_rec), 1e-5) << what;
            if (strong && form == KdaGateForm::bounded_sigmoid) {
              EXPECT_LT(in.g.maxCoeff(), -4.5f) << what;  // really near the bound
              EXPECT_GE(in.g.minCoeff(), -5.0f) << what;
            }
            ++cases;
          }
  EXPECT_EQ(cases, 2 * 2 * 2 * 2 * 7);
}

TEST(Kda, ChunkLengthDoesNotChangeTheResult) {
  std::mt19937 rng(7);
  const KdaSpec spec = make_spec(3, 16, KdaGateForm::bounded_sigmoid);
  const KernelInputs in = random_kernel_inputs(rng, spec, 100, false);
  const std::vector<MatrixD> s0 = random_state(rng, 3, 16);
  std::vector<MatrixD> s64 = s0;
  const Matrix o64 = kda_chunked(in.q, in.k, in.v, in.g, in.beta, 3, s64);
  for (int chunk : {1, 16, 37, 128}) {
    std::vector<MatrixD> s = s0;
    EXPECT_LE(relative_error(kda_chunked(in.q, in.k, in.v, in.g, in.beta, 3, s, chunk), o64), 1e-5) << chunk;
    EXPECT_LE(state_error(s, s64), 1e-5) << chunk;
  }
}

TEST(Kda, GateFormsByHand) {
  // Two heads of d = 2, so a wrong A_log index (by channel instead of head) would show.
  KdaSpec spec = make_spec(2, 2, KdaGateForm::softplus);
  Matrix f(1, 4);
  f << 0.5f, -1.0f, 0.25f, 2.0f;
  Vector a_log(2), dt_bias(4);
  a_log << float(std::log(2.0)), float(std::log(0.5));
  dt_bias << 0.5f, 1.0f, -0.25f, -1.0f;
  // f + dt_bias = (1, 0, 0, 1); exp(A_log) = (2, 2, 0.5, 0.5) by channel.
  const double sp1 = std::log1p(std::exp(1.0)), sp0 = std::log(2.0);
  const Matrix soft = kda_gate(spec, f, a_log, dt_bias);
  EXPECT_NEAR(soft(0, 0), -2 * sp1, 1e-6);
  EXPECT_NEAR(soft(0, 1), -2 * sp0, 1e-6);
  EXPECT_NEAR(soft(0, 2), -0.5 * sp0, 1e-6);
  EXPECT_NEAR(soft(0, 3), -0.5 * sp1, 1e-6);

  spec = make_spec(2, 2, KdaGateForm::bounded_sigmoid);
  auto sig = [](double a) { return 1 / (1 + std::exp(-a)); };
  const Matrix bounded = kda_gate(spec, f, a_log, dt_bias);
  EXPECT_NEAR(bounded(0, 0), -5 * sig(2), 1e-6);
  EXPECT_NEAR(bounded(0, 1), -5 * 0.5, 1e-6);
  EXPECT_NEAR(bounded(0, 2), -5 * 0.5, 1e-6);
  EXPECT_NEAR(bounded(0, 3), -5 * sig(0.5), 1e-6);

  // Extremes stay in [lb, 0]; softplus does not overflow.
  Matrix extreme(1, 4);
  extreme << 1e4f, -1e4f, 80.0f, -80.0f;
  const Matrix b = kda_gate(spec, extreme, a_log, dt_bias);
  EXPECT_GE(b.minCoeff(), -5.0f);
  EXPECT_LE(b.maxCoeff(), 0.0f);
  EXPECT_NEAR(b(0, 0), -5.0, 1e-6);
  spec.gate_form = KdaGateForm::softplus;
  const Matrix s = kda_gate(spec, extreme, a_log, dt_bias);
  EXPECT_TRUE(s.allFinite());
  EXPECT_NEAR(s(0, 0), -2 * (1e4 + 0.5), 1e-2);
}

TEST(Kda, GateRejectsAmbiguousConfig) {
  KdaSpec spec = make_spec(2, 2, KdaGateForm::bounded_sigmoid);
  spec.gate_lower_bound = 0;  // a bounded gate without its bound is a config error, never a silent default
  const Matrix f = Matrix::Constant(1, 4, 0.5f);
  const Vector dt = Vector::Constant(4, 0.1f);
  EXPECT_THROW(kda_gate(spec, f, Vector::Constant(2, 0.3f), dt), Error);
  spec.gate_lower_bound = -5;
  EXPECT_THROW(kda_gate(spec, f, Vector::Constant(4, 0.3f), dt), Error);  // unsliced A_log
}

TEST(Kda, ShortConvByHandAndStateCarryOver) {
  std::mt19937 rng(11);
  const Index C = 5, K = 4, T = 9;
  const Matrix x = random_matrix(rng, T, C);
  const Matrix w = random_matrix(rng, C, K);
  const Matrix state0 = random_matrix(rng, C, K - 1);

  // Token 1 with a random cache: y = silu(w0·s1 + w1·s2 + w2·x0 + w3·x1) for each channel.
  Matrix st = state0;
  const Matrix y = short_conv_silu(x, w, st);
  for (Index c = 0; c < C; ++c) {
    const double acc = w(c, 0) * state0(c, 1) + w(c, 1) * state0(c, 2) + w(c, 2) * x(0, c) + w(c, 3) * x(1, c);
    EXPECT_NEAR(y(1, c), silu(float(acc)), 1e-6);
  }
  // The new cache is the last K−1 inputs, oldest first.
  EXPECT_EQ(st, x.bottomRows(K - 1).transpose());

  // [a; b; c] in one call equals a, then b, then c (a shorter than the cache).
  Matrix split_state = state0;
  Matrix y_split(T, C);
  Index t0 = 0;
  for (Index n : {2, 1, 6}) {
    y_split.middleRows(t0, n) = short_conv_silu(x.middleRows(t0, n), w, split_state);
    t0 += n;
  }
  EXPECT_LE((y_split - y).cwiseAbs().maxCoeff(), 1e-7);
  EXPECT_EQ(split_state, st);
}

KdaWeights random_weights(std::mt19937& rng, const KdaSpec& spec, Index hidden) {
  const Index H = spec.num_heads, d = spec.head_dim, P = spec.projection_dim(), K = spec.conv_kernel,
              r = spec.gate_rank;
  const float s = 1.0f / std::sqrt(float(hidden));
  KdaWeights w;
  w.q_proj = random_matrix(rng, P, hidden, -s, s);
  w.k_proj = random_matrix(rng, P, hidden, -s, s);
  w.v_proj = random_matrix(rng, P, hidden, -s, s);
  w.q_conv = random_matrix(rng, P, K, -0.8f, 0.8f);
  w.k_conv = random_matrix(rng, P, K, -0.8f, 0.8f);
  w.v_conv = random_matrix(rng, P, K, -0.8f, 0.8f);
  w.f_a = random_matrix(rng, r, hidden, -s, s);
  w.f_b = random_matrix(rng, P, r, -1, 1);
  w.b_proj = random_matrix(rng, H, hidden, -3 * s, 3 * s);
  if (spec.full_rank_output_gate) {
    w.g_proj = random_matrix(rng, P, hidden, -s, s);
  } else {
    w.g_a = random_matrix(rng, r, hidden, -s, s);
    w.g_b = random_matrix(rng, P, r, -1, 1);
  }
  w.a_log = random_vector(rng, H, 0.0f, 2.0f);
  w.dt_bias = random_vector(rng, P, -1, 1);
  w.o_norm = random_vector(rng, d, 0.5f, 1.5f);
  w.o_proj = random_matrix(rng, hidden, P, -0.1f, 0.1f);
  return w;
}

TEST(Kda, LayerPrefillEqualsDecodeSteps) {
  std::mt19937 rng(5);
  const Index hidden = 24, N = 37;
  // K3 (bounded gate, full-rank output gate) and Kimi Linear (softplus, low-rank output gate).
  for (bool k3_form : {true, false}) {
    const KdaSpec spec = make_spec(3, 16, k3_form ? KdaGateForm::bounded_sigmoid : KdaGateForm::softplus, k3_form);
    const KdaWeights w = random_weights(rng, spec, hidden);
    const Matrix x = random_matrix(rng, N, hidden, -2, 2);

    KdaState prefill = KdaState::zeros(spec);
    const Matrix y = kda_layer(spec, 1e-5, w, x, prefill, KdaMode::chunked);
    ASSERT_EQ(y.rows(), N);
    ASSERT_EQ(y.cols(), hidden);
    EXPECT_GT(y.cwiseAbs().maxCoeff(), 1e-3f);  // a real signal, not zeros

    KdaState decode = KdaState::zeros(spec);
    Matrix y_steps(N, hidden);
    for (Index t = 0; t < N; ++t) y_steps.row(t) = kda_layer(spec, 1e-5, w, x.row(t), decode, KdaMode::recurrent);
    EXPECT_LE(relative_error(y_steps, y), 1e-5) << k3_form;
    EXPECT_LE(state_error(decode.S, prefill.S), 1e-5) << k3_form;
    // Projections of one row and of N rows round differently in fp32 (GEMV vs GEMM), so not bit-equal.
    EXPECT_LE(relative_error(decode.conv, prefill.conv), 1e-6);

    // Prefill in two calls (20 then 17 tokens) carries both states.
    KdaState two = KdaState::zeros(spec);
    Matrix y_two(N, hidden);
    y_two.topRows(20) = kda_layer(spec, 1e-5, w, x.topRows(20), two, KdaMode::chunked);
    y_two.bottomRows(N - 20) = kda_layer(spec, 1e-5, w, x.bottomRows(N - 20), two, KdaMode::chunked);
    EXPECT_LE(relative_error(y_two, y), 1e-5) << k3_form;
    EXPECT_LE(state_error(two.S, prefill.S), 1e-5) << k3_form;
  }
}

// One decode token from a random state, composed here from the formulas of K3-SPEC §3 in fp64, independently of
// the library's helpers: checks the wiring (conv tap order, L2 norm, d^-1/2 on q, gate and A_log per head, β,
// gated per-head norm, o_proj).
TEST(Kda, LayerDecodeTokenByFormula) {
  std::mt19937 rng(23);
  const Index hidden = 10;
  for (bool k3_form : {true, false}) {
    const KdaSpec spec = make_spec(2, 4, k3_form ? KdaGateForm::bounded_sigmoid : KdaGateForm::softplus, k3_form);
    const Index H = spec.num_heads, d = spec.head_dim, P = spec.projection_dim(), K = spec.conv_kernel;
    const KdaWeights w = random_weights(rng, spec, hidden);
    const Matrix x = random_matrix(rng, 1, hidden, -2, 2);
    KdaState state = KdaState::zeros(spec);
    state.conv = random_matrix(rng, 3 * P, K - 1);
    state.S = random_state(rng, int(H), int(d));
    const KdaState before = state;
    const Matrix y = kda_layer(spec, 1e-5, w, x, state, KdaMode::recurrent);

    using VecD = Eigen::VectorXd;
    auto sig = [](double a) { return 1 / (1 + std::exp(-a)); };
    const VecD xd = x.row(0).transpose().cast<double>();
    auto conv_silu = [&](const Matrix& W, const Matrix& cw, Index row0) {
      const VecD p = W.cast<double>() * xd;
      VecD out(P);
      for (Index c = 0; c < P; ++c) {
        double acc = cw(c, K - 1) * p(c);  // the last tap multiplies the current token
        for (Index j = 0; j < K - 1; ++j) acc += cw(c, j) * double(before.conv(row0 + c, j));
        out(c) = acc * sig(acc);
      }
      return out;
    };
    const VecD q = conv_silu(w.q_proj, w.q_conv, 0), k = conv_silu(w.k_proj, w.k_conv, P),
               v = conv_silu(w.v_proj, w.v_conv, 2 * P);
    const VecD f = w.f_b.cast<double>() * (w.f_a.cast<double>() * xd);
    const VecD b_logit = w.b_proj.cast<double>() * xd;
    const VecD gate_logit =
        k3_form ? VecD(w.g_proj.cast<double>() * xd) : VecD(w.g_b.cast<double>() * (w.g_a.cast<double>() * xd));
    VecD o(P);
    for (Index h = 0; h < H; ++h) {
      auto l2norm = [](const VecD& a) { return VecD(a / std::sqrt(a.squaredNorm() + 1e-6)); };
      const VecD qh = l2norm(q.segment(h * d, d)) / std::sqrt(double(d));
      const VecD kh = l2norm(k.segment(h * d, d));
      const VecD vh = v.segment(h * d, d);
      VecD alpha(d);
      for (Index i = 0; i < d; ++i) {
        const double z = f(h * d + i) + w.dt_bias(h * d + i), a = std::exp(double(w.a_log(h)));
        alpha(i) = std::exp(k3_form ? -5.0 * sig(a * z) : -a * std::log1p(std::exp(z)));
      }
      MatrixD S = alpha.asDiagonal() * before.S[h];
      const VecD u = sig(b_logit(h)) * (vh - S.transpose() * kh);
      S += kh * u.transpose();
      EXPECT_LE(relative_error(state.S[h], S), 1e-6) << k3_form << " head " << h;
      const VecD oh = S.transpose() * qh;
      const double inv_rms = 1 / std::sqrt(oh.squaredNorm() / double(d) + 1e-5);
      for (Index i = 0; i < d; ++i) o(h * d + i) = oh(i) * inv_rms * w.o_norm(i) * sig(gate_logit(h * d + i));
    }
    const VecD y_ref = w.o_proj.cast<double>() * o;
    EXPECT_LE(relative_error(y.row(0).transpose(), y_ref), 2e-6) << k3_form;  // fp32 rounding: ~2e-7
  }
}

TEST(Kda, LayerChecksShapes) {
  std::mt19937 rng(3);
  const KdaSpec spec = make_spec(2, 4, KdaGateForm::bounded_sigmoid, true);
  KdaWeights w = random_weights(rng, spec, 6);
  KdaState state = KdaState::zeros(spec);
  EXPECT_THROW(kda_layer(spec, 1e-5, w, random_matrix(rng, 3, 7), state, KdaMode::chunked), Error);
  w.a_log = random_vector(rng, 4);  // K3's padded A_log must be sliced to the head count first
  EXPECT_THROW(kda_layer(spec, 1e-5, w, random_matrix(rng, 3, 6), state, KdaMode::chunked), Error);
}

TEST(Kda, ChunkedIsFastEnough) {
  std::mt19937 rng(17);
  const KdaSpec spec = make_spec(4, 16, KdaGateForm::bounded_sigmoid);
  const KernelInputs in = random_kernel_inputs(rng, spec, 512, false);
  std::vector<MatrixD> S = KdaState::zeros(spec).S;
  const auto start = std::chrono::steady_clock::now();
  const Matrix o = kda_chunked(in.q, in.k, in.v, in.g, in.beta, 4, S);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(o.allFinite());
  std::printf("[ timing   ] kda_chunked T=512 H=4 d=16: %.1f ms\n", seconds * 1e3);
  RecordProperty("kda_chunked_512_ms", std::to_string(seconds * 1e3));
#ifdef NDEBUG
  EXPECT_LT(seconds, 0.25);  // Release only: Debug and sanitizer builds are many times slower
#endif
}

// ---- Lower-bound tiling (kda_chunked_tiled) ----

// The bounded gate on the grid of ChunkedEqualsRecurrent: the fp32 tile products stay within 1e-4 of the fp64
// recurrence, and no tile exponent exceeds 8·5 = 40 nats, even with every decay pinned near the bound.
TEST(Kda, ChunkedTiledEqualsRecurrent) {
  std::mt19937 rng(20260902);
  double worst_out = 0, worst_state = 0, worst_exp_normal = 0, worst_exp_strong = 0;
  int cases = 0;
  for (int d : {16, 32})
    for (bool strong : {false, true})
      for (bool nonzero_state : {false, true})
        for (Index T : {1, 7, 63, 64, 65, 130, 200}) {
          const KdaSpec spec = make_spec(3, d, KdaGateForm::bounded_sigmoid);
          const KernelInputs in = random_kernel_inputs(rng, spec, T, strong);
          std::vector<MatrixD> s_rec = nonzero_state ? random_state(rng, 3, d) : KdaState::zeros(spec).S;
          std::vector<MatrixD> s_tiled = s_rec;
          const Matrix o_rec = kda_recurrent(in.q, in.k, in.v, in.g, in.beta, 3, s_rec);
          const Matrix o_tiled = kda_chunked_tiled(in.q, in.k, in.v, in.g, in.beta, 3, s_tiled);
          const std::string what = fmt::format("d={} strong={} state={} T={}", d, strong, nonzero_state, T);
          const double e_out = relative_error(o_tiled, o_rec), e_state = state_error(s_tiled, s_rec);
          EXPECT_LE(e_out, 1e-4) << what;
          EXPECT_LE(e_state, 1e-4) << what;
          worst_out = std::max(worst_out, e_out);
          worst_state = std::max(worst_state, e_state);

          const double max_exp = kda_tile_max_exponent(in.g, 3);
          EXPECT_LE(max_exp, kKdaTileExponentLimit) << what;
          if (strong) {
            EXPECT_LT(in.g.maxCoeff(), -4.5f) << what;  // really near the bound
            EXPECT_GE(in.g.minCoeff(), -5.0f) << what;
            if (T >= 16) {
              EXPECT_GT(max_exp, 36.0) << what;  // a full tile: 8 steps of at least 4.5 nats
            }
          }
          double& worst_exp = strong ? worst_exp_strong : worst_exp_normal;
          worst_exp = std::max(worst_exp, max_exp);
          ++cases;
        }
  EXPECT_EQ(cases, 2 * 2 * 2 * 7);
  std::printf(
      "[ tiled    ] vs recurrent: max rel error outputs %.2e, states %.2e; max tile exponent %.6f nats "
      "(normal gates), %.6f nats (near the bound)\n",
      worst_out, worst_state, worst_exp_normal, worst_exp_strong);
  RecordProperty("tiled_max_rel_error_outputs", fmt::format("{:.3g}", worst_out));
  RecordProperty("tiled_max_rel_error_states", fmt::format("{:.3g}", worst_state));
}

// The limit is exactly the bound: g = −5 at every step reaches 8·5 = 40 nats in a 16-token tile and is accepted;
// a steeper gate or a wider tile passes it and is refused.
TEST(Kda, ChunkedTiledExponentBound) {
  std::mt19937 rng(31);
  const int H = 2, d = 16;
  const KdaSpec spec = make_spec(H, d, KdaGateForm::bounded_sigmoid);
  KernelInputs in = random_kernel_inputs(rng, spec, 100, true);
  in.g.setConstant(-5.0f);
  EXPECT_EQ(kda_tile_max_exponent(in.g, H), 40.0);
  EXPECT_EQ(kda_tile_max_exponent(in.g, H, kKdaChunk, 8), 20.0);  // floor(tile/2) steps either side
  EXPECT_EQ(kda_tile_max_exponent(in.g, H, kKdaChunk, 32), 80.0);

  const std::vector<MatrixD> s0 = random_state(rng, H, d);
  std::vector<MatrixD> s_rec = s0, s_tiled = s0;
  const Matrix o_rec = kda_recurrent(in.q, in.k, in.v, in.g, in.beta, H, s_rec);
  const Matrix o_tiled = kda_chunked_tiled(in.q, in.k, in.v, in.g, in.beta, H, s_tiled);
  EXPECT_TRUE(o_tiled.allFinite());
  EXPECT_LE(relative_error(o_tiled, o_rec), 1e-4);
  EXPECT_LE(state_error(s_tiled, s_rec), 1e-4);
  std::printf("[ tiled    ] g = -5 everywhere (40 nats): max rel error outputs %.2e, states %.2e\n",
              relative_error(o_tiled, o_rec), state_error(s_tiled, s_rec));

  std::vector<MatrixD> s = s0;
  EXPECT_THROW(kda_chunked_tiled(in.q, in.k, in.v, in.g, in.beta, H, s, kKdaChunk, 32), Error);  // 80 nats
  in.g.setConstant(-5.25f);                                                                      // 42 nats
  EXPECT_NEAR(kda_tile_max_exponent(in.g, H), 42.0, 1e-12);
  EXPECT_THROW(kda_chunked_tiled(in.q, in.k, in.v, in.g, in.beta, H, s), Error);
}

// Why the bound is needed: a softplus gate (Kimi Linear, unbounded) with ~−100 nats per step. One step already
// puts a diagonal tile factor e^{G_i − G_ref} past fp32 range (e^{88.7} = FLT_MAX); a whole half tile reaches
// ~800 nats, where the factor is inf, its partner 0, and their product NaN instead of e^{G_i − G_j}. The tiled form
// refuses with an error naming the bound; the exact pairwise form (kda_chunked) still matches the recurrence.
TEST(Kda, ChunkedTiledRefusesUnboundedSoftplus) {
  std::mt19937 rng(41);
  const int H = 2, d = 16;
  const Index T = 70;
  const KdaSpec spec = make_spec(H, d, KdaGateForm::softplus);
  KernelInputs in = random_kernel_inputs(rng, spec, T, false);
  // g = −exp(A_log)·softplus(f + dt_bias) with exp(A_log) = 10, f + dt_bias ∈ [9.5, 10.5]: g ∈ [−105, −95].
  in.g = kda_gate(spec, random_matrix(rng, T, H * d, -0.5f, 0.5f), Vector::Constant(H, float(std::log(10.0))),
                  Vector::Constant(H * d, 10.0f));
  ASSERT_LT(in.g.maxCoeff(), -94.0f);
  ASSERT_GT(in.g.minCoeff(), -106.0f);

  const double max_exp = kda_tile_max_exponent(in.g, H);
  EXPECT_GT(max_exp, 8 * 94.0);
  const float fp32_log_max = std::log(std::numeric_limits<float>::max());  // 88.72
  EXPECT_GT(max_exp, fp32_log_max);
  // What the factored product would compute: e^{+a}·e^{−a} for the true e^0 = 1.
  const float up = std::exp(float(max_exp)), down = std::exp(-float(max_exp));
  EXPECT_TRUE(std::isinf(up));
  EXPECT_EQ(down, 0.0f);
  EXPECT_TRUE(std::isnan(up * down));
  EXPECT_TRUE(std::isinf(std::exp(-in.g.maxCoeff())));  // a single step is already too much

  std::vector<MatrixD> s_tiled = random_state(rng, H, d), s_rec = s_tiled, s_exact = s_tiled;
  std::string message;
  try {
    kda_chunked_tiled(in.q, in.k, in.v, in.g, in.beta, H, s_tiled);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("lower bound -5"), std::string::npos) << message;
  EXPECT_NE(message.find("40 nats"), std::string::npos) << message;
  EXPECT_NE(message.find("kda_chunked"), std::string::npos) << message;
  EXPECT_EQ(state_error(s_tiled, s_rec), 0.0);  // refused before touching the state

  const Matrix o_rec = kda_recurrent(in.q, in.k, in.v, in.g, in.beta, H, s_rec);
  const Matrix o_exact = kda_chunked(in.q, in.k, in.v, in.g, in.beta, H, s_exact);
  EXPECT_TRUE(o_exact.allFinite());
  EXPECT_LE(relative_error(o_exact, o_rec), 1e-5);
}

// Tile and chunk lengths only change rounding: tile 1 is the pairwise form in fp32; tiles need not divide the chunk.
TEST(Kda, ChunkedTiledTileAndChunkLengths) {
  std::mt19937 rng(43);
  const KdaSpec spec = make_spec(3, 16, KdaGateForm::bounded_sigmoid);
  const KernelInputs in = random_kernel_inputs(rng, spec, 150, true);
  const std::vector<MatrixD> s0 = random_state(rng, 3, 16);
  std::vector<MatrixD> s_ref = s0;
  const Matrix o_ref = kda_chunked(in.q, in.k, in.v, in.g, in.beta, 3, s_ref);
  double worst = 0;
  for (int chunk : {16, 37, 64})
    for (int tile : {1, 5, 8, 16}) {
      std::vector<MatrixD> s = s0;
      const Matrix o = kda_chunked_tiled(in.q, in.k, in.v, in.g, in.beta, 3, s, chunk, tile);
      EXPECT_LE(relative_error(o, o_ref), 1e-4) << chunk << " " << tile;
      EXPECT_LE(state_error(s, s_ref), 1e-4) << chunk << " " << tile;
      worst = std::max({worst, relative_error(o, o_ref), state_error(s, s_ref)});
    }
  std::printf("[ tiled    ] chunk 16/37/64 x tile 1/5/8/16 vs kda_chunked: max rel error %.2e\n", worst);
}

TEST(Kda, ChunkedTiledIsFastEnough) {
  std::mt19937 rng(17);
  const KdaSpec spec = make_spec(4, 16, KdaGateForm::bounded_sigmoid);
  const KernelInputs in = random_kernel_inputs(rng, spec, 512, false);
  std::vector<MatrixD> S = KdaState::zeros(spec).S;
  const auto start = std::chrono::steady_clock::now();
  const Matrix o = kda_chunked_tiled(in.q, in.k, in.v, in.g, in.beta, 4, S);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(o.allFinite());
  std::printf("[ timing   ] kda_chunked_tiled T=512 H=4 d=16: %.1f ms\n", seconds * 1e3);
  RecordProperty("kda_chunked_tiled_512_ms", std::to_string(seconds * 1e3));
#ifdef NDEBUG
  EXPECT_LT(seconds, 0.25);  // Release only: Debug and sanitizer builds are many times slower
#endif
}

}  // namespace
}  // namespace k3::ref
