#include "engine/reference/kda.h"

#include "core/error.h"
#include "engine/reference/basic_ops.h"
#include "engine/reference/shape_check.h"

#include <algorithm>
#include <cmath>

namespace k3::ref {
namespace {

using Eigen::Index;
using VectorD = Eigen::VectorXd;

// ln(1 + e^a) without overflow for large a.
double softplus(double a) { return std::max(a, 0.0) + std::log1p(std::exp(-std::fabs(a))); }

// Rows [t0, t0+n) and the d columns of one head, widened to fp64: [n, d].
MatrixD head_block(const Matrix& x, int head, Index d, Index t0, Index n) {
  return x.block(t0, head * d, n, d).cast<double>();
}

void check_kernel_inputs(const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& g, const Matrix& beta,
                         int heads, const std::vector<MatrixD>& S) {
  K3_CHECK(heads > 0, "heads {}", heads);
  const Index T = q.rows();
  K3_CHECK(k.rows() == T && v.rows() == T && g.rows() == T && beta.rows() == T,
           "token counts differ: q {} k {} v {} g {} beta {}", T, k.rows(), v.rows(), g.rows(), beta.rows());
  K3_CHECK(q.cols() % heads == 0 && v.cols() % heads == 0, "q width {} / v width {} not divisible by {} heads",
           q.cols(), v.cols(), heads);
  K3_CHECK(k.cols() == q.cols() && g.cols() == q.cols(), "q {} k {} g {} widths differ", q.cols(), k.cols(), g.cols());
  K3_CHECK(beta.cols() == heads, "beta has {} columns, want {} (one per head)", beta.cols(), heads);
  K3_CHECK(S.size() == size_t(heads), "state has {} heads, want {}", S.size(), heads);
  for (const MatrixD& s : S)
    K3_CHECK(s.rows() == q.cols() / heads && s.cols() == v.cols() / heads, "state head is [{}, {}], want [{}, {}]",
             s.rows(), s.cols(), q.cols() / heads, v.cols() / heads);
}

// One chunk of one head (n tokens, chunk-local cumulative log decay G_r = Σ_{s≤r} g_s):
//   A_kk[i,j] = β_i Σ_c k_ic k_jc e^{G_ic − G_jc}  (j < i)     A_qk[i,j] = Σ_c q_ic k_jc e^{G_ic − G_jc}  (j ≤ i)
// Each factor is formed from the pair's own exponent G_i − G_j <= 0 (j ≤ i), never as e^{G_i}·e^{−G_j}, which
// overflows once a chunk's decay passes ~700 nats (softplus gates are unbounded). In fp64 the difference of the two
// cumulative sums loses at most ~1e-16·|G| in the exponent, negligible here.
void intra_chunk_scores(const MatrixD& Q, const MatrixD& K, const MatrixD& G, const VectorD& beta, MatrixD& a_kk,
                        MatrixD& a_qk) {
  const Index n = Q.rows();
  a_kk = MatrixD::Zero(n, n);
  a_qk = MatrixD::Zero(n, n);
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j <= i; ++j) {
      double qk = 0, kk = 0;
      for (Index c = 0; c < Q.cols(); ++c) {
        const double decayed_kj = K(j, c) * std::exp(G(i, c) - G(j, c));
        qk += Q(i, c) * decayed_kj;
        kk += K(i, c) * decayed_kj;
      }
      a_qk(i, j) = qk;
      if (j < i) a_kk(i, j) = beta(i) * kk;
    }
  }
}

// UT transform M = (I + StrictLower(A_kk))⁻¹ Diag(β), by forward substitution on the unit lower triangle.
MatrixD ut_transform(const MatrixD& a_kk, const VectorD& beta) {
  return a_kk.triangularView<Eigen::UnitLower>().solve(MatrixD(beta.asDiagonal()));
}

// Chunk-local cumulative log decay G_r = Σ_{s≤r} g_s (rows: tokens, columns: key channels), fp64.
MatrixD cumulative_decay(const MatrixD& g) {
  MatrixD G = g;
  for (Index r = 1; r < G.rows(); ++r) G.row(r) += G.row(r - 1);
  return G;
}

