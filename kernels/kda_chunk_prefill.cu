#include "kernels/kda_chunk_prefill.h"

#include "kernels/kda_chunk_intra.h"
#include "kernels/kda_chunk_state.h"
#include "kernels/shared_memory_config.h"

#include <mma.h>

#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

namespace wmma = nvcuda::wmma;

using kda_chunk::kChunk;  // the chunk geometry, the workspace and the mma.sync helpers: kernels/kda_chunk_intra.h
using kda_chunk::kD;
using kda_chunk::kTile;
using kda_chunk::kTilesPerChunk;
constexpr int kThreads = 256;  // 8 warps in both kernels
constexpr int kWarps = kThreads / 32;
constexpr int kValueBlock = 32;  // value columns per state-pass block
constexpr int kValueBlocks = kD / kValueBlock;
// Diagonal tiles referenced to their middle token see exponents up to 8·|lb| (row factors) and 7·|lb| (column
// factors); the masked-out upper entries multiply both, up to e^{15·|lb|}·128 terms, which for lb ≥ -5 stays below
// fp32's (and TF32's) 3.4e38. Steeper bounds take the exact per-pair path.
constexpr float kTensorDiagonalMinLowerBound = -5.0f;

using kda_chunk::kFloatsPerBlock;
using kda_chunk::cp_async_16;
using kda_chunk::cp_async_commit;
using kda_chunk::cp_async_wait;
using kda_chunk::Workspace;

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragATransposed = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragBTransposed = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

// Loads an operand fragment and rounds it to TF32 (nearest), rather than letting the MMA truncate the low bits.
template <typename Frag>
__device__ __forceinline__ void load_tf32(Frag& f, const float* p, unsigned ldm) {
  wmma::load_matrix_sync(f, p, ldm);
#pragma unroll
  for (int t = 0; t < f.num_elements; ++t) f.x[t] = wmma::__float_to_tf32(f.x[t]);
}

// Shared memory of kda_chunk_intra_ut, in floats. X doubles as the warps' factor scratch while the scores are built
// and A_qk as the wavefront scratch of the forward substitution; K holds k, then β e^G ⊙ k, then β ⊙ v.
constexpr int kSmemG = 0;                             // G [64][128]
constexpr int kSmemK = kSmemG + kChunk * kD;          // [64][128]
constexpr int kSmemAkk = kSmemK + kChunk * kD;        // A_kk [64][64], then L = StrictLower, β applied
constexpr int kSmemAqk = kSmemAkk + kChunk * kChunk;  // A_qk [64][64]
constexpr int kSmemX = kSmemAqk + kChunk * kChunk;    // X = (I + L)⁻¹ [64][64]
constexpr int kSmemBeta = kSmemX + kChunk * kChunk;   // β [64]
constexpr int kIntraSmemFloats = kSmemBeta + kChunk;
constexpr size_t kIntraSmemBytes = size_t(kIntraSmemFloats) * sizeof(float);
constexpr int kFactorScratchFloats = 2 * kTile * kTile;  // per warp: row and column factors [16][16]
static_assert(kWarps * kFactorScratchFloats <= kChunk * kChunk, "factor scratch must fit in X");

// out[64, 128] (global, ldm 128) = X[64, 64] · B[64, 128] (both shared) for a lower-triangular X: warp w computes
// value tile w of every row tile I, over the key range 0 .. 16(I+1) where row tile I of X can be non-zero.
__device__ __forceinline__ void lower_triangular_product(const float* X, const float* B, float* out, int warp) {
#pragma unroll
  for (int I = 0; I < kTilesPerChunk; ++I) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int ks = 0; ks < 2 * (I + 1); ++ks) {
      FragA a;
      FragB b;
      load_tf32(a, X + kTile * I * kChunk + 8 * ks, kChunk);
      load_tf32(b, B + 8 * ks * kD + kTile * warp, kD);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(out + kTile * I * kD + kTile * warp, acc, kD, wmma::mem_row_major);
  }
}

