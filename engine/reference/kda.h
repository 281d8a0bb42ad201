// Kimi Delta Attention (KDA), the linear-attention layer of Kimi Linear and K3 (K3-SPEC §3).
//
// Shapes: T tokens, h hidden, H heads, d = head_dim (d_k = d_v = d), P = H·d, K = conv kernel, r = gate rank.
// Per-head channels are contiguous: channel h·d + i is channel i of head h (as in the checkpoint).
//
// The delta-rule kernels (kda_recurrent, kda_chunked, kda_chunked_tiled) take q, k, v, g, β already projected and
// activated:
//   q, k  [T, H·d]  SiLU(conv(W x)), L2-normalised per head (eps 1e-6); q also scaled by d^-1/2. kda_layer applies
//                   the scale to q right after the normalisation, so the kernels see the final query (FLA's
//                   naive kernels do the same: q = q·scale before the loop).
//   v     [T, H·d]
//   g     [T, H·d]  log decay per channel, <= 0 (kda_gate)
//   β     [T, H]    sigmoid(W_b x)
// State S: one [d_k, d_v] matrix per head, key index first (FLA's [K, V] layout). K3's own cache stores the
// transpose ("V-first" [H, V, K]); convert when exchanging states with it.
//
// Numerics: fp32 tensors in and out; the recurrent state and every product inside the kernels are fp64 (except
// kda_chunked_tiled's intra-chunk tile products, fp32 by design: they mirror the GPU kernel's tensor cores). The
// state is fp64 because this code is the oracle for fp32/bf16 GPU kernels: its own rounding must stay far below
// theirs (the state integrates over up to 1M tokens), and it lets the recurrent and chunked forms, which sum in
// different orders, agree to fp32 output rounding.
// Sources: K3-SPEC §3; fla-org/flash-linear-attention fla/ops/kda/naive.py (naive_recurrent_kda, naive_chunk_kda),
// fla/ops/kda/gate.py (naive_kda_gate, naive_kda_lowerbound_gate), fla/layers/kda.py, fla/modules/l2norm.py,
// fla/modules/fused_norm_gate.py. See docs/reference.md (KDA).
#pragma once

#include "core/model_config.h"
#include "engine/reference/tensor.h"

#include <vector>

namespace k3::ref {

inline constexpr int kKdaChunk = 64;           // chunk length of the chunked (prefill) form
inline constexpr double kKdaL2NormEps = 1e-6;  // q, k: x / sqrt(Σx² + eps) (fla/modules/l2norm.py)
// Lower-bound tiling (kda_chunked_tiled): K3's gate bound, and the largest exponent (nats) a tile factor may take.
// A 16-token tile referenced to its middle token spans at most 8 steps either side: |G_i − G_ref| ≤ 8·5 = 40.
inline constexpr double kKdaTileGateLowerBound = -5.0;
inline constexpr double kKdaTileExponentLimit = 40.0;

struct KdaWeights {               // one KDA layer, fp32, [out, in] like the checkpoint
  Matrix q_proj, k_proj, v_proj;  // [P, h] each
  Matrix q_conv, k_conv, v_conv;  // [P, K] depthwise causal conv weights (checkpoint [P, 1, K]); column K-1 multiplies
                                  // the current token
  Matrix f_a, f_b;                // forget gate, low rank: [r, h], [P, r]
  Matrix b_proj;                  // β: [H, h]
  Matrix g_a, g_b;                // output gate, low rank [r, h], [P, r] (Kimi Linear), or
  Matrix g_proj;                  // full rank [P, h] (K3: use_full_rank_gate); the unused form stays empty
  Vector a_log;                   // [H], already sliced (K3 stores 128 values: 96 heads + 32 zero pads)
  Vector dt_bias;                 // [P]
  Vector o_norm;                  // [d] gated output RMSNorm weight, shared by all heads
  Matrix o_proj;                  // [h, P]
};

struct KdaState {          // per sequence and KDA layer; the caller keeps it across calls (prefill, then decode steps)
  Matrix conv;             // [3P, K-1] last K-1 inputs of the q, k, v conv channels (rows q | k | v), oldest
                           // first; fp32 because it holds fp32 projections exactly
  std::vector<MatrixD> S;  // H matrices [d_k, d_v], fp64 (see the note above)