// Advances one head's state S [d_k, d_v] over one chunk, given the chunk's G and intra-chunk scores A_kk (β
// included, strictly lower) and A_qk (lower), and returns its outputs [n, d_v] (K3-SPEC §3):
//   M = (I + A_kk)⁻¹ Diag(β), W = M (e^G ⊙ K), U = M V, V' = U − W S, O = (e^G ⊙ Q) S + A_qk V',
//   S ← Diag(e^{G_n}) S + (e^{G_n − G} ⊙ K)ᵀ V'.
MatrixD chunk_step(const MatrixD& Q, const MatrixD& K, const MatrixD& V, const MatrixD& G, const VectorD& beta,
                   const MatrixD& a_kk, const MatrixD& a_qk, MatrixD& S) {
  const Index n = Q.rows();
  const MatrixD M = ut_transform(a_kk, beta);

  const MatrixD decay_from_start = G.array().exp().matrix();  // e^{G_r}: decay since the chunk's initial state
  const MatrixD W = M * decay_from_start.cwiseProduct(K);
  const MatrixD U = M * V;
  const MatrixD v_new = U - W * S;  // V': what each token writes once the earlier state is accounted for
  const MatrixD O = decay_from_start.cwiseProduct(Q) * S + a_qk * v_new;

  const Eigen::RowVectorXd G_last = G.row(n - 1);
  const MatrixD decay_to_end = (G_last.replicate(n, 1) - G).array().exp().matrix();  // e^{G_n − G_r}
  const VectorD chunk_decay = G_last.array().exp().transpose();                      // e^{G_n}
  S = chunk_decay.asDiagonal() * S;
  S += decay_to_end.cwiseProduct(K).transpose() * v_new;
  return O;
}

// Lower-bound tiling (kda_chunked_tiled). The chunk's n tokens are cut into tiles of `tile` tokens (the last one
// may be shorter); block (I, J), J ≤ I, of A_qk and A_kk is one product of two factor matrices, each row a token's
// q or k times e^{±(G_r − G_ref)} with one reference row ref per block:
//   diagonal (J = I):  ref = the tile's middle token, r0 + min(tile/2, m−1) for a tile of m tokens starting at r0
//                      (FLA chunk_kda_fwd_kernel_intra_sub_chunk). Row factors e^{G_i − G_ref}, column factors
//                      e^{G_ref − G_j}: exponents of both signs, |G_r − G_ref| ≤ floor(tile/2)·|g|_max.
//   off-diagonal:      ref = the row tile's first token r0 (FLA's inter-sub-chunk kernels). Row factors e^{G_i − G_r0}
//                      (i ≥ r0), column factors e^{G_r0 − G_j} (j < r0): both exponents ≤ 0 whatever the gate.
// Largest exponent that the tiled scores of one chunk feed to exp (nats), from the fp64 G.
double tile_max_exponent(const MatrixD& G, Index tile) {
  const Index n = G.rows();
  double worst = 0;
  for (Index r0 = 0; r0 < n; r0 += tile) {
    const Index m = std::min(tile, n - r0), mid = r0 + std::min(tile / 2, m - 1);
    for (Index r = r0; r < r0 + m; ++r) {
      worst = std::max(worst, (G.row(r) - G.row(mid)).cwiseAbs().maxCoeff());  // diagonal, both signs
      worst = std::max(worst, (G.row(r) - G.row(r0)).maxCoeff());              // off-diagonal rows
    }
    for (Index j = 0; j < r0; ++j) worst = std::max(worst, (G.row(r0) - G.row(j)).maxCoeff());  // off-diag columns
  }
  return worst;
}

// fp32 factor rows r0 .. r0+m−1 of X [n, d]: X_rc · e^{sign·(G_rc − G_ref,c)}. The exponent is formed in fp64 from
// the fp64 G (as kda_chunked), rounded to fp32, and exponentiated in fp32; `worst` tracks the largest one used.
Matrix tile_factor(const Matrix& X, const MatrixD& G, Index r0, Index m, Index ref, double sign, float& worst) {
  Matrix f(m, X.cols());
  for (Index r = 0; r < m; ++r)
    for (Index c = 0; c < X.cols(); ++c) {
      const float e = float(sign * (G(r0 + r, c) - G(ref, c)));
      worst = std::max(worst, e);
      f(r, c) = X(r0 + r, c) * std::exp(e);
    }
  return f;
}