// Phase 1: everything of one (chunk, head) that does not depend on the state. Rows r ≥ n of a partial last chunk
// are padded with q = k = v = 0, g = 0, β = 0: their G repeats G[n-1], their scores, W, U, Qg and Kd rows are 0 and
// X's row is the identity's, so the state pass needs no special case and e^{G_last} = e^{G[n-1]}.
template <bool kTensorDiagonal>
__global__ void __launch_bounds__(kThreads, 2)
    kda_chunk_intra_ut(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                       const float* __restrict__ g, const float* __restrict__ beta, int tokens, int heads,
                       Workspace ws) {
  extern __shared__ __align__(128) float smem[];
  float* Gs = smem + kSmemG;
  float* Ks = smem + kSmemK;
  float* Akk = smem + kSmemAkk;
  float* Aqk = smem + kSmemAqk;
  float* Xs = smem + kSmemX;
  float* bs = smem + kSmemBeta;

  const int chunk = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t t0 = int64_t(chunk) * kChunk;
  const int n = tokens - t0 < kChunk ? int(tokens - t0) : kChunk;
  const int64_t P = int64_t(heads) * kD;  // row stride of q, k, v, g
  const int64_t head_offset = t0 * P + int64_t(h) * kD;
  const float* qh = q + head_offset;  // q[t0 + r, h·d + i] = qh[r·P + i]
  const float* kh = k + head_offset;
  const float* vh = v + head_offset;
  const float* gh = g + head_offset;
  const int64_t blk = int64_t(h) * gridDim.x + chunk;

  // ---- Stage 1: β, k, the cumulative log decay G and the chunk's Qg, Kd, e^{G_last}.
  if (tid < kChunk) bs[tid] = tid < n ? beta[(t0 + tid) * heads + h] : 0.0f;
  for (int e = tid; e < kChunk * kD; e += kThreads) {
    const int r = e / kD, i = e % kD;
    Ks[e] = r < n ? kh[r * P + i] : 0.0f;
  }
  {
    // Two threads per channel: rows 0..31 and 32..63, then the second half adds the first half's total.
    const int i = tid % kD, r0 = (tid / kD) * (kChunk / 2);
    float run = 0.0f;
#pragma unroll 8
    for (int r = r0; r < r0 + kChunk / 2; ++r) {
      run += r < n ? gh[r * P + i] : 0.0f;
      Gs[r * kD + i] = run;
    }
  }
  __syncthreads();
  if (tid >= kD) {
    const int i = tid % kD;
    const float first_half = Gs[(kChunk / 2 - 1) * kD + i];
    for (int r = kChunk / 2; r < kChunk; ++r) Gs[r * kD + i] += first_half;
  }
  __syncthreads();
  {
    float* qg_out = ws.qg(blk);
    float* kd_out = ws.kd(blk);
    for (int e = tid; e < kChunk * kD; e += kThreads) {
      const int r = e / kD, i = e % kD;
      const float G = Gs[e], G_last = Gs[(kChunk - 1) * kD + i];
      const float x = r < n ? qh[r * P + i] : 0.0f;
      qg_out[e] = r < n ? expf(G) * x : 0.0f;  // e^G ≤ 1
      kd_out[e] = expf(G_last - G) * Ks[e];    // e^{G_last − G} ≤ 1
    }
    if (tid < kD) ws.decay(blk)[tid] = expf(Gs[(kChunk - 1) * kD + tid]);
  }

  // ---- Stage 2: score tiles (I, J ≤ I) of A_qk (kind 0) and A_kk (kind 1, β applied later), one product each:
  //   (x_i ⊙ e^{G_i − G_ref}) · (k_j ⊙ e^{G_ref − G_j}),  ref = 16I (J < I) or 16I + 8 (J = I, tensor path),
  // summed over 16-channel slices whose factors each warp builds in its own scratch.
  {
    constexpr int kTiles = kTensorDiagonal ? 2 * 10 : 2 * 6;  // (I, J) pairs with J ≤ I, or J < I
    float* Fr = Xs + warp * kFactorScratchFloats;             // row factors [16 tokens][16 channels]
    float* Fc = Fr + kTile * kTile;                           // column factors [16 tokens][16 channels]
    for (int tile = warp; tile < kTiles; tile += kWarps) {
      const int kind = tile % 2;
      int I = kTensorDiagonal ? 0 : 1, J = tile / 2;
      while (J >= (kTensorDiagonal ? I + 1 : I)) {
        J -= kTensorDiagonal ? I + 1 : I;
        ++I;
      }
      const int ref = I == J ? kTile * I + kTile / 2 : kTile * I;
      const int cc = lane % kTile;
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int c0 = 0; c0 < kD; c0 += kTile) {
        const int ch = c0 + cc;
        const float g_ref = Gs[ref * kD + ch];
#pragma unroll
        for (int m = 0; m < kTile / 2; ++m) {
          const int r = lane / kTile + 2 * m;
          const int ri = kTile * I + r, rj = kTile * J + r;
          const float x = kind == 1 ? Ks[ri * kD + ch] : (ri < n ? qh[ri * P + ch] : 0.0f);
          Fr[r * kTile + cc] = x * __expf(Gs[ri * kD + ch] - g_ref);
          Fc[r * kTile + cc] = Ks[rj * kD + ch] * __expf(g_ref - Gs[rj * kD + ch]);
        }
        __syncwarp();
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
          FragA a;
          FragBTransposed b;  // b(c, j) = Fc[j][c]
          load_tf32(a, Fr + 8 * ks, kTile);
          load_tf32(b, Fc + 8 * ks, kTile);
          wmma::mma_sync(acc, a, b, acc);
        }
        __syncwarp();
      }
      wmma::store_matrix_sync((kind == 1 ? Akk : Aqk) + kTile * I * kChunk + kTile * J, acc, kChunk,
                              wmma::mem_row_major);
    }
    if (!kTensorDiagonal) {
      // Diagonal tiles pair by pair: lanes over channels, each pair's own factor e^{G_i − G_j} ≤ 0 (j ≤ i).
      for (int row = warp; row < kChunk; row += kWarps) {
        float qv[kD / 32], kv[kD / 32], gv[kD / 32];
#pragma unroll
        for (int m = 0; m < kD / 32; ++m) {
          const int ch = lane + 32 * m;
          qv[m] = row < n ? qh[row * P + ch] : 0.0f;
          kv[m] = Ks[row * kD + ch];
          gv[m] = Gs[row * kD + ch];
        }
        for (int col = (row / kTile) * kTile; col <= row; ++col) {
          float s_qk = 0.0f, s_kk = 0.0f;
#pragma unroll
          for (int m = 0; m < kD / 32; ++m) {
            const int ch = lane + 32 * m;
            const float decayed_k = Ks[col * kD + ch] * __expf(gv[m] - Gs[col * kD + ch]);
            s_qk = fmaf(qv[m], decayed_k, s_qk);
            s_kk = fmaf(kv[m], decayed_k, s_kk);
          }
#pragma unroll
          for (int offset = 16; offset > 0; offset /= 2) {
            s_qk += __shfl_xor_sync(0xffffffffu, s_qk, offset);
            s_kk += __shfl_xor_sync(0xffffffffu, s_kk, offset);
          }
          if (lane == 0) {
            Aqk[row * kChunk + col] = s_qk;
            Akk[row * kChunk + col] = s_kk;
          }
        }
      }
    }
  }
  __syncthreads();
  // Masks (selects, so never-written upper entries cannot leak): L = β_i A_kk below the diagonal, A_qk on and below.
  {
    float* aqk_out = ws.a_qk(blk);
    for (int e = tid; e < kChunk * kChunk; e += kThreads) {
      const int i = e / kChunk, j = e % kChunk;
      Akk[e] = j < i ? bs[i] * Akk[e] : 0.0f;
      aqk_out[e] = j <= i ? Aqk[e] : 0.0f;
    }
  }
  __syncthreads();

  // ---- Stage 3: X = (I + L)⁻¹, unit lower triangular, fp32.
  if (warp < kTilesPerChunk) {
    // Diagonal block I = warp: lane c < 16 solves column c by forward substitution, the column in registers.
    if (lane < kTile) {
      const int I = warp, col = lane;
      const float* L = Akk + kTile * I * kChunk + kTile * I;
      float x[kTile];
#pragma unroll
      for (int r = 0; r < kTile; ++r) {
        float a = r == col ? 1.0f : 0.0f;
#pragma unroll
        for (int c = 0; c < r; ++c) a = fmaf(-L[r * kChunk + c], x[c], a);
        x[r] = a;
        Xs[(kTile * I + r) * kChunk + kTile * I + col] = a;
      }
    }
  } else {
    // Blocks above the diagonal are zero.
    for (int e = tid - kTilesPerChunk * 32; e < kChunk * kChunk; e += kThreads - kTilesPerChunk * 32) {
      const int i = e / kChunk, j = e % kChunk;
      if (j / kTile > i / kTile) Xs[e] = 0.0f;
    }
  }
  __syncthreads();
  // Blocks below: X_IJ = −X_II Σ_{K=J}^{I−1} L_IK X_KJ, wavefront s = I − J, each needing only s' < s.
  float* Ts = Aqk;  // free since the mask pass: one [16][16] per block of the wavefront
  for (int s = 1; s < kTilesPerChunk; ++s) {
    const int count = (kTilesPerChunk - s) * kTile * kTile;
    for (int e = tid; e < count; e += kThreads) {
      const int I = s + e / (kTile * kTile), J = I - s, r = (e / kTile) % kTile, col = e % kTile;
      const float* l_row = Akk + (kTile * I + r) * kChunk;
      float a = 0.0f;
      for (int m = kTile * J; m < kTile * I; ++m) a = fmaf(l_row[m], Xs[m * kChunk + kTile * J + col], a);
      Ts[e] = a;
    }
    __syncthreads();
    for (int e = tid; e < count; e += kThreads) {
      const int I = s + e / (kTile * kTile), J = I - s, r = (e / kTile) % kTile, col = e % kTile;
      const float* x_row = Xs + (kTile * I + r) * kChunk + kTile * I;
      const float* t_block = Ts + (e / (kTile * kTile)) * kTile * kTile;
      float a = 0.0f;
      for (int c = 0; c <= r; ++c) a = fmaf(x_row[c], t_block[c * kTile + col], a);
      Xs[(kTile * I + r) * kChunk + kTile * J + col] = -a;
    }
    __syncthreads();
  }

  // ---- Stage 4: W = X (β e^G ⊙ K), U = X (β ⊙ V).
  for (int e = tid; e < kChunk * kD; e += kThreads) Ks[e] *= bs[e / kD] * expf(Gs[e]);
  __syncthreads();
  lower_triangular_product(Xs, Ks, ws.w(blk), warp);
  __syncthreads();
  for (int e = tid; e < kChunk * kD; e += kThreads) {
    const int r = e / kD, i = e % kD;
    Ks[e] = r < n ? bs[r] * vh[r * P + i] : 0.0f;
  }
  __syncthreads();
  lower_triangular_product(Xs, Ks, ws.u(blk), warp);
}

