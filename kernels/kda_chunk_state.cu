// kda_chunk_state: the state pass (phase 2) of the KDA chunked prefill's ut_factored_split_key version
// (kernels/kda_chunk_prefill.h): block (vb, h) carries the value columns [32vb, 32vb + 32) of S[h] through every
// 64-token chunk in order, per chunk
//   V'ᵀ = Uᵀ − Sᵀ Wᵀ,  Oᵀ = Sᵀ Qgᵀ + V'ᵀ A_qkᵀ,  Sᵀ ← Sᵀ Diag(e^{G_last}) + V'ᵀ Kd,
// on mma.sync m16n8k8 (TF32 operands rounded to nearest, fp32 accumulation), as split_value's state pass, but with
// 8 warps per block instead of 2, so that each warp's chain of products per chunk is about a quarter as long.
// Warp w takes the value half vh = w % 2 (16 columns, the M edge of every product) and the quarter p = w / 2:
//   - it alone updates Sᵀ's 16 values × 32 keys [32p, 32p + 32): Sᵀ ← Sᵀ Diag(e^{G_last}) + V'ᵀ Kd[:, its keys]
//     needs no exchange (the slice in 16 fp32 registers per lane from step 4 to step 6 below);
//   - it computes V'ᵀ and Oᵀ whole, over all 128 keys, for its two token tiles {p, 7 − p} (8 tokens each; the pair
//     balances Oᵀ's triangular A_qk term at 9 products per warp): the keys' sum is not split, so there is no
//     reduction between warps. The block's Sᵀ (32 × 128, fp32) lives in shared memory (St) between chunks, where
//     every warp reads its A operands; V' goes to shared memory (Vs, TF32-rounded) for the products that contract
//     over tokens.
// Per warp and chunk: 64 products for V'ᵀ and Sᵀ Qgᵀ, 9 for V'ᵀ A_qkᵀ, 32 for the state (105; split_value's warps
// do about 450). A chunk is 7 steps, one block barrier each; each step's operands come through a ring of 3 shared
// buffers, copied with cp.async two steps ahead (one commit group per step, cp.async.wait_group 1 and a barrier
// before a step reads; a buffer is refilled only at the barrier after the step that read it):
//   steps 0..3: W's and Qg's key quarter q (64 tokens × 32 keys each): V'ᵀ, Oᵀ += Sᵀ[:, quarter q] (W, Qg)ᵀ; step 2's
//     group also brings U's 32 columns into the Vs area (free from the barrier of step 0: the previous chunk's step
//     6 is done); after step 3 each lane reads its U elements there and writes V'ᵀ = Uᵀ − (that sum) to the same
//     addresses (no warp touches another's elements);
//   step 4: A_qk and e^{G_last}: Oᵀ += V'ᵀ A_qkᵀ (every warp's V'ᵀ tiles, after the step's barrier), O stored
//     (tokens ≥ n of a partial last chunk are not), the warp's slice of St into registers, Sᵀ ← Sᵀ Diag(e^{G_last});
//   steps 5, 6: Kd rows 0..31, 32..63: Sᵀ += V'ᵀ Kd over those tokens; after step 6 the slice goes back to St (every
//     warp read St in steps 0..3, before the barriers of steps 4..6; the next chunk reads it after step 0's barrier).
// Rows ≥ n of a partial chunk are zero in the workspace (phase 1 pads q, k, v, β with zeros), so they add nothing.
// Layouts: St and the W/Qg and A_qk buffers, read as float2 pairs at (row g (+ 8), column 2t), are unpadded with
// their columns XOR-swizzled by 8 · (row mod 4), so each half warp reads 32 distinct banks; every row a lane reads
// there is ≡ g (mod 4), so one per-lane swizzle serves them all. Vs holds V' token-major, [64 tokens][32 values],
// the values XOR-swizzled by 8 · ((token / 2) mod 4), so U arrives by 16-byte copies and the A fragments of V'ᵀ are
// four conflict-free scalar reads. Kd, read as scalars at (rows 2t, 2t + 1, column g), is padded to a row stride of
// 132. W, Qg, Kd and A_qk are read by the 4 blocks of a head, U once (as split_value).
// Addressing: each shared read is a per-lane base plus the 8-column block's swizzled offset plus a compile-time
// offset; the lane's bases are rebuilt at the start of each step (from opaque(tid)) instead of being held across the
// chunk, and the key-block loops are not unrolled, which keeps ptxas within the 80 registers of three blocks per SM
// without spilling (sm_90: 76 registers, 75,264 bytes of dynamic shared memory). On an H200 at 8K tokens × 96
// heads: 1.14 ms, 608 M instructions, against 1.39 ms and 819 M for this pass's first form, which computed every
// address (swizzle, row and copy offsets) where it was used and read U from global memory (the same products, order
// and roundings, so the same results bit for bit; bench/results/2026-11-30-h200-kernels-8). Keeping Sᵀ in
// registers across the whole chunk, as split_value does, spilled.
// Numerics: the same TF32 roundings as split_value's state pass (every operand rounded to nearest; V'ᵀ once, into Vs;
// W, Qg, Kd and A_qk once, by phase 1, which stores them TF32-rounded: kernels/kda_chunk_intra.h, so they go to the
// products as they are, with no conversion here; U and e^{G_last} are fp32) and the same products; the 128-key sums
// run as four 32-key quarters in one accumulator (each 8-key group in the order (0, 2, 4, 6, 1, 3, 5, 7) inside the
// mma), so results differ from the other versions' in fp32 summation order only.
#include "kernels/kda_chunk_state.h"
#include "kernels/shared_memory_config.h"