// A_kk and A_qk of one chunk by lower-bound tiling (see tile_max_exponent): q, k, β fp32 [n, d] / [n]; each block is
// one fp32 product with fp32 accumulation, the way a tensor-core MMA sees it, then widened to fp64. Diagonal blocks
// are computed in full and masked afterwards (A_qk keeps j ≤ i, A_kk keeps j < i), as the kernel does; the masked-out
// upper entries are e^{G_i − G_j} with j > i, at most e^{2·limit}, so they too stay finite under the limit.
// Returns the largest exponent it fed to exp.
float tiled_intra_chunk_scores(const Matrix& Q, const Matrix& K, const MatrixD& G, const Vector& beta, Index tile,
                               MatrixD& a_kk, MatrixD& a_qk) {
  const Index n = Q.rows();
  float worst = 0;
  a_kk = MatrixD::Zero(n, n);
  a_qk = MatrixD::Zero(n, n);
  for (Index i0 = 0; i0 < n; i0 += tile) {
    const Index mi = std::min(tile, n - i0), mid = i0 + std::min(tile / 2, mi - 1);
    const Vector b = beta.segment(i0, mi);

    // Diagonal block, referenced to the middle token.
    {
      const Matrix k_col = tile_factor(K, G, i0, mi, mid, -1.0, worst);  // k_j ⊙ e^{G_mid − G_j}
      const Matrix qk = tile_factor(Q, G, i0, mi, mid, +1.0, worst) * k_col.transpose();
      const Matrix kk = b.asDiagonal() * (tile_factor(K, G, i0, mi, mid, +1.0, worst) * k_col.transpose());
      for (Index i = 0; i < mi; ++i)
        for (Index j = 0; j <= i; ++j) {
          a_qk(i0 + i, i0 + j) = qk(i, j);
          if (j < i) a_kk(i0 + i, i0 + j) = kk(i, j);
        }
    }
    if (i0 == 0) continue;

    // Off-diagonal blocks (I, J < I), referenced to the row tile's first token.
    const Matrix q_row = tile_factor(Q, G, i0, mi, i0, +1.0, worst);  // q_i ⊙ e^{G_i − G_i0}
    const Matrix k_row = tile_factor(K, G, i0, mi, i0, +1.0, worst);
    for (Index j0 = 0; j0 < i0; j0 += tile) {
      const Index mj = std::min(tile, i0 - j0);
      const Matrix k_col = tile_factor(K, G, j0, mj, i0, -1.0, worst);  // k_j ⊙ e^{G_i0 − G_j}
      const Matrix qk = q_row * k_col.transpose();
      const Matrix kk = b.asDiagonal() * (k_row * k_col.transpose());
      a_qk.block(i0, j0, mi, mj) = qk.cast<double>();
      a_kk.block(i0, j0, mi, mj) = kk.cast<double>();
    }
  }
  return worst;
}

// The largest tile exponent over all heads and chunks of g [T, H·d_k], and where it occurs.
struct TileExponent {
  double value = 0;
  int head = 0;
  Index token = 0;  // first token of the chunk
};
TileExponent find_tile_max_exponent(const Matrix& g, int heads, Index chunk, Index tile) {
  const Index T = g.rows(), dk = g.cols() / heads;
  TileExponent worst;
  for (int h = 0; h < heads; ++h)
    for (Index t0 = 0; t0 < T; t0 += chunk) {
      const Index n = std::min<Index>(chunk, T - t0);
      const double e = tile_max_exponent(cumulative_decay(head_block(g, h, dk, t0, n)), tile);
      if (e > worst.value) worst = {e, h, t0};
    }
  return worst;
}

// [T, H·d] viewed as [T·H, d]: one row per (token, head), since channels of a head are contiguous (row-major).
Matrix rows_per_head(const Matrix& x, int heads) {
  return Eigen::Map<const Matrix>(x.data(), x.rows() * heads, x.cols() / heads);
}
Matrix tokens_by_width(const Matrix& per_head, Index tokens) {
  return Eigen::Map<const Matrix>(per_head.data(), tokens, per_head.size() / tokens);
}