// Phase 2: block (value block vb, head h) carries S[:, 32·vb .. 32·vb + 32) through every chunk in order. Warp w
// computes tile (I = w / 2, 16 columns Cb = w % 2) of V' and O, and rows 16w .. 16w + 15 of the new S.
__global__ void __launch_bounds__(kThreads, 3)
    kda_chunk_state_pass(Workspace ws, float* __restrict__ state, float* __restrict__ out, int tokens, int heads,
                         int chunks) {
  __shared__ __align__(128) float Ss[kD * kValueBlock];      // S slice [128 keys][32 values]
  __shared__ __align__(128) float Vs[kChunk * kValueBlock];  // V' [64][32]
  __shared__ __align__(128) float Os[kChunk * kValueBlock];  // O [64][32], staged for a bounded store

  const int vb = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int I = warp / 2, Cb = warp % 2;
  const int64_t P = int64_t(heads) * kD;
  float* s_global = state + int64_t(h) * kD * kD + kValueBlock * vb;  // S[i][j] at s_global[i·128 + j]
  float* out_h = out + int64_t(h) * kD + kValueBlock * vb;

  for (int e = tid; e < kD * kValueBlock; e += kThreads) Ss[e] = s_global[(e / kValueBlock) * kD + e % kValueBlock];
  __syncthreads();

  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int64_t blk = int64_t(h) * chunks + chunk;
    const float* W = ws.w(blk);
    const float* U = ws.u(blk);
    const float* Qg = ws.qg(blk);
    const float* Kd = ws.kd(blk);
    const float* Aqk = ws.a_qk(blk);
    const float* decay = ws.decay(blk);

    // V' = U − W S and the first half of O = Qg S, sharing the S fragments.
    FragC acc_ws, acc_o, acc_u;
    wmma::fill_fragment(acc_ws, 0.0f);
    wmma::fill_fragment(acc_o, 0.0f);
#pragma unroll 4
    for (int ks = 0; ks < kD / 8; ++ks) {
      FragB s_frag;
      FragA a;
      load_tf32(s_frag, Ss + 8 * ks * kValueBlock + kTile * Cb, kValueBlock);
      load_tf32(a, W + kTile * I * kD + 8 * ks, kD);
      wmma::mma_sync(acc_ws, a, s_frag, acc_ws);
      load_tf32(a, Qg + kTile * I * kD + 8 * ks, kD);
      wmma::mma_sync(acc_o, a, s_frag, acc_o);
    }
    wmma::load_matrix_sync(acc_u, U + kTile * I * kD + kValueBlock * vb + kTile * Cb, kD, wmma::mem_row_major);
#pragma unroll
    for (int t = 0; t < acc_u.num_elements; ++t) acc_u.x[t] -= acc_ws.x[t];
    wmma::store_matrix_sync(Vs + kTile * I * kValueBlock + kTile * Cb, acc_u, kValueBlock, wmma::mem_row_major);
    __syncthreads();

    // O += A_qk V' over the key tiles J ≤ I (A_qk is zero above).
    for (int ks = 0; ks < 2 * (I + 1); ++ks) {
      FragA a;
      FragB b;
      load_tf32(a, Aqk + kTile * I * kChunk + 8 * ks, kChunk);
      load_tf32(b, Vs + 8 * ks * kValueBlock + kTile * Cb, kValueBlock);
      wmma::mma_sync(acc_o, a, b, acc_o);
    }
    wmma::store_matrix_sync(Os + kTile * I * kValueBlock + kTile * Cb, acc_o, kValueBlock, wmma::mem_row_major);

    // S ← Diag(e^{G_last}) S + Kdᵀ V' on this warp's 16 key rows (no other warp reads S until the barrier).
    float* s_rows = Ss + kTile * warp * kValueBlock;
    for (int e = lane; e < kTile * kValueBlock; e += 32) s_rows[e] *= decay[kTile * warp + e / kValueBlock];
    __syncwarp();
    FragC s0, s1;
    wmma::load_matrix_sync(s0, s_rows, kValueBlock, wmma::mem_row_major);
    wmma::load_matrix_sync(s1, s_rows + kTile, kValueBlock, wmma::mem_row_major);
#pragma unroll 2
    for (int ks = 0; ks < kChunk / 8; ++ks) {
      FragATransposed a;  // a(i, t) = Kd[8ks + t][16w + i]
      FragB b;
      load_tf32(a, Kd + 8 * ks * kD + kTile * warp, kD);
      load_tf32(b, Vs + 8 * ks * kValueBlock, kValueBlock);
      wmma::mma_sync(s0, a, b, s0);
      load_tf32(b, Vs + 8 * ks * kValueBlock + kTile, kValueBlock);
      wmma::mma_sync(s1, a, b, s1);
    }
    wmma::store_matrix_sync(s_rows, s0, kValueBlock, wmma::mem_row_major);
    wmma::store_matrix_sync(s_rows + kTile, s1, kValueBlock, wmma::mem_row_major);
    __syncthreads();

    const int64_t t0 = int64_t(chunk) * kChunk;
    const int n = tokens - t0 < kChunk ? int(tokens - t0) : kChunk;
    for (int e = tid; e < n * kValueBlock; e += kThreads) out_h[(t0 + e / kValueBlock) * P + e % kValueBlock] = Os[e];
  }

  for (int e = tid; e < kD * kValueBlock; e += kThreads) s_global[(e / kValueBlock) * kD + e % kValueBlock] = Ss[e];
}

