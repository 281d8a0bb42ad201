// kda_chunk_intra: phase 1 of the KDA chunked prefill's ut_factored versions (kernels/kda_chunk_prefill.h):
// for one (64-token chunk, head) per block, the same workspace as the other versions' kda_chunk_intra_ut — W, U, Qg,
// Kd [64, 128], A_qk [64, 64] (zero above the diagonal), e^{G_last} [128] — with the score operands factored once.
//
// Every exponent is split at tile boundaries so that each operand is built once per element and every product runs
// on mma.sync m16n8k8 (TF32 rounded to nearest, fp32 accumulation) from shared memory:
//   row factors   Rq_i = q_i ⊙ e^{G_i − G_{16I}},  Rk_i = k_i ⊙ e^{G_i − G_{16I}}   (i in tile I; ≤ |q_i|, |k_i|)
//   column factor Ck_j = k_j ⊙ e^{G_{16J+15} − G_j}                                (j in tile J; ≤ |k_j|)
//   per channel   s_IJ = e^{G_{16I} − G_{16J+15}} (J < I, ≤ 1),
// so tile (I, J < I) of A_qk is Rq_I · Diag(s_IJ) · Ck_Jᵀ with every factor ≤ 1 — the other versions' reference at
// the row tile's first token. A diagonal tile on the tensor path (−5 ≤ gate_lower_bound < 0) is
// (Rq_I · Diag(e^{G_{16I} − G_{16I+8}})) · (Ck_I · Diag(e^{G_{16I+8} − G_{16I+15}}))ᵀ, the others' middle-token
// reference with the same operand bounds (e^{40} and e^{35}); otherwise pair by pair from each pair's own exponent.
// The channels run in two rounds of 64 (Rq, Rk, Ck for 64 channels: 55 KB), so three blocks fit an SM; the build
// thread of (tile, channel) sums its tile's g in registers, and each element needs two exponentials (the row and the
// column factor; Qg = q e^G, Kd = k e^{G_last − G} and β e^G k take per-tile scalars times those). β e^G ⊙ K, the
// B operand of W, is parked in W's own workspace slot until the block's last product overwrites it.
// The UT transform X = (I + L)⁻¹ (L = β A_kk strictly lower) in fp32: the diagonal 16 × 16 blocks by forward
// substitution (the warp that scored the block, no block barrier), then blocked doubling, each step a product of
// known blocks: X_10 = −X_11 (L_10 X_00) and X_32 = −X_33 (L_32 X_22), then the lower-left 32 × 32 block
// X_hl = −X_hh (L_hl X_ll). W = X (β e^G ⊙ K) and U = X (β ⊙ V) on mma.sync, each warp 16 columns of both (v's
// rows requested into the L2 while the transform runs).
// Resources (sm_90, ptxas): 80 registers (launch bound of 3 blocks per SM), a few values spilled (32 to 44 bytes
// stored, 60 to 64 loaded per thread), 61,696 bytes of dynamic shared memory (94,464 on the pair-by-pair path).
// Workspace contract (WorkspaceOf, kernels/kda_chunk_intra.h): W, Qg, Kd and A_qk, which the state passes use only
// as product operands, are stored already rounded — to TF32 for the fp32 workspace (tf32_round), so the split_key
// state pass skips that rounding, or to fp16 for split_key_f16's; U and e^{G_last}, which enter fp32 arithmetic, are
// stored in full. (β e^G ⊙ K, parked in W's slot, is stored in full in the fp32 workspace and rounded to fp16 in the
// fp16 one, and rounded to TF32 where it is read back.) The kernel is instantiated for both element types.
// Numerics: the same products and TF32 roundings as the other versions (each operand rounded once), the factors'
// exponentials taken as products of per-tile scalars and within-tile ones (a few fp32 ulps apart), the transform in
// fp32 in another order.
#include "kernels/kda_chunk_intra.h"
#include "kernels/ptx/shared_memory_config.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace k3::kernels::kda_chunk {