void check_weights(const KdaSpec& spec, const KdaWeights& w, Index hidden) {
  const Index H = spec.num_heads, d = spec.head_dim, P = spec.projection_dim(), K = spec.conv_kernel,
              r = spec.gate_rank;
  check_matrix(w.q_proj, P, hidden, "KDA weight q_proj");
  check_matrix(w.k_proj, P, hidden, "KDA weight k_proj");
  check_matrix(w.v_proj, P, hidden, "KDA weight v_proj");
  check_matrix(w.q_conv, P, K, "KDA weight q_conv");
  check_matrix(w.k_conv, P, K, "KDA weight k_conv");
  check_matrix(w.v_conv, P, K, "KDA weight v_conv");
  check_matrix(w.f_a, r, hidden, "KDA weight f_a");
  check_matrix(w.f_b, P, r, "KDA weight f_b");
  check_matrix(w.b_proj, H, hidden, "KDA weight b_proj");
  if (spec.full_rank_output_gate) {
    check_matrix(w.g_proj, P, hidden, "KDA weight g_proj");
  } else {
    check_matrix(w.g_a, r, hidden, "KDA weight g_a");
    check_matrix(w.g_b, P, r, "KDA weight g_b");
  }
  K3_CHECK(w.a_log.size() == H, "a_log has {} values, want {} (slice K3's padded [128] first)", w.a_log.size(), H);
  K3_CHECK(w.dt_bias.size() == P, "dt_bias has {} values, want {}", w.dt_bias.size(), P);
  K3_CHECK(w.o_norm.size() == d, "o_norm has {} values, want {}", w.o_norm.size(), d);
  check_matrix(w.o_proj, hidden, P, "KDA weight o_proj");
}

}  // namespace

KdaState KdaState::zeros(const KdaSpec& spec) {
  K3_CHECK(spec.num_heads > 0 && spec.head_dim > 0 && spec.conv_kernel > 0, "KdaSpec heads {} head_dim {} kernel {}",
           spec.num_heads, spec.head_dim, spec.conv_kernel);
  KdaState s;
  s.conv = Matrix::Zero(3 * spec.projection_dim(), spec.conv_kernel - 1);
  s.S.assign(spec.num_heads, MatrixD::Zero(spec.head_dim, spec.head_dim));
  return s;
}

Matrix kda_recurrent(const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& g, const Matrix& beta, int heads,
                     std::vector<MatrixD>& S) {
  check_kernel_inputs(q, k, v, g, beta, heads, S);
  const Index dk = q.cols() / heads, dv = v.cols() / heads;
  Matrix o(q.rows(), v.cols());
  for (Index t = 0; t < q.rows(); ++t) {
    for (int h = 0; h < heads; ++h) {
      const VectorD qt = q.row(t).segment(h * dk, dk).cast<double>().transpose();
      const VectorD kt = k.row(t).segment(h * dk, dk).cast<double>().transpose();
      const VectorD vt = v.row(t).segment(h * dv, dv).cast<double>().transpose();
      const VectorD alpha = g.row(t).segment(h * dk, dk).cast<double>().transpose().array().exp();
      MatrixD& s = S[h];
      s = alpha.asDiagonal() * s;
      const VectorD u = double(beta(t, h)) * (vt - s.transpose() * kt);
      s += kt * u.transpose();
      o.row(t).segment(h * dv, dv) = (s.transpose() * qt).cast<float>().transpose();
    }
  }
  return o;
}

Matrix kda_chunked(const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& g, const Matrix& beta, int heads,
                   std::vector<MatrixD>& S, int chunk) {
  check_kernel_inputs(q, k, v, g, beta, heads, S);
  K3_CHECK(chunk > 0, "chunk {}", chunk);
  const Index T = q.rows(), dk = q.cols() / heads, dv = v.cols() / heads;
  Matrix o(T, v.cols());
  for (int h = 0; h < heads; ++h) {
    for (Index t0 = 0; t0 < T; t0 += chunk) {
      const Index n = std::min<Index>(chunk, T - t0);
      const VectorD b = beta.block(t0, h, n, 1).cast<double>();
      const MatrixD Q = head_block(q, h, dk, t0, n), K = head_block(k, h, dk, t0, n);
      const MatrixD G = cumulative_decay(head_block(g, h, dk, t0, n));
      MatrixD a_kk, a_qk;
      intra_chunk_scores(Q, K, G, b, a_kk, a_qk);
      const MatrixD O = chunk_step(Q, K, head_block(v, h, dv, t0, n), G, b, a_kk, a_qk, S[h]);
      o.block(t0, h * dv, n, dv) = O.cast<float>();
    }
  }
  return o;
}