// ---- ut_factored_split_value's state pass: block (vb, h) carries the value columns [32vb, 32vb + 32) of S[h] through
// every chunk in order, 4·heads blocks of 2 warps (384 for K3, three per SM), each warp 16 of the columns, its slice
// of S (128 keys × 16 values, fp32) in registers from the first chunk to the last. Kept transposed, Sᵀ [16 values ×
// 128 keys], so that every product has the value columns as its M dimension and no warp needs another's data:
//   V'ᵀ = Uᵀ − Sᵀ Wᵀ,  Oᵀ = Sᵀ Qgᵀ + V'ᵀ A_qkᵀ,  Sᵀ ← Sᵀ Diag(e^{G_last}) + V'ᵀ Kd,
// on mma.sync m16n8k8 (TF32 operands rounded to nearest, fp32 accumulation). Sᵀ and V'ᵀ are accumulators of one
// product and the A operand of the next: an accumulator tile holds, per lane, columns 2t and 2t + 1 of its 8, where
// an A fragment holds t and t + 4, so the next product's reduction index runs in the order (0, 2, 4, 6, 1, 3, 5, 7)
// within each 8 and its B operand is read in that same order (rows 2t, 2t + 1): the same sums, no data movement.
// The chunk's operands come through a ring of 4 shared buffers in 8 steps, each buffer filled with cp.async three
// steps ahead (one group per step, one barrier per step): steps 0..3 W and Qg rows [16s, 16s + 16) (V'ᵀ and Oᵀ's
// first term for those tokens); step 4 the block's U columns, e^{G_last} and A_qk rows 0..31 (V'ᵀ complete, Oᵀ for
// tokens 0..31, the decay of Sᵀ); step 5 A_qk rows 32..63 and Kd rows 0..15; steps 6 and 7 Kd rows 16..47 and 48..63.
// W, Qg, Kd and A_qk are read by the 4 blocks of a head (4× the L2 traffic of a pass holding a head's whole S, none of
// it waited for), U once. Shared memory 74 KB per block.
constexpr int kSplitWarps = 2;
constexpr int kSplitThreads = 32 * kSplitWarps;
constexpr int kWarpValues = 16;  // value columns per warp: the M edge of m16n8k8
constexpr int kSplitValueBlock = kWarpValues * kSplitWarps;
constexpr int kSplitValueBlocks = kD / kSplitValueBlock;
constexpr int kSplitStepsPerChunk = 8;
constexpr int kSplitStages = 4;  // divides kSplitStepsPerChunk, so step s of every chunk uses buffer s % 4
static_assert(kSplitStepsPerChunk % kSplitStages == 0, "a step's buffer must not depend on the chunk");
// Row strides (floats) that make every fragment read conflict-free (g = lane / 4, t = lane % 4): W, Qg and A_qk are
// read as float2 at (row g, column 2t): banks 8g + 2t (+1) with a stride ≡ 8 (mod 32); Kd and U as floats at (rows
// 2t and 2t + 1, column g): banks 8t + g with a stride ≡ 4 (mod 16).
constexpr int kLdSplitRows = kD + 8;
constexpr int kLdSplitScore = kChunk + 8;
constexpr int kLdSplitKd = kD + 4;
constexpr int kLdSplitU = kSplitValueBlock + 4;
// Offsets within a buffer (floats): steps 0..3 W rows at 0, Qg rows after them; step 4 U at 0, e^{G_last}, A_qk rows
// 0..31; step 5 A_qk rows 32..63 at 0, Kd rows 0..15 after them; steps 6, 7 Kd rows at 0.
constexpr int kSplitQgOffset = kTile * kLdSplitRows;
constexpr int kSplitDecayOffset = kChunk * kLdSplitU;
constexpr int kSplitAqkOffset = kSplitDecayOffset + kD;
constexpr int kSplitKdOffset = (kChunk / 2) * kLdSplitScore;
constexpr int kSplitStageFloats = kSplitAqkOffset + (kChunk / 2) * kLdSplitScore;  // 4736, step 4's
static_assert(2 * kTile * kLdSplitRows <= kSplitStageFloats && kSplitKdOffset + 16 * kLdSplitKd <= kSplitStageFloats &&
                  32 * kLdSplitKd <= kSplitStageFloats,
              "every step's operands must fit one buffer");