#include <cstdint>
#include <type_traits>

namespace k3::kernels::kda_chunk {

namespace {

constexpr int kThreads = 256;  // 8 warps
constexpr int kValueBlock = 32;  // value columns per block
constexpr int kValueBlocks = kD / kValueBlock;
constexpr int kWarpValues = 16;  // value columns per warp: the M edge of m16n8k8
constexpr int kQuarter = 32;     // keys per quarter (a warp's slice of S, one step's W and Qg columns)
constexpr int kKdRows = 32;      // Kd rows per step
constexpr int kStepsPerChunk = 7;
constexpr int kStages = 3;  // ring buffers; each step's copy is issued kStages − 1 steps ahead
static_assert(kValueBlock == 2 * kWarpValues && kD == 4 * kQuarter && kChunk == 2 * kKdRows, "the warp roles");

// Shared memory, in floats. St [32 values][128 keys], Vs [64 tokens][32 values] (U, then V'), then the ring. A
// buffer holds W's key quarter at 0 and Qg's at kStageQg ([64 tokens][32 keys] each), or A_qk [64][64] at 0 and
// e^{G_last} at kStageDecay, or Kd rows [32][kLdKd].
constexpr int kLdKd = kD + 4;
constexpr int kSmemSt = 0;
constexpr int kSmemVs = kSmemSt + kValueBlock * kD;
constexpr int kSmemStages = kSmemVs + kValueBlock * kChunk;
constexpr int kStageQg = kChunk * kQuarter;
constexpr int kStageDecay = kChunk * kChunk;
constexpr int kStageFloats = kKdRows * kLdKd;  // 4224, the largest step's
static_assert(kStageQg + kChunk * kQuarter <= kStageFloats && kStageDecay + kD <= kStageFloats,
              "every step's operands must fit one buffer");
static_assert(kSmemVs % 4 == 0 && kSmemStages % 4 == 0 && kStageQg % 4 == 0 && kStageDecay % 4 == 0 &&
                  kStageFloats % 4 == 0 && kLdKd % 4 == 0,
              "cp.async destinations must be 16-byte aligned");
constexpr int kSmemFloats = kSmemStages + kStages * kStageFloats;
constexpr size_t kSmemBytes = size_t(kSmemFloats) * sizeof(float);  // 75,264
static_assert(3 * (kSmemBytes + 1024) <= 228 * 1024, "three blocks (and their reserved 1 KB) must fit an SM");

// Column of (row, col) in an array of 32, 64 or 128 columns whose float2 pairs are read at (row g (+ 8), column
// 8kb + 2t): banks 8 · ((kb ⊕ g) mod 4) + 2t over a half warp (g < 4 or g ≥ 4, row mod 4 = g mod 4). Moves
// 16-byte pieces (column multiples of 4) as wholes and keeps a column within its row.
__device__ __forceinline__ int swizzle(int row, int col) { return col ^ ((row & 3) << 3); }

__device__ __forceinline__ float tf32_value(float x) { return __uint_as_float(tf32_rna(x)); }

// The ring buffer holding step kStep of a chunk whose step 0 is in buffer `ring` (0..2).
template <int kStep>
__device__ __forceinline__ float* ring_buffer(float* smem, int ring) {
  int i = ring + kStep % kStages;
  if (i >= kStages) i -= kStages;
  return smem + kSmemStages + i * kStageFloats;
}

// Column of value v (0..31) of token `token` in the token-major Vs area.
__device__ __forceinline__ int vs_col(int token, int v) { return v ^ (((token >> 1) & 3) << 3); }

struct Copies {
  float* smem;
  Workspace ws;
  int64_t blk0;
  int chunks, tid, value_block0;  // value_block0: the block's first value column of the head