  static KdaState zeros(const KdaSpec& spec);
};

enum class KdaMode { recurrent, chunked };

// Token-by-token delta rule, per head (K3-SPEC §3.5):
//   S ← S ⊙ exp(g_t)  (row i of S scaled by exp(g_t,i): decay along the key dimension)
//   u = β_t (v_t − Sᵀ k_t);  S ← S + k_t uᵀ;  o_t = Sᵀ q_t
// q, k, g [T, H·d_k]; v [T, H·d_v]; beta [T, H]; S: H matrices [d_k, d_v], updated in place. Returns o [T, H·d_v].
Matrix kda_recurrent(const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& g, const Matrix& beta, int heads,
                     std::vector<MatrixD>& S);

// The same map computed chunk by chunk with the UT transform (K3-SPEC §3 "Chunked form"); equal to kda_recurrent up
// to rounding. Every decay factor is exp of a difference of chunk-local cumulative log decays, each <= 0, so nothing
// overflows whatever the gate form. T need not be a multiple of chunk. Shapes as kda_recurrent.
Matrix kda_chunked(const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& g, const Matrix& beta, int heads,
                   std::vector<MatrixD>& S, int chunk = kKdaChunk);

// The chunked form with the intra-chunk products computed as the GPU kernel does ("lower-bound tiling", K3-SPEC §3;
// FLA chunk_kda with safe_gate): each tile × tile block of A_kk and A_qk is ONE fp32 product with fp32 accumulation,
//   (x_i ⊙ e^{G_i − G_ref}) · (k_j ⊙ e^{G_ref − G_j}),   x = q or k,
// with a single reference row per block: the middle token of the tile for diagonal blocks, the first token of the
// row tile for off-diagonal ones (whose exponents are then all ≤ 0). The rest of the chunk algorithm is kda_chunked's
// (fp64). Valid only while every exponent stays within kKdaTileExponentLimit = 40 nats, which a gate g ≥ −5 (K3)
// guarantees for tiles of up to 16 tokens. Otherwise it throws k3::Error naming the bound, before touching S: e.g.
// for strong softplus decays, where e^{G_i − G_ref} would overflow fp32 (past 88.7 nats). Equal to kda_recurrent to
// fp32 rounding (tested ≤ 1e-4 relative). Shapes as kda_recurrent.
Matrix kda_chunked_tiled(const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& g, const Matrix& beta,
                         int heads, std::vector<MatrixD>& S, int chunk = kKdaChunk, int tile = 16);

// The largest exponent (nats) kda_chunked_tiled would feed to exp for this log decay g [T, H·d_k]; it refuses the
// input when this exceeds kKdaTileExponentLimit. For g ∈ [−5, 0] and tile 16 it is at most 40.
double kda_tile_max_exponent(const Matrix& g, int heads, int chunk = kKdaChunk, int tile = 16);

// Log decay g [T, P] from f = f_b(f_a x) [T, P], per head h and channel i (A_log indexed by head):
//   bounded_sigmoid (K3): g = lb · sigmoid(exp(A_log[h]) · (f + dt_bias))   ∈ [lb, 0]
//   softplus (Kimi Linear): g = −exp(A_log[h]) · softplus(f + dt_bias)      ∈ (−∞, 0]
// The form comes from spec.gate_form; bounded_sigmoid requires spec.gate_lower_bound < 0. a_log [H]; dt_bias [P].
Matrix kda_gate(const KdaSpec& spec, const Matrix& f, const Vector& a_log, const Vector& dt_bias);

// Depthwise causal conv then SiLU: y[t, c] = silu(Σ_j w[c, j] · x[t − (K−1) + j, c]), where rows before the first
// token come from conv_state. x [T, C]; w [C, K]; conv_state [C, K−1] (oldest first), replaced by the last K−1
// inputs. Returns [T, C].
Matrix short_conv_silu(const Matrix& x, const Matrix& w, Matrix& conv_state);

// One KDA layer: x [T, h] is the layer input after the input RMSNorm; returns y [T, h] (before the residual/AttnRes
// mix). rms_eps is the gated output RMSNorm's eps (config rms_norm_eps). mode picks the kernel; both give the same
// result. state is read and advanced by T tokens.
Matrix kda_layer(const KdaSpec& spec, double rms_eps, const KdaWeights& w, const Matrix& x, KdaState& state,
                 KdaMode mode);

}  // namespace k3::ref