static_assert(kSplitQgOffset % 4 == 0 && kSplitDecayOffset % 4 == 0 && kSplitAqkOffset % 4 == 0 &&
                  kSplitKdOffset % 4 == 0 && kSplitStageFloats % 4 == 0 && kLdSplitRows % 4 == 0 &&
                  kLdSplitScore % 4 == 0 && kLdSplitKd % 4 == 0 && kLdSplitU % 4 == 0,
              "cp.async destinations must be 16-byte aligned");
constexpr size_t kSplitSmemBytes = size_t(kSplitStages) * kSplitStageFloats * sizeof(float);  // 75,776
static_assert(3 * (kSplitSmemBytes + 1024) <= 228 * 1024, "three blocks (and their reserved 1 KB) must fit an SM");

using kda_chunk::mma_tf32;
using kda_chunk::tf32_rna;
// An accumulator tile (16 × 8) as the A operand over its 8 columns, the reduction index permuted as above: logical
// column t is column 2t, logical t + 4 is 2t + 1. The B operand then takes rows 2t (b0) and 2t + 1 (b1).
__device__ __forceinline__ void accumulator_as_a(uint32_t (&a)[4], const float (&c)[4]) {
  a[0] = tf32_rna(c[0]);
  a[1] = tf32_rna(c[2]);
  a[2] = tf32_rna(c[1]);
  a[3] = tf32_rna(c[3]);
}

// kRows × kCols floats (kCols a multiple of 4) from global memory (row stride src_ld, 16-byte aligned rows) into
// shared memory (row stride dst_ld), the block's threads sharing the 16-byte pieces.
template <int kRows, int kCols>
__device__ __forceinline__ void copy_rows_async(float* dst, int dst_ld, const float* src, int src_ld, int tid) {
  constexpr int kPerRow = kCols / 4;
#pragma unroll 4
  for (int idx = tid; idx < kRows * kPerRow; idx += kSplitThreads) {
    const int r = idx / kPerRow, c = 4 * (idx % kPerRow);
    cp_async_16(dst + r * dst_ld + c, src + r * src_ld + c);
  }
}

// Kd's rows of steps 5, 6, 7.
constexpr int split_kd_first_row(int step) { return step == 5 ? 0 : step == 6 ? 16 : 48; }
constexpr int split_kd_rows(int step) { return step == 6 ? 32 : 16; }

// The copies of one block: step kStep of a chunk into buffer kStep % kSplitStages.
struct SplitCopies {
  float* smem;
  Workspace ws;
  int64_t blk0;  // the head's first workspace block
  int chunks, vb, tid;

  // One group (empty past the last chunk, so that every thread commits one group per step).
  template <int kStep>
  __device__ __forceinline__ void issue(int chunk) const {
    if (chunk < chunks) {
      const int64_t b = blk0 + chunk;
      float* buf = smem + (kStep % kSplitStages) * kSplitStageFloats;
      if constexpr (kStep < kTilesPerChunk) {
        copy_rows_async<kTile, kD>(buf, kLdSplitRows, ws.w(b) + kStep * kTile * kD, kD, tid);
        copy_rows_async<kTile, kD>(buf + kSplitQgOffset, kLdSplitRows, ws.qg(b) + kStep * kTile * kD, kD, tid);
      } else if constexpr (kStep == 4) {
        copy_rows_async<kChunk, kSplitValueBlock>(buf, kLdSplitU, ws.u(b) + kSplitValueBlock * vb, kD, tid);
        copy_rows_async<1, kD>(buf + kSplitDecayOffset, kD, ws.decay(b), kD, tid);
        copy_rows_async<kChunk / 2, kChunk>(buf + kSplitAqkOffset, kLdSplitScore, ws.a_qk(b), kChunk, tid);
      } else if constexpr (kStep == 5) {
        copy_rows_async<kChunk / 2, kChunk>(buf, kLdSplitScore, ws.a_qk(b) + (kChunk / 2) * kChunk, kChunk, tid);
        copy_rows_async<split_kd_rows(5), kD>(buf + kSplitKdOffset, kLdSplitKd, ws.kd(b), kD, tid);
      } else {
        static_assert(kStep == 6 || kStep == 7, "eight steps per chunk");
        copy_rows_async<split_kd_rows(kStep), kD>(buf, kLdSplitKd, ws.kd(b) + split_kd_first_row(kStep) * kD, kD,
                                                  tid);
      }
    }
    cp_async_commit();
  }
  // Waits for step kStep of `chunk` (every thread's copies), then refills the buffer the previous step read (every
  // thread is past it) with the step kSplitStages − 1 ahead; returns step kStep's buffer.
  template <int kStep>
  __device__ __forceinline__ const float* begin(int chunk) const {
    cp_async_wait<kSplitStages - 2>();
    __syncthreads();
    constexpr int kAhead = kStep + kSplitStages - 1;
    issue<kAhead % kSplitStepsPerChunk>(chunk + kAhead / kSplitStepsPerChunk);
    return smem + (kStep % kSplitStages) * kSplitStageFloats;
  }
};