namespace {

constexpr int kThreads = 256;  // 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kSlice = 64;  // channels per score round
constexpr int kRounds = kD / kSlice;
static_assert(kThreads == kTilesPerChunk * kSlice, "one build thread per (tile, channel of the round)");

// Shared memory, in floats. Row strides: the factor arrays and X are read as float2 at (row g, column 2t) and
// (row g + 8, ...): a stride ≡ 8 (mod 32) puts a half warp on 32 distinct banks; L is read by 8 rows at a time
// (stride ≡ 4 (mod 32)).
constexpr int kLdF = kSlice + 8;
constexpr int kLdL = kChunk + 4;
constexpr int kLdX = kChunk + 8;
constexpr int kLdT = 32 + 4;
constexpr int kSmemRq = 0;  // row factors of q [64][kLdF]
constexpr int kSmemRk = kSmemRq + kChunk * kLdF;
constexpr int kSmemCk = kSmemRk + kChunk * kLdF;  // column factors [64][kLdF]
constexpr int kFactorFloats = 3 * kChunk * kLdF;
// After the last round the factor area holds L = β A_kk (strictly lower), X and the products' scratch T.
constexpr int kSmemL = 0;
constexpr int kSmemX = kSmemL + kChunk * kLdL;
constexpr int kSmemT = kSmemX + kChunk * kLdX;
static_assert(kSmemT + 32 * kLdT <= kFactorFloats, "L, X and T must fit the factor area");
constexpr int kSmemSa = kFactorFloats;                                        // diagonal row scales [4][kSlice]
constexpr int kSmemSb = kSmemSa + kTilesPerChunk * kSlice;                    // column scales s_IJ [4][4][kSlice]
constexpr int kSmemTot = kSmemSb + kTilesPerChunk * kTilesPerChunk * kSlice;  // each tile's Σ g [4][kSlice]
constexpr int kSmemBeta = kSmemTot + kTilesPerChunk * kSlice;                 // β [64]
constexpr int kSmemFloats = kSmemBeta + kChunk;
// The pair-by-pair diagonal path also keeps every element's within-tile cumulative log decay [64][128].
constexpr int kSmemGl = kSmemFloats;
constexpr int kSmemExactFloats = kSmemGl + kChunk * kD;
constexpr size_t kSmemBytes = size_t(kSmemFloats) * sizeof(float);            // 61,696: three blocks per SM
constexpr size_t kSmemExactBytes = size_t(kSmemExactFloats) * sizeof(float);  // 94,464
static_assert(3 * (kSmemBytes + 1024) <= 228 * 1024, "three blocks (and their reserved 1 KB) must fit an SM");
static_assert(kSmemX % 4 == 0 && kSmemT % 4 == 0 && kLdX % 4 == 0 && kLdT % 4 == 0 && kLdF % 2 == 0 && kLdL % 2 == 0 &&
                  kSmemRk % 2 == 0 && kSmemCk % 2 == 0 && kSmemSa % 2 == 0 && kSmemSb % 2 == 0,
              "float4 and float2 accesses must be aligned");

// Hints that the L2 should fetch the 128-byte line holding p (no effect on results).
__device__ __forceinline__ void prefetch_l2_line(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(__cvta_generic_to_global(p)));
}