Matrix kda_chunked_tiled(const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& g, const Matrix& beta,
                         int heads, std::vector<MatrixD>& S, int chunk, int tile) {
  check_kernel_inputs(q, k, v, g, beta, heads, S);
  K3_CHECK(chunk > 0 && tile > 0, "chunk {} tile {}", chunk, tile);
  // Checked for the whole input before S is touched, so a refused call leaves the state as it was.
  const TileExponent worst = find_tile_max_exponent(g, heads, chunk, tile);
  K3_CHECK(worst.value <= kKdaTileExponentLimit,
           "kda_chunked_tiled: head {}, chunk at token {}: a {}-token tile needs exp({:.4g}), beyond the {} nats that "
           "the gate lower bound {} guarantees for 16-token tiles referenced to their middle token "
           "(|G_i - G_ref| <= 8 * 5); fp32 exp overflows past 88.7 nats. An unbounded (softplus) gate needs the exact "
           "pairwise form, kda_chunked",
           worst.head, worst.token, tile, worst.value, kKdaTileExponentLimit, kKdaTileGateLowerBound);
  const Index T = q.rows(), dk = q.cols() / heads, dv = v.cols() / heads;
  Matrix o(T, v.cols());
  for (int h = 0; h < heads; ++h) {
    for (Index t0 = 0; t0 < T; t0 += chunk) {
      const Index n = std::min<Index>(chunk, T - t0);
      const MatrixD G = cumulative_decay(head_block(g, h, dk, t0, n));
      const Matrix Qf = q.block(t0, h * dk, n, dk), Kf = k.block(t0, h * dk, n, dk);
      const Vector bf = beta.block(t0, h, n, 1);
      MatrixD a_kk, a_qk;
      const float used = tiled_intra_chunk_scores(Qf, Kf, G, bf, tile, a_kk, a_qk);
      K3_CHECK(used <= float(kKdaTileExponentLimit), "internal: tile exponent {} used after the check passed", used);
      const MatrixD O = chunk_step(Qf.cast<double>(), Kf.cast<double>(), head_block(v, h, dv, t0, n), G,
                                   bf.cast<double>(), a_kk, a_qk, S[h]);
      o.block(t0, h * dv, n, dv) = O.cast<float>();
    }
  }
  return o;
}

double kda_tile_max_exponent(const Matrix& g, int heads, int chunk, int tile) {
  K3_CHECK(heads > 0 && g.cols() % heads == 0, "g width {} not divisible by {} heads", g.cols(), heads);
  K3_CHECK(chunk > 0 && tile > 0, "chunk {} tile {}", chunk, tile);
  return find_tile_max_exponent(g, heads, chunk, tile).value;
}

Matrix kda_gate(const KdaSpec& spec, const Matrix& f, const Vector& a_log, const Vector& dt_bias) {
  const Index H = spec.num_heads, d = spec.head_dim;
  K3_CHECK(f.cols() == H * d, "f has {} columns, want {}", f.cols(), H * d);
  K3_CHECK(a_log.size() == H, "a_log has {} values, want {} (slice K3's padded [128] first)", a_log.size(), H);
  K3_CHECK(dt_bias.size() == H * d, "dt_bias has {} values, want {}", dt_bias.size(), H * d);
  const bool bounded = spec.gate_form == KdaGateForm::bounded_sigmoid;
  if (bounded) {
    K3_CHECK(spec.gate_lower_bound < 0, "bounded gate needs a negative lower bound, got {}", spec.gate_lower_bound);
  }
  Matrix g(f.rows(), f.cols());
  for (Index t = 0; t < f.rows(); ++t) {
    for (Index h = 0; h < H; ++h) {
      const double a = std::exp(double(a_log(h)));
      for (Index i = 0; i < d; ++i) {
        const Index c = h * d + i;
        const double z = double(f(t, c)) + dt_bias(c);
        g(t, c) = bounded ? float(spec.gate_lower_bound * sigmoid(float(a * z))) : float(-a * softplus(z));
      }
    }
  }
  return g;
}