// Steps 0..3: accumulates Sᵀ Wᵀ into vp and Sᵀ Qgᵀ into o for tokens [16I, 16I + 16) (token tiles 2I, 2I + 1),
// over all 128 keys; buf holds W's and Qg's rows of those tokens.
template <int I>
__device__ __forceinline__ void split_rows_step(const float* buf, const float (&s)[kD / 8][4], float (&vp)[kChunk / 8][4],
                                                float (&o)[kChunk / 8][4], int g, int t) {
#pragma unroll
  for (int kb = 0; kb < kD / 8; ++kb) {
    uint32_t a[4];
    accumulator_as_a(a, s[kb]);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float* w_row = buf + (8 * j + g) * kLdSplitRows + 8 * kb + 2 * t;  // W[16I + 8j + g][8kb + 2t ..]
      const float2 w2 = *reinterpret_cast<const float2*>(w_row);
      const float2 q2 = *reinterpret_cast<const float2*>(w_row + kSplitQgOffset);
      mma_tf32(vp[2 * I + j], a, tf32_rna(w2.x), tf32_rna(w2.y));
      mma_tf32(o[2 * I + j], a, tf32_rna(q2.x), tf32_rna(q2.y));
    }
  }
}

// Oᵀ += V'ᵀ A_qkᵀ for the token tiles kFirst .. kFirst + 3 over the key tiles kb ≤ nt (A_qk is zero above its
// diagonal); a_rows holds A_qk's rows 8·kFirst .. 8·kFirst + 31.
template <int kFirst>
__device__ __forceinline__ void split_score_step(const float* a_rows, const float (&vp)[kChunk / 8][4],
                                                 float (&o)[kChunk / 8][4], int g, int t) {
#pragma unroll
  for (int nt = kFirst; nt < kFirst + 4; ++nt) {
#pragma unroll
    for (int kb = 0; kb <= nt; ++kb) {
      uint32_t a[4];
      accumulator_as_a(a, vp[kb]);
      const float2 b = *reinterpret_cast<const float2*>(a_rows + (8 * (nt - kFirst) + g) * kLdSplitScore + 8 * kb +
                                                        2 * t);  // A_qk[8nt + g][8kb + 2t ..]
      mma_tf32(o[nt], a, tf32_rna(b.x), tf32_rna(b.y));
    }
  }
}

// Sᵀ += V'ᵀ Kd over the tokens [kRow0, kRow0 + kRows); kd_rows holds Kd's rows of those tokens.
template <int kRow0, int kRows>
__device__ __forceinline__ void split_state_step(const float* kd_rows, float (&s)[kD / 8][4],
                                                 const float (&vp)[kChunk / 8][4], int g, int t) {
#pragma unroll
  for (int kl = 0; kl < kRows / 8; ++kl) {
    uint32_t a[4];
    accumulator_as_a(a, vp[kRow0 / 8 + kl]);
    const float* row0 = kd_rows + (8 * kl + 2 * t) * kLdSplitKd + g;  // Kd[kRow0 + 8kl + 2t][g]
#pragma unroll
    for (int nb = 0; nb < kD / 8; ++nb)
      mma_tf32(s[nb], a, tf32_rna(row0[8 * nb]), tf32_rna(row0[kLdSplitKd + 8 * nb]));
  }
}

// Writes Oᵀ's token tiles kFirst .. kFirst + 3 of this warp's 16 value columns (tokens ≥ n of a partial chunk are
// not written); out_w points at the chunk's first token and the warp's first value column.
template <int kFirst>
__device__ __forceinline__ void split_store_out(float* out_w, int64_t P, int n, const float (&o)[kChunk / 8][4], int g,
                                                int t) {
#pragma unroll
  for (int nt = kFirst; nt < kFirst + 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int token = 8 * nt + 2 * t + (e & 1), value = g + 8 * (e >> 1);
      if (token < n) out_w[token * P + value] = o[nt][e];
    }
}