// Accumulates one round's 64 channels of score tile (I, J) into acc[kind][n half] for kKinds row-factor arrays
// (r0: Rq or Rk; r1: Rk when kKinds is 2) against the column factors of tile J, each column factor times s_IJ, and
// with kDiag each row factor times the diagonal row scale of tile I. The reduction index of each 8-channel step
// runs over channels (0, 2, 4, 6, 1, 3, 5, 7) in A's and B's fragments alike, so each lane reads float2 pairs.
template <int kKinds, bool kDiag>
__device__ __forceinline__ void score_round(const float* r0, const float* r1, const float* ck, const float* sa_row,
                                            const float* sb_row, int I, int J, float (&acc0)[2][4], float (&acc1)[2][4],
                                            int g, int t) {
  const int a_offset = (kTile * I + g) * kLdF + 2 * t;        // rows 16I + g and 16I + g + 8
  const float* c_rows = ck + (kTile * J + g) * kLdF + 2 * t;  // n half hh: row 16J + 8hh + g
#pragma unroll
  for (int step = 0; step < kSlice / 8; ++step) {
    const int c0 = 8 * step;
    const float2 sb = *reinterpret_cast<const float2*>(sb_row + c0 + 2 * t);
    uint32_t b[2][2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float2 c = *reinterpret_cast<const float2*>(c_rows + 8 * hh * kLdF + c0);
      b[hh][0] = tf32_rna(c.x * sb.x);
      b[hh][1] = tf32_rna(c.y * sb.y);
    }
    float2 sa = make_float2(1.0f, 1.0f);
    if constexpr (kDiag) sa = *reinterpret_cast<const float2*>(sa_row + c0 + 2 * t);
#pragma unroll
    for (int kind = 0; kind < kKinds; ++kind) {
      const float* r = (kind == 0 ? r0 : r1) + a_offset + c0;
      const float2 x0 = *reinterpret_cast<const float2*>(r);
      const float2 x1 = *reinterpret_cast<const float2*>(r + 8 * kLdF);
      uint32_t a[4];
      if constexpr (kDiag) {
        a[0] = tf32_rna(x0.x * sa.x);
        a[1] = tf32_rna(x1.x * sa.x);
        a[2] = tf32_rna(x0.y * sa.y);
        a[3] = tf32_rna(x1.y * sa.y);
      } else {
        a[0] = tf32_rna(x0.x);
        a[1] = tf32_rna(x1.x);
        a[2] = tf32_rna(x0.y);
        a[3] = tf32_rna(x1.y);
      }
      float(&acc)[2][4] = kind == 0 ? acc0 : acc1;
      mma_tf32(acc[0], a, b[0][0], b[0][1]);
      mma_tf32(acc[1], a, b[1][0], b[1][1]);
    }
  }
}

// Two adjacent fp16 product operands (4-byte aligned) as the workspace stores them (to_operand), and four zeros.
__device__ __forceinline__ void store_operand_pair(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void store_zero4(__half* p) { *reinterpret_cast<uint2*>(p) = make_uint2(0, 0); }

// Score tile (I, J) from its accumulators (element e of n half hh at row 16I + g + 8(e / 2), column
// 16J + 8hh + 2t + e % 2): A_qk on and below the diagonal into the workspace (TF32-rounded, zero above it), and L = β_i
// A_kk strictly below it into shared memory.
template <typename Operand>
__device__ __forceinline__ void store_qk_tile(Operand* aqk, const float (&acc)[2][4], int I, int J, int g, int t) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = kTile * I + g + 8 * half, col = kTile * J + 8 * hh + 2 * t;
      store_operand_pair(aqk + row * kChunk + col, col <= row ? acc[hh][2 * half] : 0.0f,
                         col + 1 <= row ? acc[hh][2 * half + 1] : 0.0f);
    }
}
__device__ __forceinline__ void store_l_tile(float* Ls, const float* bs, const float (&acc)[2][4], int I, int J, int g,
                                             int t) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = kTile * I + g + 8 * half, col = kTile * J + 8 * hh + 2 * t;
      const float b = bs[row];
      const float2 val =
          make_float2(col < row ? b * acc[hh][2 * half] : 0.0f, col + 1 < row ? b * acc[hh][2 * half + 1] : 0.0f);
      *reinterpret_cast<float2*>(Ls + row * kLdL + col) = val;
    }
}

// acc + a · x per component (fmaf), for the UT transform's fp32 row products.
__device__ __forceinline__ float4 fma4(float a, float4 x, float4 acc) {
  return make_float4(fmaf(a, x.x, acc.x), fmaf(a, x.y, acc.y), fmaf(a, x.z, acc.z), fmaf(a, x.w, acc.w));
}