Matrix short_conv_silu(const Matrix& x, const Matrix& w, Matrix& conv_state) {
  const Index T = x.rows(), C = x.cols(), K = w.cols();
  K3_CHECK(K >= 1 && w.rows() == C, "conv weight [{}, {}] for {} channels", w.rows(), w.cols(), C);
  K3_CHECK(conv_state.rows() == C && conv_state.cols() == K - 1, "conv state [{}, {}], want [{}, {}]",
           conv_state.rows(), conv_state.cols(), C, K - 1);
  // history[c, :] = the K−1 cached inputs then this call's T inputs, oldest first.
  Matrix history(C, K - 1 + T);
  history << conv_state, x.transpose();
  Matrix y(T, C);
  for (Index t = 0; t < T; ++t) {
    for (Index c = 0; c < C; ++c) {
      double acc = 0;
      for (Index j = 0; j < K; ++j) acc += double(w(c, j)) * history(c, t + j);
      y(t, c) = silu(float(acc));
    }
  }
  conv_state = history.rightCols(K - 1);
  return y;
}

Matrix kda_layer(const KdaSpec& spec, double rms_eps, const KdaWeights& w, const Matrix& x, KdaState& state,
                 KdaMode mode) {
  const int H = spec.num_heads;
  const Index T = x.rows(), P = spec.projection_dim();
  check_weights(spec, w, x.cols());
  K3_CHECK(state.conv.rows() == 3 * P && state.conv.cols() == spec.conv_kernel - 1,
           "conv state [{}, {}], want [{}, {}]", state.conv.rows(), state.conv.cols(), 3 * P, spec.conv_kernel - 1);

  // 1. q, k, v = SiLU(ShortConv(W x)); one conv over the stacked q | k | v channels, matching the state layout.
  Matrix projected(T, 3 * P), conv_w(3 * P, spec.conv_kernel);
  projected << linear(x, w.q_proj), linear(x, w.k_proj), linear(x, w.v_proj);
  conv_w << w.q_conv, w.k_conv, w.v_conv;
  const Matrix qkv = short_conv_silu(projected, conv_w, state.conv);

  // 2. Per-head L2 norm of q and k; the d^-1/2 attention scale is folded into q here.
  const double scale = 1.0 / std::sqrt(double(spec.head_dim));
  const Matrix q =
      tokens_by_width(l2_normalize_rows(rows_per_head(qkv.leftCols(P), H), kKdaL2NormEps), T) * float(scale);
  const Matrix k = tokens_by_width(l2_normalize_rows(rows_per_head(qkv.middleCols(P, P), H), kKdaL2NormEps), T);
  const Matrix v = qkv.rightCols(P);

  // 3. Forget gate (log decay) and β.
  const Matrix g = kda_gate(spec, linear(linear(x, w.f_a), w.f_b), w.a_log, w.dt_bias);
  const Matrix beta = linear(x, w.b_proj).unaryExpr([](float a) { return sigmoid(a); });

  // 4. Delta rule.
  const Matrix o = mode == KdaMode::chunked ? kda_chunked(q, k, v, g, beta, H, state.S)
                                            : kda_recurrent(q, k, v, g, beta, H, state.S);

  // 5. Gated per-head RMSNorm, then the output projection.
  const Matrix gate = spec.full_rank_output_gate ? linear(x, w.g_proj) : linear(linear(x, w.g_a), w.g_b);
  const Matrix normed = tokens_by_width(rmsnorm(rows_per_head(o, H), w.o_norm, rms_eps), T);
  const Matrix gated = normed.cwiseProduct(gate.unaryExpr([](float a) { return sigmoid(a); }));
  return linear(gated, w.o_proj);
}

}  // namespace k3::ref