__global__ void __launch_bounds__(kSplitThreads, 3)
    kda_chunk_state_pass_split_value(Workspace ws, float* __restrict__ state, float* __restrict__ out, int tokens,
                                     int heads, int chunks) {
  extern __shared__ __align__(128) float smem[];
  const int vb = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int64_t P = int64_t(heads) * kD;
  const int value0 = kSplitValueBlock * vb + kWarpValues * warp;  // the warp's first value column
  float* s_global = state + int64_t(h) * kD * kD + value0;       // S[i][value0 + j] at s_global[i·128 + j]
  float* out_w = out + int64_t(h) * kD + value0;
  const SplitCopies copies{smem, ws, int64_t(h) * chunks, chunks, vb, tid};

  copies.issue<0>(0);
  copies.issue<1>(0);
  copies.issue<2>(0);
  // s[nb] = Sᵀ's key tile nb: s[nb][e] = S[8nb + 2t + (e & 1)][value0 + g + 8(e >> 1)].
  float s[kD / 8][4];
#pragma unroll
  for (int nb = 0; nb < kD / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nb][e] = s_global[(8 * nb + 2 * t + (e & 1)) * kD + g + 8 * (e >> 1)];

  for (int chunk = 0; chunk < chunks; ++chunk) {
    // vp[nt], o[nt]: V'ᵀ and Oᵀ's token tile nt, vp[nt][e] at (value g + 8(e >> 1), token 8nt + 2t + (e & 1)).
    float vp[kChunk / 8][4], o[kChunk / 8][4];
#pragma unroll
    for (int nt = 0; nt < kChunk / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) vp[nt][e] = o[nt][e] = 0.0f;

    split_rows_step<0>(copies.begin<0>(chunk), s, vp, o, g, t);
    split_rows_step<1>(copies.begin<1>(chunk), s, vp, o, g, t);
    split_rows_step<2>(copies.begin<2>(chunk), s, vp, o, g, t);
    split_rows_step<3>(copies.begin<3>(chunk), s, vp, o, g, t);

    const int64_t t0 = int64_t(chunk) * kChunk;
    const int n = tokens - t0 < kChunk ? int(tokens - t0) : kChunk;
    float* out_chunk = out_w + t0 * P;
    {
      // Step 4: V'ᵀ = Uᵀ − Sᵀ Wᵀ; Oᵀ for tokens 0..31; Sᵀ ← Sᵀ Diag(e^{G_last}) (Sᵀ's last use as the old state
      // was step 3).
      const float* buf = copies.begin<4>(chunk);
#pragma unroll
      for (int nt = 0; nt < kChunk / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int token = 8 * nt + 2 * t + (e & 1), value = kWarpValues * warp + g + 8 * (e >> 1);
          vp[nt][e] = buf[token * kLdSplitU + value] - vp[nt][e];
        }
      split_score_step<0>(buf + kSplitAqkOffset, vp, o, g, t);
      split_store_out<0>(out_chunk, P, n, o, g, t);
#pragma unroll
      for (int nb = 0; nb < kD / 8; ++nb) {
        const float2 decay = *reinterpret_cast<const float2*>(buf + kSplitDecayOffset + 8 * nb + 2 * t);
        s[nb][0] *= decay.x;
        s[nb][1] *= decay.y;
        s[nb][2] *= decay.x;
        s[nb][3] *= decay.y;
      }
    }
    {
      // Step 5: Oᵀ for tokens 32..63; Sᵀ += V'ᵀ Kd over tokens 0..15.
      const float* buf = copies.begin<5>(chunk);
      split_score_step<4>(buf, vp, o, g, t);
      split_store_out<4>(out_chunk, P, n, o, g, t);
      split_state_step<split_kd_first_row(5), split_kd_rows(5)>(buf + kSplitKdOffset, s, vp, g, t);
    }
    split_state_step<split_kd_first_row(6), split_kd_rows(6)>(copies.begin<6>(chunk), s, vp, g, t);
    split_state_step<split_kd_first_row(7), split_kd_rows(7)>(copies.begin<7>(chunk), s, vp, g, t);
  }
  cp_async_wait<0>();  // the groups issued past the last chunk are empty; none is left in flight

#pragma unroll
  for (int nb = 0; nb < kD / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) s_global[(8 * nb + 2 * t + (e & 1)) * kD + g + 8 * (e >> 1)] = s[nb][e];
}

// Which launches a call makes.
struct Launches {
  bool intra, state_pass;
};

// ut_tensorcore's phase 1.
template <bool kTensorDiagonal>
cudaError_t launch_intra_ut(const float* q, const float* k, const float* v, const float* g, const float* beta,
                            int tokens, int heads, int chunks, Workspace ws, cudaStream_t stream) {
  const auto intra = kda_chunk_intra_ut<kTensorDiagonal>;
  // Per call rather than once: the attributes belong to the current device.
  if (const cudaError_t status = allow_dynamic_shared_memory(intra, int(kIntraSmemBytes)); status != cudaSuccess)
    return status;
  intra<<<dim3(unsigned(chunks), unsigned(heads)), kThreads, kIntraSmemBytes, stream>>>(q, k, v, g, beta, tokens,
                                                                                        heads, ws);
  return cudaGetLastError();
}

// ut_tensorcore's state pass.
cudaError_t launch_state_pass(Workspace ws, float* state, float* out, int tokens, int heads, int chunks,
                              cudaStream_t stream) {
  kda_chunk_state_pass<<<dim3(kValueBlocks, unsigned(heads)), kThreads, 0, stream>>>(ws, state, out, tokens, heads,
                                                                                     chunks);
  return cudaGetLastError();
}

// ut_factored_split_value's state pass.
cudaError_t launch_state_pass_split_value(Workspace ws, float* state, float* out, int tokens, int heads, int chunks,
                                          cudaStream_t stream) {
  const auto pass = kda_chunk_state_pass_split_value;
  // Three blocks per SM need the largest shared-memory carveout.
  if (const cudaError_t status = allow_dynamic_shared_memory(pass, int(kSplitSmemBytes)); status != cudaSuccess)
    return status;
  pass<<<dim3(kSplitValueBlocks, unsigned(heads)), kSplitThreads, kSplitSmemBytes, stream>>>(ws, state, out, tokens,
                                                                                            heads, chunks);
  return cudaGetLastError();
}

cudaError_t run(const float* q, const float* k, const float* v, const float* g, const float* beta, float* state,
                float* out, int tokens, int heads, int head_dim, float gate_lower_bound, void* workspace,
                size_t workspace_bytes, cudaStream_t stream, KdaChunkVariant variant, Launches which);

}  // namespace

const char* kda_chunk_variant_name(KdaChunkVariant variant) {
  switch (variant) {
    case KdaChunkVariant::ut_tensorcore: return "kda_chunk_ut_tensorcore";
    case KdaChunkVariant::ut_factored_split_value: return "kda_chunk_ut_factored_split_value";
    case KdaChunkVariant::ut_factored_split_key: return "kda_chunk_ut_factored_split_key";
    case KdaChunkVariant::ut_factored_split_key_f16: return "kda_chunk_ut_factored_split_key_f16";
  }
  return "unknown";
}