  // One group (empty past the last chunk): step kStep of `chunk`, whose step 0 uses ring buffer `ring`.
  template <int kStep>
  __device__ __forceinline__ void issue(int chunk, int ring) const {
    if (chunk < chunks) {
      const int tid = opaque(this->tid);
      const int64_t b = blk0 + chunk;
      float* buf = ring_buffer<kStep>(smem, ring);
      if constexpr (kStep < 4) {
        const int r = tid / 8, c = 4 * (tid % 8);  // rows r, r + 32 of 64; 16 bytes each of W and Qg
        float* dst = buf + r * kQuarter + swizzle(r, c);
        const int src = r * kD + c + kQuarter * kStep;
        const float* w = ws.w(b) + src;
        const float* qg = ws.qg(b) + src;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          cp_async_16(dst + i * 32 * kQuarter, w + i * 32 * kD);
          cp_async_16(dst + kStageQg + i * 32 * kQuarter, qg + i * 32 * kD);
        }
        if constexpr (kStep == 2) {  // U's 32 columns into the Vs area (free: the previous chunk's step 6 is done)
          const float* u = ws.u(b) + r * kD + value_block0 + c;
          float* vs = smem + kSmemVs;
#pragma unroll
          for (int i = 0; i < 2; ++i) cp_async_16(vs + (r + 32 * i) * kValueBlock + vs_col(r, c), u + i * 32 * kD);
        }
      } else if constexpr (kStep == 4) {
        const int r = tid / 16, c = 4 * (tid % 16);  // rows r + 16i of A_qk's 64
        float* dst = buf + r * kChunk + swizzle(r, c);
        const float* a = ws.a_qk(b) + r * kChunk + c;
#pragma unroll
        for (int i = 0; i < 4; ++i) cp_async_16(dst + i * 16 * kChunk, a + i * 16 * kChunk);
        if (tid < kD / 4) cp_async_16(buf + kStageDecay + 4 * tid, ws.decay(b) + 4 * tid);
      } else {
        static_assert(kStep == 5 || kStep == 6, "seven steps per chunk");
        const int r = tid / 32, c = 4 * (tid % 32);  // rows r + 8i of the step's 32 Kd rows
        float* dst = buf + r * kLdKd + c;
        const float* kd = ws.kd(b) + (kStep - 5) * kKdRows * kD + r * kD + c;
#pragma unroll
        for (int i = 0; i < 4; ++i) cp_async_16(dst + i * 8 * kLdKd, kd + i * 8 * kD);
      }
    }
    cp_async_commit();
  }
  // Waits for step kStep of the chunk whose step 0 uses buffer `ring`, refills the buffer the
  // previous step read (every thread is past it) with the step kStages − 1 ahead, returns step kStep's buffer.
  template <int kStep>
  __device__ __forceinline__ const float* begin(int chunk, int ring) const {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    constexpr int kAhead = kStep + kStages - 1;
    // Chunk c + 1's step 0 uses buffer ring + 7 ≡ ring + 1 (mod 3).
    const int ring_ahead = kAhead / kStepsPerChunk == 0 ? ring : (ring == kStages - 1 ? 0 : ring + 1);
    issue<kAhead % kStepsPerChunk>(chunk + kAhead / kStepsPerChunk, ring_ahead);
    return ring_buffer<kStep>(smem, ring);
  }
};

// A lane's shared-memory bases (g = lane / 4, t = lane % 4; the warp's value rows row0 + g, + 8): col(kb) is the
// swizzled column of logical 8-column block kb < 4 in St and the W/Qg buffers (+ 32m for block 4m + kb); vs[e] is
// V'(value row0 + g + 8e, token 2t) in the Vs area (token 2t + 1 at + 32, token + 8kb at + 256kb).
struct LaneLayout {
  int sw, t2;
  float* st_row;       // St's row g of the warp's 16 (row g + 8 at + 8·kD)
  float* vs[2];
  int w_row0, w_row1;  // the rows 8·tile + g of the warp's two token tiles in a W/Qg buffer
  int key0;            // the warp's keys of S
  int kd_lane;         // Kd[2t][key0 + g] in a Kd buffer
  __device__ __forceinline__ int col(int kb) const { return ((8 * kb) ^ sw) + t2; }
};

__device__ __forceinline__ LaneLayout lane_layout(float* smem, int tid) {
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int row0 = kWarpValues * (warp % 2), p = warp / 2;
  LaneLayout l;
  l.sw = (g & 3) << 3;
  l.t2 = 2 * t;
  l.st_row = smem + kSmemSt + (row0 + g) * kD;
  float* vs_token = smem + kSmemVs + 2 * t * kValueBlock;
  l.vs[0] = vs_token + vs_col(2 * t, row0 + g);
  l.vs[1] = vs_token + vs_col(2 * t, row0 + g + 8);
  l.w_row0 = (8 * p + g) * kQuarter;
  l.w_row1 = (8 * (kChunk / 8 - 1 - p) + g) * kQuarter;
  l.key0 = kQuarter * p;
  l.kd_lane = 2 * t * kLdKd + l.key0 + g;
  return l;
}

// The A fragment of V'ᵀ (values row0 .. row0 + 15) over tokens 8kb .. 8kb + 7, in the permuted order (logical column
// t is token 8kb + 2t, t + 4 is 8kb + 2t + 1): V' is TF32-rounded in Vs.
__device__ __forceinline__ void load_vs_a(uint32_t (&a)[4], const LaneLayout& l, int kb) {
  const int at = 8 * kb * kValueBlock;
  a[0] = __float_as_uint(l.vs[0][at]);
  a[1] = __float_as_uint(l.vs[1][at]);
  a[2] = __float_as_uint(l.vs[0][at + kValueBlock]);
  a[3] = __float_as_uint(l.vs[1][at + kValueBlock]);
}

__global__ void __launch_bounds__(kThreads, 3)
    kda_chunk_state_pass_split_key(Workspace ws, float* __restrict__ state, float* __restrict__ out, int tokens,
                                   int heads, int chunks) {
  extern __shared__ __align__(128) float smem[];
  const int vb = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int vh = warp % 2, p = warp / 2;
  const int value0 = kValueBlock * vb + kWarpValues * vh;  // the warp's first value column of the head
  const int key0 = kQuarter * p;
  const int tile0 = p, tile1 = kChunk / 8 - 1 - p;  // the warp's token tiles of V' and O
  const int64_t P = int64_t(heads) * kD;
  const Copies copies{smem, ws, int64_t(h) * chunks, chunks, tid, kValueBlock * vb};

  copies.issue<0>(0, 0);
  copies.issue<1>(0, 0);
  // s[kb] = Sᵀ's key tile kb of the warp's quarter: s[kb][e] = S[key0 + 8kb + 2t + (e & 1)][value0 + g + 8(e >> 1)],
  // held in St between chunks and in registers from step 4 to step 6.
  float s[kQuarter / 8][4];
  {
    const float* s_global = state + int64_t(h) * kD * kD + value0;
#pragma unroll
    for (int kb = 0; kb < kQuarter / 8; ++kb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[kb][e] = s_global[(key0 + 8 * kb + 2 * t + (e & 1)) * kD + g + 8 * (e >> 1)];
  }
  const auto move_st = [&](auto store) {
    const LaneLayout l = lane_layout(smem, opaque(tid));
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
      float2* lo = reinterpret_cast<float2*>(l.st_row + l.key0 + l.col(kb));
      float2* hi = reinterpret_cast<float2*>(l.st_row + 8 * kD + l.key0 + l.col(kb));
      if constexpr (decltype(store)::value) {
        *lo = make_float2(s[kb][0], s[kb][1]);
        *hi = make_float2(s[kb][2], s[kb][3]);
      } else {
        const float2 x = *lo, y = *hi;
        s[kb][0] = x.x, s[kb][1] = x.y, s[kb][2] = y.x, s[kb][3] = y.y;
      }
    }
  };
  move_st(std::true_type{});  // read after step 0's barrier

  float vp[2][4], o[2][4];
  // Steps 0..3: vp[j] += Sᵀ Wᵀ and o[j] += Sᵀ Qgᵀ over key quarter kQ .
  const auto quarter = [&](const float* buf, auto quarter_index) {
    constexpr int kQ = decltype(quarter_index)::value;
    const LaneLayout l = lane_layout(smem, opaque(tid));
#pragma unroll 1
    for (int kb = 0; kb < kQuarter / 8; ++kb) {
      const float2 lo = *reinterpret_cast<const float2*>(l.st_row + kQuarter * kQ + l.col(kb));
      const float2 hi = *reinterpret_cast<const float2*>(l.st_row + 8 * kD + kQuarter * kQ + l.col(kb));
      const uint32_t a[4] = {tf32_rna(lo.x), tf32_rna(hi.x), tf32_rna(lo.y), tf32_rna(hi.y)};
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float* at = buf + (j == 0 ? l.w_row0 : l.w_row1) + l.col(kb);
        const float2 w2 = *reinterpret_cast<const float2*>(at);
        const float2 q2 = *reinterpret_cast<const float2*>(at + kStageQg);
        mma_tf32(vp[j], a, __float_as_uint(w2.x), __float_as_uint(w2.y));  // W, Qg: TF32 in the workspace
        mma_tf32(o[j], a, __float_as_uint(q2.x), __float_as_uint(q2.y));
      }
    }
  };
  // Steps 5, 6: Sᵀ += V'ᵀ Kd over the tokens [32·kHalf, 32·kHalf + 32) and the warp's keys .
  const auto state_half = [&](const float* kd_rows, auto half_index) {
    constexpr int kHalf = decltype(half_index)::value;
    const LaneLayout l = lane_layout(smem, opaque(tid));
#pragma unroll 1
    for (int kt = 0; kt < kKdRows / 8; ++kt) {
      uint32_t a[4];
      load_vs_a(a, l, kKdRows * kHalf / 8 + kt);
      const float* row = kd_rows + 8 * kt * kLdKd + l.kd_lane;  // Kd[32kHalf + 8kt + 2t][key0 + g]
#pragma unroll
      for (int kb = 0; kb < kQuarter / 8; ++kb)
        mma_tf32(s[kb], a, __float_as_uint(row[8 * kb]), __float_as_uint(row[kLdKd + 8 * kb]));  // Kd: TF32
    }
  };

