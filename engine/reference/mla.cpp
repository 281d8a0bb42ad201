#include "engine/reference/mla.h"

#include "core/error.h"
#include "engine/reference/basic_ops.h"
#include "engine/reference/shape_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace k3::ref {
namespace {

using Index = Eigen::Index;

void check_inputs(const MlaSpec& s, const MlaWeights& w, const Matrix& x, const MlaCache& cache) {
  if (s.rotary) throw Error("RoPE MLA is not implemented in the reference");
  K3_CHECK(s.num_heads > 0 && s.kv_lora_rank > 0 && s.qk_nope_head_dim > 0 && s.qk_rope_head_dim >= 0 &&
               s.v_head_dim > 0 && s.q_lora_rank >= 0,
           "MLA spec has a non-positive size");
  const Index h = x.cols(), heads = s.num_heads, r = s.kv_lora_rank, dr = s.qk_rope_head_dim;
  const Index q_width = heads * s.qk_head_dim(), v_width = heads * s.v_head_dim;
  if (s.q_lora_rank > 0) {
    check_matrix(w.q_a, s.q_lora_rank, h, "MLA q_a");
    K3_CHECK(w.q_a_norm.size() == s.q_lora_rank, "MLA q_a_norm has {} values, expected {}", w.q_a_norm.size(),
             s.q_lora_rank);
    check_matrix(w.q_b, q_width, s.q_lora_rank, "MLA q_b");
  } else {
    check_matrix(w.q_proj, q_width, h, "MLA q_proj");
  }
  check_matrix(w.kv_a, r + dr, h, "MLA kv_a");
  K3_CHECK(w.kv_a_norm.size() == r, "MLA kv_a_norm has {} values, expected {}", w.kv_a_norm.size(), r);
  check_matrix(w.kv_b, heads * (s.qk_nope_head_dim + s.v_head_dim), r, "MLA kv_b");
  if (s.output_gate) {
    check_matrix(w.g_proj, v_width, h, "MLA g_proj");
  } else {
    K3_CHECK(w.g_proj.size() == 0, "MLA g_proj is {} but the spec has no output gate", shape_of(w.g_proj));
  }
  check_matrix(w.o_proj, h, v_width, "MLA o_proj");
  K3_CHECK(cache.latent.rows() == 0 || cache.latent.cols() == r + dr, "MLA cache is {}, expected [tokens, {}]",
           shape_of(cache.latent), r + dr);
}

// [T, H·(dn+dr)], per head [q_nope | q_r].
Matrix queries(const MlaSpec& s, double eps, const MlaWeights& w, const Matrix& x) {
  if (s.q_lora_rank > 0) return linear(rmsnorm(linear(x, w.q_a), w.q_a_norm, eps), w.q_b);
  return linear(x, w.q_proj);
}

// Appends the new tokens' [RMSNorm(c) | k_r] rows; returns how many tokens were cached before.
Index append_latent(const MlaSpec& s, double eps, const MlaWeights& w, const Matrix& x, MlaCache& cache) {
  const Index r = s.kv_lora_rank, dr = s.qk_rope_head_dim, past = cache.latent.rows(), t = x.rows();
  const Matrix kv = linear(x, w.kv_a);
  Matrix latent(past + t, r + dr);
  if (past > 0) latent.topRows(past) = cache.latent;
  latent.bottomRows(t).leftCols(r) = rmsnorm(Matrix(kv.leftCols(r)), w.kv_a_norm, eps);
  latent.bottomRows(t).rightCols(dr) = kv.rightCols(dr);  // NoPE: k_r is cached as projected
  cache.latent = std::move(latent);
  return past;
}

// Row t of scores [T, N] sees columns 0..past+t; softmax in place, masked columns become 0.
void causal_softmax(MatrixD& scores, Index past) {
  for (Index t = 0; t < scores.rows(); ++t) {
    const Index visible = past + t + 1;
    double max_score = -std::numeric_limits<double>::infinity();
    for (Index j = 0; j < visible; ++j) max_score = std::max(max_score, scores(t, j));
    double sum = 0;
    for (Index j = 0; j < visible; ++j) {
      scores(t, j) = std::exp(scores(t, j) - max_score);
      sum += scores(t, j);
    }
    for (Index j = 0; j < visible; ++j) scores(t, j) /= sum;
    for (Index j = visible; j < scores.cols(); ++j) scores(t, j) = 0;
  }
}

// Expanded form: materialise per-head keys [k_nope | k_r] and values for every cached token.
Matrix attend_naive(const MlaSpec& s, const MlaWeights& w, const Matrix& q, const Matrix& latent, Index past) {
  const Index heads = s.num_heads, dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim, dv = s.v_head_dim;
  const Index r = s.kv_lora_rank, qk = dn + dr, kv_width = dn + dv, tokens = latent.rows();
  const MatrixD k_nope_v = latent.leftCols(r).cast<double>() * w.kv_b.cast<double>().transpose();  // [N, H·(dn+dv)]
  const double scale = 1.0 / std::sqrt(double(qk));
  Matrix out(q.rows(), heads * dv);
  for (Index h = 0; h < heads; ++h) {
    MatrixD keys(tokens, qk);
    keys.leftCols(dn) = k_nope_v.middleCols(h * kv_width, dn);
    keys.rightCols(dr) = latent.rightCols(dr).cast<double>();  // shared by all heads
    const MatrixD values = k_nope_v.middleCols(h * kv_width + dn, dv);
    MatrixD scores = q.middleCols(h * qk, qk).cast<double>() * keys.transpose() * scale;
    causal_softmax(scores, past);
    out.middleCols(h * dv, dv) = (scores * values).cast<float>();
  }
  return out;
}

// Absorbed form: score [q_lat | q_r] against the cached [c | k_r] rows, then apply W_uv to the mixed latent.
Matrix attend_absorbed(const MlaSpec& s, const MlaWeights& w, const Matrix& q, const Matrix& latent, Index past) {
  const Index heads = s.num_heads, dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim, dv = s.v_head_dim;
  const Index r = s.kv_lora_rank, qk = dn + dr, kv_width = dn + dv;
  const MatrixD cache = latent.cast<double>();  // [N, r + dr]
  const MatrixD kv_b = w.kv_b.cast<double>();
  const double scale = 1.0 / std::sqrt(double(qk));
  Matrix out(q.rows(), heads * dv);
  for (Index h = 0; h < heads; ++h) {
    const auto w_uk = kv_b.middleRows(h * kv_width, dn);       // [dn, r]
    const auto w_uv = kv_b.middleRows(h * kv_width + dn, dv);  // [dv, r]
    MatrixD q_abs(q.rows(), r + dr);
    q_abs.leftCols(r) = q.middleCols(h * qk, dn).cast<double>() * w_uk;
    q_abs.rightCols(dr) = q.middleCols(h * qk + dn, dr).cast<double>();
    MatrixD scores = q_abs * cache.transpose() * scale;
    causal_softmax(scores, past);
    const MatrixD mixed_latent = scores * cache.leftCols(r);  // [T, r]
    out.middleCols(h * dv, dv) = (mixed_latent * w_uv.transpose()).cast<float>();
  }
  return out;
}

// y = W_o (attn ⊙ sigmoid(W_g x)); the gate depends only on x.
Matrix gated_output(const MlaSpec& s, const MlaWeights& w, const Matrix& x, Matrix attn) {
  if (s.output_gate) {
    const Matrix gate = linear(x, w.g_proj);
    for (Index i = 0; i < attn.size(); ++i) attn.data()[i] *= sigmoid(gate.data()[i]);
  }
  return linear(attn, w.o_proj);
}

}  // namespace

Matrix mla_naive(const MlaSpec& spec, double latent_eps, const MlaWeights& w, const Matrix& x, MlaCache& cache) {
  check_inputs(spec, w, x, cache);
  const Matrix q = queries(spec, latent_eps, w, x);
  const Index past = append_latent(spec, latent_eps, w, x, cache);
  return gated_output(spec, w, x, attend_naive(spec, w, q, cache.latent, past));
}

Matrix mla_absorbed(const MlaSpec& spec, double latent_eps, const MlaWeights& w, const Matrix& x, MlaCache& cache) {
  check_inputs(spec, w, x, cache);
  const Matrix q = queries(spec, latent_eps, w, x);
  const Index past = append_latent(spec, latent_eps, w, x, cache);
  return gated_output(spec, w, x, attend_absorbed(spec, w, q, cache.latent, past));
}

}  // namespace k3::ref