size_t kda_chunk_prefill_workspace_bytes(int tokens, int heads, int head_dim) {
  if (tokens < 1 || heads < 1 || head_dim != kD) return 0;
  const int64_t chunks = (int64_t(tokens) + kChunk - 1) / kChunk;
  return size_t(chunks) * size_t(heads) * size_t(kFloatsPerBlock) * sizeof(float);
}

size_t kda_chunk_prefill_workspace_traffic_bytes(int tokens, int heads, int head_dim, KdaChunkVariant variant) {
  const size_t fp32_bytes = kda_chunk_prefill_workspace_bytes(tokens, heads, head_dim);
  switch (variant) {
    case KdaChunkVariant::ut_tensorcore:
    case KdaChunkVariant::ut_factored_split_value:
    case KdaChunkVariant::ut_factored_split_key: return fp32_bytes;
    case KdaChunkVariant::ut_factored_split_key_f16: {
      // U and e^{G_last} in fp32, W, Qg, Kd and A_qk in fp16 (kernels/kda_chunk_intra.h).
      constexpr size_t kBlockBytes = (kda_chunk::kRowsBlock + kD) * sizeof(float) +
                                     (3 * kda_chunk::kRowsBlock + kda_chunk::kScoreBlock) * sizeof(__half);
      return fp32_bytes / (kFloatsPerBlock * sizeof(float)) * kBlockBytes;
    }
  }
  return 0;
}

namespace {

cudaError_t run(const float* q, const float* k, const float* v, const float* g, const float* beta, float* state,
                float* out, int tokens, int heads, int head_dim, float gate_lower_bound, void* workspace,
                size_t workspace_bytes, cudaStream_t stream, KdaChunkVariant variant, Launches which) {
  if (tokens < 1 || heads < 1 || heads > 65535 || head_dim != kD) return cudaErrorInvalidValue;
  if (!(gate_lower_bound <= 0.0f)) return cudaErrorInvalidValue;  // also rejects NaN
  if (!q || !k || !v || !g || !beta || !state || !out || !workspace) return cudaErrorInvalidValue;
  if (workspace_bytes < kda_chunk_prefill_workspace_bytes(tokens, heads, head_dim)) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) return cudaErrorInvalidValue;
  if (variant != KdaChunkVariant::ut_tensorcore && variant != KdaChunkVariant::ut_factored_split_value &&
      variant != KdaChunkVariant::ut_factored_split_key && variant != KdaChunkVariant::ut_factored_split_key_f16)
    return cudaErrorInvalidValue;
  const int chunks = int((int64_t(tokens) + kChunk - 1) / kChunk);
  const Workspace ws{static_cast<float*>(workspace), int64_t(chunks) * heads};
  const kda_chunk::WorkspaceF16 ws_f16{ws.base, ws.blocks};
  const bool tensor_diagonal = gate_lower_bound < 0.0f && gate_lower_bound >= kTensorDiagonalMinLowerBound;
  if (variant == KdaChunkVariant::ut_factored_split_key_f16) {
    if (which.intra) {
      const cudaError_t status =
          kda_chunk::launch_intra_factored(q, k, v, g, beta, tokens, heads, chunks, ws_f16, tensor_diagonal, stream);
      if (status != cudaSuccess) return status;
    }
    return which.state_pass
               ? kda_chunk::launch_state_pass_split_key_f16(ws_f16, state, out, tokens, heads, chunks, stream)
               : cudaSuccess;
  }
  if (which.intra) {
    cudaError_t status = cudaSuccess;
    if (variant == KdaChunkVariant::ut_tensorcore)
      status = tensor_diagonal ? launch_intra_ut<true>(q, k, v, g, beta, tokens, heads, chunks, ws, stream)
                               : launch_intra_ut<false>(q, k, v, g, beta, tokens, heads, chunks, ws, stream);
    else
      status = kda_chunk::launch_intra_factored(q, k, v, g, beta, tokens, heads, chunks, ws, tensor_diagonal, stream);
    if (status != cudaSuccess) return status;
  }
  if (!which.state_pass) return cudaSuccess;
  if (variant == KdaChunkVariant::ut_tensorcore)
    return launch_state_pass(ws, state, out, tokens, heads, chunks, stream);
  if (variant == KdaChunkVariant::ut_factored_split_value)
    return launch_state_pass_split_value(ws, state, out, tokens, heads, chunks, stream);
  return kda_chunk::launch_state_pass_split_key(ws, state, out, tokens, heads, chunks, stream);
}

}  // namespace

cudaError_t kda_chunk_prefill_f32state(const float* q, const float* k, const float* v, const float* g,
                                       const float* beta, float* state, float* out, int tokens, int heads, int head_dim,
                                       float gate_lower_bound, void* workspace, size_t workspace_bytes,
                                       cudaStream_t stream, KdaChunkVariant variant) {
  return run(q, k, v, g, beta, state, out, tokens, heads, head_dim, gate_lower_bound, workspace, workspace_bytes,
             stream, variant, Launches{true, true});
}

cudaError_t kda_chunk_prefill_phase_for_bench(KdaChunkPhase phase, const float* q, const float* k, const float* v,
                                              const float* g, const float* beta, float* state, float* out, int tokens,
                                              int heads, int head_dim, float gate_lower_bound, void* workspace,
                                              size_t workspace_bytes, cudaStream_t stream, KdaChunkVariant variant) {
  if (phase != KdaChunkPhase::intra_chunk && phase != KdaChunkPhase::state_pass) return cudaErrorInvalidValue;
  const Launches which{phase == KdaChunkPhase::intra_chunk, phase == KdaChunkPhase::state_pass};
  return run(q, k, v, g, beta, state, out, tokens, heads, head_dim, gate_lower_bound, workspace, workspace_bytes,
             stream, variant, which);
}

}  // namespace k3::kernels