  int ring = 0;  // the ring buffer of the chunk's step 0: chunk mod 3
  for (int chunk = 0; chunk < chunks; ++chunk) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) vp[j][e] = o[j][e] = 0.0f;
    quarter(copies.begin<0>(chunk, ring), std::integral_constant<int, 0>{});
    quarter(copies.begin<1>(chunk, ring), std::integral_constant<int, 1>{});
    quarter(copies.begin<2>(chunk, ring), std::integral_constant<int, 2>{});  // U is in the Vs area from here
    quarter(copies.begin<3>(chunk, ring), std::integral_constant<int, 3>{});
    const LaneLayout l = lane_layout(smem, opaque(tid));
    // V'ᵀ = Uᵀ − Sᵀ Wᵀ, TF32-rounded, over the lane's U elements in the Vs area (read by every warp after step 4's
    // barrier).
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int at = 8 * (j == 0 ? tile0 : tile1) * kValueBlock;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float* x = l.vs[e >> 1] + at + (e & 1) * kValueBlock;
        *x = tf32_value(*x - vp[j][e]);
      }
    }

    const int64_t t0 = int64_t(chunk) * kChunk;
    const int n = tokens - t0 < kChunk ? int(tokens - t0) : kChunk;
    {
      // Step 4: Oᵀ += V'ᵀ A_qkᵀ over the tokens up to each tile's last; O out; Sᵀ ← Sᵀ Diag(e^{G_last}).
      const float* buf = copies.begin<4>(chunk, ring);
      float* out_chunk = out + t0 * P + int64_t(h) * kD + value0;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int tile = j == 0 ? tile0 : tile1;
        const float* a_row = buf + (8 * tile + g) * kChunk + l.t2;  // A_qk[8·tile + g][8kb + 2t ..]
        for (int kb = 0; kb <= tile; ++kb) {
          uint32_t a[4];
          load_vs_a(a, l, kb);
          const float2 b = *reinterpret_cast<const float2*>(a_row + ((8 * kb) ^ l.sw));
          mma_tf32(o[j], a, __float_as_uint(b.x), __float_as_uint(b.y));  // A_qk: TF32 in the workspace
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int token = 8 * tile + 2 * t + (e & 1);
          if (token < n) out_chunk[token * P + g + 8 * (e >> 1)] = o[j][e];
        }
      }
      move_st(std::false_type{});
      decay_state_tiles(s, buf + kStageDecay + l.key0 + l.t2);
    }
    state_half(copies.begin<5>(chunk, ring), std::integral_constant<int, 0>{});
    state_half(copies.begin<6>(chunk, ring), std::integral_constant<int, 1>{});
    move_st(std::true_type{});  // every warp's reads of St for this chunk were before step 4's barrier
    ring = ring == kStages - 1 ? 0 : ring + 1;
  }
  cp_async_wait<0>();

  move_st(std::false_type{});
  float* s_global = state + int64_t(h) * kD * kD + value0;
#pragma unroll
  for (int kb = 0; kb < kQuarter / 8; ++kb)
#pragma unroll
    for (int e = 0; e < 4; ++e) s_global[(key0 + 8 * kb + 2 * t + (e & 1)) * kD + g + 8 * (e >> 1)] = s[kb][e];
}

}  // namespace

cudaError_t launch_state_pass_split_key(Workspace ws, float* state, float* out, int tokens, int heads, int chunks,
                                        cudaStream_t stream) {
  const auto pass = kda_chunk_state_pass_split_key;
  // Per call: the attributes belong to the current device; three blocks per SM need the largest carveout.
  if (const cudaError_t status = allow_dynamic_shared_memory(pass, int(kSmemBytes)); status != cudaSuccess)
    return status;
  pass<<<dim3(kValueBlocks, unsigned(heads)), kThreads, kSmemBytes, stream>>>(ws, state, out, tokens, heads, chunks);
  return cudaGetLastError();
}

}  // namespace k3::kernels::kda_chunk