// X_II = (I + L_II)⁻¹ for diagonal block I: lane c < 16 solves column c by forward substitution (fp32), writing every
// entry of the block (zeros above its diagonal).
__device__ __forceinline__ void invert_diagonal_block(const float* Ls, float* Xs, int I, int lane) {
  if (lane >= kTile) return;
  const float* L = Ls + kTile * I * kLdL + kTile * I;
  float x[kTile];
#pragma unroll
  for (int r = 0; r < kTile; ++r) {
    float a = r == lane ? 1.0f : 0.0f;
#pragma unroll
    for (int c = 0; c < r; ++c) a = fmaf(-L[r * kLdL + c], x[c], a);
    x[r] = a;
    Xs[(kTile * I + r) * kLdX + kTile * I + lane] = a;
  }
}

// out[i][j] (global, row stride 128; out at this warp's first column) = Σ_k X[i][k] B[k][j] for the warp's 16
// columns and every row, row tile I over the key range 0 .. 16I + 15 where it can be non-zero. b[kb][hh] holds B's
// rows 8kb + 2t and 8kb + 2t + 1 at column 8hh + g (TF32), matching X's fragments read as float2 pairs. With kRound
// the results are stored TF32-rounded (tf32_round).
template <bool kRound, typename Out>
__device__ __forceinline__ void lower_triangular_product(const float* Xs, const uint32_t (&b)[kChunk / 8][2][2],
                                                         Out* out, int g, int t) {
#pragma unroll
  for (int I = 0; I < kTilesPerChunk; ++I) {
    float acc[2][4] = {};
#pragma unroll
    for (int kb = 0; kb < 2 * (I + 1); ++kb) {
      const float* x = Xs + (kTile * I + g) * kLdX + 8 * kb + 2 * t;
      const float2 x0 = *reinterpret_cast<const float2*>(x);
      const float2 x1 = *reinterpret_cast<const float2*>(x + 8 * kLdX);
      const uint32_t a[4] = {tf32_rna(x0.x), tf32_rna(x1.x), tf32_rna(x0.y), tf32_rna(x1.y)};
      mma_tf32(acc[0], a, b[kb][0][0], b[kb][0][1]);
      mma_tf32(acc[1], a, b[kb][1][0], b[kb][1][1]);
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      Out* o = out + (kTile * I + g) * kD + 8 * hh + 2 * t;
      if constexpr (kRound) {
        store_operand_pair(o, acc[hh][0], acc[hh][1]);
        store_operand_pair(o + 8 * kD, acc[hh][2], acc[hh][3]);
      } else {
        static_assert(std::is_same_v<Out, float>, "U is stored in full");
        *reinterpret_cast<float2*>(o) = make_float2(acc[hh][0], acc[hh][1]);
        *reinterpret_cast<float2*>(o + 8 * kD) = make_float2(acc[hh][2], acc[hh][3]);
      }
    }
  }
}

// Phase 1 for chunk blockIdx.x of head blockIdx.y. Rows r ≥ n of a partial last chunk are padded with q = k = v = 0,
// g = 0, β = 0 (as in kda_chunk_intra_ut): their G repeats G[n-1], their factors, scores, W, U, Qg and Kd rows are 0
// and X's row is the identity's. Score tiles per warp: warps 0..3 both kinds of the pair (I, J) in
// {(2,0), (3,0), (3,1), (3,2)} and one kind of (1,0) or (2,1) (qk for even warps, kk for odd); warps 4..7 both kinds
// of the diagonal pair (w − 4, w − 4) on the tensor path (on the pair-by-pair path every warp scores diagonal rows
// after the rounds).
template <bool kTensorDiagonal, typename Operand>
__global__ void __launch_bounds__(kThreads, 3)
    kda_chunk_intra_factored(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                             const float* __restrict__ g, const float* __restrict__ beta, int tokens, int heads,
                             WorkspaceOf<Operand> ws) {
  extern __shared__ __align__(16) float smem[];
  float* Rq = smem + kSmemRq;
  float* Rk = smem + kSmemRk;
  float* Ck = smem + kSmemCk;
  float* Ls = smem + kSmemL;
  float* Xs = smem + kSmemX;
  float* Ts = smem + kSmemT;
  float* sa = smem + kSmemSa;
  float* sb = smem + kSmemSb;
  float* tot = smem + kSmemTot;
  float* bs = smem + kSmemBeta;
  float* Gl = smem + kSmemGl;  // pair-by-pair path only

  const int chunk = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gq = lane / 4, tq = lane % 4;
  const int64_t t0 = int64_t(chunk) * kChunk;
  const int n = tokens - t0 < kChunk ? int(tokens - t0) : kChunk;
  const int64_t P = int64_t(heads) * kD;  // row stride of q, k, v, g
  const int64_t head_offset = t0 * P + int64_t(h) * kD;
  const float* qh = q + head_offset;  // q[t0 + r, h·d + i] = qh[r·P + i]
  const float* kh = k + head_offset;
  const float* vh = v + head_offset;
  const float* gh = g + head_offset;
  const int64_t blk = int64_t(h) * gridDim.x + chunk;
  Operand* qg_out = ws.qg(blk);
  Operand* kd_out = ws.kd(blk);
  Operand* aqk_out = ws.a_qk(blk);
  Operand* w_out = ws.w(blk);  // holds β e^G ⊙ K until W overwrites it
  float* u_out = ws.u(blk);

  if (tid < kChunk) bs[tid] = tid < n ? beta[(t0 + tid) * heads + h] : 0.0f;
  // A_qk's tiles above the diagonal are zero (the state pass multiplies whole row tiles).
  for (int e = tid; e < kChunk * kChunk / 4; e += kThreads) {
    const int row = 4 * e / kChunk, col = 4 * e % kChunk;
    if (col / kTile > row / kTile) store_zero4(aqk_out + 4 * e);
  }

  // This warp's score tiles (see above).
  const int pair_i = warp < 4 ? (warp == 0 ? 2 : 3) : warp - 4;
  const int pair_j = warp < 4 ? (warp == 0 ? 0 : warp - 1) : warp - 4;
  const int single_i = warp < 2 ? 1 : 2, single_j = single_i - 1;
  const bool single_is_qk = warp % 2 == 0;
  float acc_pair[2][2][4] = {};  // [qk, kk][n half][element]
  float acc_single[2][4] = {};

  // Build thread: tile `seg` (tokens 16·seg .. 16·seg + 15) of channel `c` of the round.
  const int seg = tid / kSlice, c = tid % kSlice, r0 = kTile * seg;
#pragma unroll
  for (int round = 0; round < kRounds; ++round) {
    const int ch = kSlice * round + c;
    // The tile's within-tile cumulative log decay pre[u] = G[r0 + u] − G[r0 − 1] (rows ≥ n: g = 0).
    float pre[kTile];
#pragma unroll
    for (int u = 0; u < kTile; ++u) pre[u] = r0 + u < n ? gh[int64_t(r0 + u) * P + ch] : 0.0f;
    {
      // q and k are read after the barrier (registers are short); ask the L2 for them now, lane L for row L % 16 of
      // q (L < 16) or k: the warp's 32 channels of a row are one 128-byte line.
      const int r = r0 + lane % kTile;
      if (r < n) prefetch_l2_line((lane < kTile ? qh : kh) + int64_t(r) * P + kSlice * round + 32 * (warp % 2));
    }
#pragma unroll
    for (int u = 1; u < kTile; ++u) pre[u] += pre[u - 1];
    tot[seg * kSlice + c] = pre[kTile - 1];
    if constexpr (!kTensorDiagonal) {
#pragma unroll
      for (int u = 0; u < kTile; ++u) Gl[(r0 + u) * kD + ch] = pre[u];
    }
    __syncthreads();  // every tile's Σ g (and β, on the first round); the previous round's products are done

    float before = 0.0f, after = 0.0f;  // Σ g over the tiles before and after this one
#pragma unroll
    for (int m = 0; m < kTilesPerChunk; ++m) {
      const float s = tot[m * kSlice + c];
      if (m < seg) before += s;
      if (m > seg) after += s;
    }
    const float e_first = expf(before + pre[0]);  // e^{G[r0]}
    const float e_after = expf(after);            // e^{G_last − G[r0 + 15]}
#pragma unroll
    for (int u = 0; u < kTile; ++u) {
      const int r = r0 + u;
      const int64_t at = int64_t(r) * P + ch;
      const float qv = r < n ? qh[at] : 0.0f, kv = r < n ? kh[at] : 0.0f;
      const float e_row = __expf(pre[u] - pre[0]);          // e^{G_r − G_{r0}} ≤ 1
      const float e_col = __expf(pre[kTile - 1] - pre[u]);  // e^{G_{r0+15} − G_r} ≤ 1
      Rq[r * kLdF + c] = qv * e_row;
      Rk[r * kLdF + c] = kv * e_row;
      Ck[r * kLdF + c] = kv * e_col;
      const float e_g = e_first * e_row;  // e^{G_r}
      qg_out[r * kD + ch] = to_operand<Operand>(qv * e_g);
      kd_out[r * kD + ch] = to_operand<Operand>(kv * (e_col * e_after));
      w_out[r * kD + ch] = Operand(kv * (bs[r] * e_g));  // fp32 in full; fp16 rounded to nearest
    }
    if constexpr (kTensorDiagonal) {
      sa[seg * kSlice + c] = __expf(pre[0] - pre[kTile / 2]);  // e^{G_{16I} − G_{16I+8}}
      sb[(seg * kTilesPerChunk + seg) * kSlice + c] =
          __expf(pre[kTile / 2] - pre[kTile - 1]);  // e^{G_{16I+8} − G_{16I+15}}
    }
    {
      float between = 0.0f;  // Σ g over the tiles strictly between J and this one
      for (int J = seg - 1; J >= 0; --J) {
        sb[(seg * kTilesPerChunk + J) * kSlice + c] = __expf(pre[0] + between);  // e^{G_{16I} − G_{16J+15}}
        between += tot[J * kSlice + c];
      }
    }
    // e^{G_last}
    if (seg == kTilesPerChunk - 1) ws.decay(blk)[ch] = expf(before + pre[kTile - 1]);
    __syncthreads();  // the round's factors and scales

    if (warp < 4) {
      score_round<2, false>(Rq, Rk, Ck, sa, sb + (pair_i * kTilesPerChunk + pair_j) * kSlice, pair_i, pair_j,
                            acc_pair[0], acc_pair[1], gq, tq);
      score_round<1, false>(single_is_qk ? Rq : Rk, nullptr, Ck, sa,
                            sb + (single_i * kTilesPerChunk + single_j) * kSlice, single_i, single_j, acc_single,
                            acc_single, gq, tq);
    } else if (kTensorDiagonal) {
      score_round<2, true>(Rq, Rk, Ck, sa + pair_i * kSlice, sb + (pair_i * kTilesPerChunk + pair_i) * kSlice, pair_i,
                           pair_i, acc_pair[0], acc_pair[1], gq, tq);
    }
  }
  __syncthreads();  // the factor area is free for L, X and T

  if (warp < 4) {
    store_qk_tile(aqk_out, acc_pair[0], pair_i, pair_j, gq, tq);
    store_l_tile(Ls, bs, acc_pair[1], pair_i, pair_j, gq, tq);
    if (single_is_qk) {
      store_qk_tile(aqk_out, acc_single, single_i, single_j, gq, tq);
    } else {
      store_l_tile(Ls, bs, acc_single, single_i, single_j, gq, tq);
    }
  } else if (kTensorDiagonal) {
    store_qk_tile(aqk_out, acc_pair[0], pair_i, pair_i, gq, tq);
    store_l_tile(Ls, bs, acc_pair[1], pair_i, pair_i, gq, tq);
    __syncwarp();
    invert_diagonal_block(Ls, Xs, pair_i, lane);
  }
  if constexpr (!kTensorDiagonal) {
    // Diagonal tiles pair by pair: lanes over channels, each pair's own factor e^{G_i − G_j} ≤ 1 (j ≤ i, same tile).
    for (int row = warp; row < kChunk; row += kWarps) {
      const int I = row / kTile;
      float qr[kD / 32], kr[kD / 32], gr[kD / 32];
#pragma unroll
      for (int m = 0; m < kD / 32; ++m) {
        const int ch = lane + 32 * m;
        qr[m] = row < n ? qh[int64_t(row) * P + ch] : 0.0f;
        kr[m] = row < n ? kh[int64_t(row) * P + ch] : 0.0f;
        gr[m] = Gl[row * kD + ch];
      }
      for (int col = kTile * I; col < kTile * (I + 1); ++col) {
        float s_qk = 0.0f, s_kk = 0.0f;
        if (col <= row) {
#pragma unroll
          for (int m = 0; m < kD / 32; ++m) {
            const int ch = lane + 32 * m;
            const float kc = col < n ? kh[int64_t(col) * P + ch] : 0.0f;
            const float decayed_k = kc * __expf(gr[m] - Gl[col * kD + ch]);
            s_qk = fmaf(qr[m], decayed_k, s_qk);
            s_kk = fmaf(kr[m], decayed_k, s_kk);
          }
#pragma unroll
          for (int offset = 16; offset > 0; offset /= 2) {
            s_qk += __shfl_xor_sync(0xffffffffu, s_qk, offset);
            s_kk += __shfl_xor_sync(0xffffffffu, s_kk, offset);
          }
        }
        if (lane == 0) {
          aqk_out[row * kChunk + col] = to_operand<Operand>(s_qk);  // 0 above the diagonal
          if (col < row) Ls[row * kLdL + col] = bs[row] * s_kk;
        }
      }
    }
    __syncthreads();  // the diagonal blocks of L
    if (warp >= 4) invert_diagonal_block(Ls, Xs, warp - 4, lane);
  }

  {
    // U's B operand, this warp's 16 value columns of v (64 bytes of each row), is read after the transform: ask the
    // L2 for it now, lane L for rows L and L + 32.
#pragma unroll
    for (int r = lane; r < kChunk; r += 32)
      if (r < n) prefetch_l2_line(vh + int64_t(r) * P + kTile * warp);
  }
  __syncthreads();  // L's off-diagonal tiles and X's diagonal blocks

  // X_10 = −X_11 (L_10 X_00) and X_32 = −X_33 (L_32 X_22): thread (block b, row r, columns c0 .. c0 + 3).
  const int sb_block = tid / 64, s_row = (tid / 4) % kTile, s_c0 = 4 * (tid % 4);
  const int s_i = 2 * sb_block + 1, s_j = 2 * sb_block;
  if (tid < 128) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float* l_row = Ls + (kTile * s_i + s_row) * kLdL + kTile * s_j;
    for (int p = s_c0; p < kTile; ++p) {  // X_jj[p][c] = 0 for p < c
      const float l = l_row[p];
      const float4 x = *reinterpret_cast<const float4*>(Xs + (kTile * s_j + p) * kLdX + kTile * s_j + s_c0);
      acc = fma4(l, x, acc);
    }
    *reinterpret_cast<float4*>(Ts + s_row * kLdT + kTile * sb_block + s_c0) = acc;
  }
  __syncthreads();
  if (tid < 128) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float* x_row = Xs + (kTile * s_i + s_row) * kLdX + kTile * s_i;
    for (int p = 0; p <= s_row; ++p) {  // X_ii is lower triangular
      const float x = x_row[p];
      const float4 tv = *reinterpret_cast<const float4*>(Ts + p * kLdT + kTile * sb_block + s_c0);
      acc = fma4(x, tv, acc);
    }
    *reinterpret_cast<float4*>(Xs + (kTile * s_i + s_row) * kLdX + kTile * s_j + s_c0) =
        make_float4(-acc.x, -acc.y, -acc.z, -acc.w);
  }
  __syncthreads();
  // Rows 32..63, columns 0..31: X_hl = −X_hh (L_hl X_ll), thread (row r, columns c0 .. c0 + 3).
  const int h_row = tid / 8, h_c0 = 4 * (tid % 8);
  {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float* l_row = Ls + (2 * kTile + h_row) * kLdL;
    for (int p = kTile * (h_c0 / kTile); p < 2 * kTile; ++p) {  // X_ll's block (0, 1) is zero
      const float l = l_row[p];
      const float4 x = *reinterpret_cast<const float4*>(Xs + p * kLdX + h_c0);
      acc = fma4(l, x, acc);
    }
    *reinterpret_cast<float4*>(Ts + h_row * kLdT + h_c0) = acc;
  }
  __syncthreads();
  {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float* x_row = Xs + (2 * kTile + h_row) * kLdX + 2 * kTile;
    for (int p = 0; p <= h_row; ++p) {  // X_hh is lower triangular
      const float x = x_row[p];
      const float4 tv = *reinterpret_cast<const float4*>(Ts + p * kLdT + h_c0);
      acc = fma4(x, tv, acc);
    }
    *reinterpret_cast<float4*>(Xs + (2 * kTile + h_row) * kLdX + h_c0) = make_float4(-acc.x, -acc.y, -acc.z, -acc.w);
  }
  __syncthreads();  // X complete

  // U = X (β ⊙ V), then W = X (β e^G ⊙ K) with B read back from W's slot (written before the barriers above): each
  // warp reads its own 16 columns there, all of them before it writes any.
  const int col = kTile * warp + gq;
  {
    uint32_t b[kChunk / 8][2][2];
#pragma unroll
    for (int kb = 0; kb < kChunk / 8; ++kb)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = 8 * kb + 2 * tq + e;
          b[kb][hh][e] = tf32_rna(r < n ? bs[r] * vh[int64_t(r) * P + col + 8 * hh] : 0.0f);
        }
    lower_triangular_product<false>(Xs, b, u_out + kTile * warp, gq, tq);
  }
  // X's fragments are read again below rather than kept in registers from the product above (a warp barrier orders
  // shared-memory reads, so the compiler cannot reuse them across it).
  __syncwarp();
  {
    uint32_t b[kChunk / 8][2][2];
#pragma unroll
    for (int kb = 0; kb < kChunk / 8; ++kb)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          b[kb][hh][e] = tf32_rna(operand_value(w_out[(8 * kb + 2 * tq + e) * kD + col + 8 * hh]));
    lower_triangular_product<true>(Xs, b, w_out + kTile * warp, gq, tq);
  }
}

}  // namespace

template <typename Operand>
cudaError_t launch_intra_factored(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                  int tokens, int heads, int chunks, WorkspaceOf<Operand> ws, bool tensor_diagonal,
                                  cudaStream_t stream) {
  const auto kernel =
      tensor_diagonal ? kda_chunk_intra_factored<true, Operand> : kda_chunk_intra_factored<false, Operand>;
  const size_t smem_bytes = tensor_diagonal ? kSmemBytes : kSmemExactBytes;
  // Per call: the attributes belong to the current device.
  if (const cudaError_t status = allow_dynamic_shared_memory(kernel, int(smem_bytes)); status != cudaSuccess)
    return status;
  kernel<<<dim3(unsigned(chunks), unsigned(heads)), kThreads, smem_bytes, stream>>>(q, k, v, g, beta, tokens, heads,
                                                                                    ws);
  return cudaGetLastError();
}

template cudaError_t launch_intra_factored<__half>(const float*, const float*, const float*, const float*, const float*,
                                                   int, int, int, WorkspaceF16, bool, cudaStream_t);

}  // namespace k3::kernels::kda_chunk
