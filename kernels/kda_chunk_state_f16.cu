// kda_chunk_state_f16: the state pass (phase 2) of the KDA chunked prefill's ut_factored_split_key_f16 version
// (kernels/kda_chunk_prefill.h), with fp16 product operands: phase 1 stores W, Qg, Kd and A_qk in fp16
// (WorkspaceF16, kernels/kda_chunk_intra.h: 88.5 instead of 144.5 KB per head and chunk in fp32, U and e^{G_last}
// still fp32), and every product runs on mma.sync m16n8k16 (fp16 operands rounded to nearest, fp32 accumulation)
// with its fragments loaded by ldmatrix, so a warp issues half the products of a TF32 pass and no operand
// conversions.
// Block (vb, h) carries the value columns [32vb, 32vb + 32) of S[h] through every 64-token chunk in order:
//   V'ᵀ = Uᵀ − Sᵀ Wᵀ,  Oᵀ = Sᵀ Qgᵀ + V'ᵀ A_qkᵀ,  Sᵀ ← Sᵀ Diag(e^{G_last}) + V'ᵀ Kd.
// Warp w takes the value half vh = w % 2 (16 columns, the M edge of every product) and the quarter p = w / 2:
//   - it alone holds and updates Sᵀ's 16 values × 32 keys [32p, 32p + 32) in fp32 registers, from the first chunk to
//     the last (16 per lane); after each chunk it stores them rounded to fp16 in Sh, the block's Sᵀ copy that every
//     warp reads its A operands from;
//   - it computes V'ᵀ and Oᵀ whole, over all 128 keys, for its two 8-token tiles {p, 7 − p} (the pair balances Oᵀ's
//     triangular A_qk term at 5 products per warp), so there is no reduction between warps. V' goes to shared
//     memory in fp16 (Vh) for the products that contract over tokens.
// Per warp and chunk: 32 products for V'ᵀ and Sᵀ Qgᵀ, 5 for V'ᵀ A_qkᵀ, 16 for the state (53).
// A chunk is 7 steps, one block barrier each; each step's operands come through a ring of 4 shared buffers, copied
// with cp.async three steps ahead (one commit group per step; cp.async.wait_group 2 and a barrier before a step reads;
// a buffer is refilled at the barrier after the step that read it):
//   steps 0..3: W's and Qg's key quarter q (64 tokens × 32 keys each): V'ᵀ, Oᵀ += Sᵀ[:, quarter q] (W, Qg)ᵀ; step 2's
//     group also brings U's 32 columns (fp32) into Us; after step 3 each lane writes V'ᵀ = Uᵀ − (that sum) for its
//     own elements into Vh;
//   step 4: A_qk and e^{G_last}: Oᵀ += V'ᵀ A_qkᵀ (every warp's V' tiles, after the step's barrier), O stored (tokens
//     ≥ n of a partial last chunk are not), Sᵀ ← Sᵀ Diag(e^{G_last});
//   steps 5, 6: Kd rows 0..31, 32..63: Sᵀ += V'ᵀ Kd over those tokens; then the warp's slice goes to Sh (every warp
//     read Sh in steps 0..3, before the barriers of steps 4..6; the next chunk reads it after step 0's barrier).
// Rows ≥ n of a partial chunk are zero in the workspace (phase 1 pads q, k, v, β with zeros), so they add nothing.
// Layouts (fp16 unless noted; every row is 16-byte pieces, each ldmatrix reads 8 rows of one piece column):
//   Sh [32 values][128 keys], the W and Qg buffers [64 tokens][32 keys], A_qk [64][64], Kd rows [32][128], Vh
//   [64 tokens][32 values]: the piece index XOR-swizzled by the row (row mod 8 for 128- and 256-byte rows, (row / 2)
//   mod 4 for 64-byte rows), so every ldmatrix phase, and every lane's 4-byte store into Sh, meets 32 distinct banks;
//   Us (fp32) [64 tokens][32 values], the values XOR-swizzled by 8 · ((token / 2) mod 4).
//   Sᵀ, W, Qg and A_qk are read as they lie (ldmatrix); V'ᵀ and Kd, whose reduction index (tokens) runs along the
//   rows, by ldmatrix.trans.
// Resources (sm_90, ptxas): 80 registers (three blocks per SM) with 12 bytes spilled, 55,296 bytes of dynamic shared
// memory; the lane's shared-memory addresses are rebuilt at each use from opaque(tid).
// Numerics: every product operand rounded once to fp16 (nearest): W, Qg, Kd, A_qk by phase 1, Sᵀ and V' here; the
// state, U, e^{G_last} and every sum in fp32. fp16 keeps TF32's 10-bit mantissa, so inside fp16's range (normal
// magnitudes 6.1e-5 .. 65504) each operand's rounding is the TF32 passes'; smaller magnitudes (a decayed Kd or Qg
// entry) keep an absolute error below 3e-8, and S, V' and W must stay below 65504 in magnitude (they scale with v;
// Qg, Kd and A_qk are at most 1 for L2-normalised q and k).
#include "kernels/kda_chunk_state.h"
#include "kernels/ptx/ptx_mma.h"
#include "kernels/ptx/shared_memory_config.h"

#include <cuda_fp16.h>

#include <cstdint>

namespace k3::kernels::kda_chunk {

namespace {

using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma_f16;

constexpr int kThreads = 256;    // 8 warps
constexpr int kValueBlock = 32;  // value columns per block
constexpr int kValueBlocks = kD / kValueBlock;
constexpr int kWarpValues = 16;  // value columns per warp: the M edge of m16n8k16
constexpr int kQuarter = 32;     // keys per quarter (a warp's slice of S, one step's W and Qg columns)
constexpr int kKdRows = 32;      // Kd rows per step
constexpr int kStepsPerChunk = 7;
constexpr int kStages = 4;  // ring buffers; each step's copy is issued kStages − 1 steps ahead
static_assert(kValueBlock == 2 * kWarpValues && kD == 4 * kQuarter && kChunk == 2 * kKdRows, "the warp roles");

// Shared memory, in bytes.
constexpr int kSh = 0;                                 // Sᵀ, fp16 [32][128]: 256-byte rows
constexpr int kUs = kSh + kValueBlock * kD * 2;        // U, fp32 [64][32]: 128-byte rows
constexpr int kVh = kUs + kChunk * kValueBlock * 4;    // V', fp16 [64][32]: 64-byte rows
constexpr int kRing = kVh + kChunk * kValueBlock * 2;  // the ring's buffers
constexpr int kStageQg = kChunk * kQuarter * 2;        // W [64][32] at 0, Qg at 4096: 64-byte rows
constexpr int kStageDecay = kChunk * kChunk * 2;       // A_qk [64][64] at 0 (128-byte rows), e^{G_last} fp32
constexpr int kStageBytes = kStageDecay + kD * 4;      // 8704, the largest step's (Kd [32][128]: 8192)
static_assert(2 * kStageQg <= kStageBytes && kKdRows * kD * 2 <= kStageBytes, "every step's operands fit a buffer");
static_assert(kUs % 16 == 0 && kVh % 16 == 0 && kRing % 16 == 0 && kStageBytes % 16 == 0, "16-byte pieces");
constexpr int kSmemBytes = kRing + kStages * kStageBytes;  // 55,296
static_assert(3 * (kSmemBytes + 1024) <= 228 * 1024, "three blocks (and their reserved 1 KB) must fit an SM");

// Byte offset of 16-byte piece `piece` of row `row` in an array of 64-, 128- or 256-byte rows.
__device__ __forceinline__ int piece64(int row, int piece) { return row * 64 + ((piece ^ ((row >> 1) & 3)) << 4); }
__device__ __forceinline__ int piece128(int row, int piece) { return row * 128 + ((piece ^ (row & 7)) << 4); }
__device__ __forceinline__ int piece256(int row, int piece) { return row * 256 + ((piece ^ (row & 7)) << 4); }
// Float index of (token, value) in Us.
__device__ __forceinline__ int us_index(int token, int v) {
  return token * kValueBlock + (v ^ (((token >> 1) & 3) << 3));
}

struct Copies {
  uint32_t smem;  // the shared-memory base address
  WorkspaceF16 ws;
  int64_t blk0;
  int chunks, tid, value_block0;  // value_block0: the block's first value column of the head

  // One group (empty past the last chunk): step kStep of `chunk` into ring buffer `buffer`.
  template <int kStep>
  __device__ __forceinline__ void issue(int chunk, int buffer) const {
    if (chunk < chunks) {
      const int tid = opaque(this->tid);
      const int64_t b = blk0 + chunk;
      const uint32_t buf = smem + kRing + buffer * kStageBytes;
      if constexpr (kStep < 4) {
        const int row = tid / 4, piece = tid % 4;  // one 16-byte piece each of W and Qg
        const int src = row * kD + kQuarter * kStep + 8 * piece;
        ptx::cp_async_16(buf + piece64(row, piece), ws.w(b) + src, true);
        ptx::cp_async_16(buf + kStageQg + piece64(row, piece), ws.qg(b) + src, true);
        if constexpr (kStep == 2) {  // U's 32 columns (Us was last read before the previous chunk's step 4 barrier)
          const int r = tid / 8, c = 4 * (tid % 8);
          const float* u = ws.u(b) + r * kD + value_block0 + c;
#pragma unroll
          for (int i = 0; i < 2; ++i) ptx::cp_async_16(smem + kUs + 4 * us_index(r + 32 * i, c), u + i * 32 * kD, true);
        }
      } else if constexpr (kStep == 4) {
        const int row = tid / 8, piece = tid % 8;  // rows row, row + 32 of A_qk
        const __half* a = ws.a_qk(b) + row * kChunk + 8 * piece;
#pragma unroll
        for (int i = 0; i < 2; ++i) ptx::cp_async_16(buf + piece128(row + 32 * i, piece), a + i * 32 * kChunk, true);
        if (tid < kD / 4) ptx::cp_async_16(buf + kStageDecay + 16 * tid, ws.decay(b) + 4 * tid, true);
      } else {
        static_assert(kStep == 5 || kStep == 6, "seven steps per chunk");
        const int row = tid / 16, piece = tid % 16;  // rows row, row + 16 of the step's 32 Kd rows
        const __half* kd = ws.kd(b) + ((kStep - 5) * kKdRows + row) * kD + 8 * piece;
#pragma unroll
        for (int i = 0; i < 2; ++i) ptx::cp_async_16(buf + piece256(row + 16 * i, piece), kd + i * 16 * kD, true);
      }
    }
    ptx::cp_async_commit();
  }
  // Waits for step kStep of the chunk whose step 0 uses buffer `ring`, refills the buffer the previous step read
  // (every thread is past it) with the step kStages − 1 ahead, returns step kStep's buffer address.
  template <int kStep>
  __device__ __forceinline__ uint32_t begin(int chunk, int ring) const {
    asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 2) : "memory");
    __syncthreads();
    constexpr int kAhead = kStep + kStages - 1;
    issue<kAhead % kStepsPerChunk>(chunk + kAhead / kStepsPerChunk, (ring + kAhead) % kStages);
    return smem + kRing + ((ring + kStep) % kStages) * kStageBytes;
  }
};

// A lane's shared-memory addresses (bytes), rebuilt from opaque(tid) where they are used rather than held across the
// chunk loop (held, they spilled). Sᵀ's A operand for keys 16k .. 16k + 15: sh_a + ((2k << 4) ^ sh_x) (matrix m:
// rows + 8 (m & 1), piece + (m >> 1)). W's and Qg's B operands of tile j: buffer + w_at[j] (matrix m: piece m).
// A_qk's for tile j and tokens 16k .. 16k + 31 (k even): + aqk_at[j] + ((2k << 4) ^ aqk_x). V'ᵀ's A operand for tokens
// 16k ..: vh_a + 1024k (matrix m: tokens + 8 (m >> 1), values + 8 (m & 1)). Kd's B operand for the step's tokens
// 16k .. and the warp's key tiles 2i, 2i + 1: + kd_at + 4096k + ((2i << 4) ^ kd_x) (matrix m: tokens + 8 (m & 1),
// key tile + (m >> 1)). The lane's slice of Sᵀ, (value row0 + g (+ 8), keys key0 + 8kb + 2t, + 1), goes to Sh at
// byte sh_w + ((kb << 4) ^ sh_wx) (+ 2048).
struct Lane {
  uint32_t sh_a, vh_a;
  int sh_x, w_at[2], aqk_at[2], aqk_x, kd_at, kd_x, sh_w, sh_wx;
};

__device__ __forceinline__ Lane lane_addresses(uint32_t smem, int tid) {
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int r8 = lane % 8, m = lane / 8;  // an ldmatrix address lane: row r8 of matrix m
  const int vh = warp % 2, p = warp / 2, row0 = kWarpValues * vh;
  const int tiles[2] = {p, kChunk / 8 - 1 - p};
  Lane l;
  l.sh_a = smem + kSh + (row0 + r8 + 8 * (m & 1)) * 256;
  l.sh_x = ((m >> 1) ^ r8) << 4;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    l.w_at[j] = piece64(8 * tiles[j] + r8, m);
    l.aqk_at[j] = (8 * tiles[j] + r8) * 128;
  }
  l.aqk_x = (m ^ r8) << 4;
  l.vh_a = smem + kVh + piece64(r8 + 8 * (m >> 1), 2 * vh + (m & 1));
  l.kd_at = (r8 + 8 * (m & 1)) * 256;
  l.kd_x = ((4 * p) ^ (m >> 1) ^ r8) << 4;
  l.sh_w = kSh + (row0 + g) * 256 + 4 * t;
  l.sh_wx = ((4 * p) ^ g) << 4;
  return l;
}

__global__ void __launch_bounds__(kThreads, 3)
    kda_chunk_state_pass_split_key_f16(WorkspaceF16 ws, float* __restrict__ state, float* __restrict__ out, int tokens,
                                       int heads, int chunks) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem_bytes));
  const int vb = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int vh = warp % 2, p = warp / 2;
  const int row0 = kWarpValues * vh;           // the warp's first value row of the block
  const int value0 = kValueBlock * vb + row0;  // ... of the head
  const int key0 = kQuarter * p;
  const int tiles[2] = {p, kChunk / 8 - 1 - p};  // the warp's token tiles of V' and O
  const int64_t P = int64_t(heads) * kD;
  const Copies copies{smem, ws, int64_t(h) * chunks, chunks, tid, kValueBlock * vb};

  // s[kb] = Sᵀ's key tile kb of the warp's quarter: s[kb][e] = S[key0 + 8kb + 2t + (e & 1)][value0 + g + 8(e >> 1)].
  float s[kQuarter / 8][4];
  {
    const float* s_global = state + int64_t(h) * kD * kD + value0;
#pragma unroll
    for (int kb = 0; kb < kQuarter / 8; ++kb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[kb][e] = s_global[(key0 + 8 * kb + 2 * t + (e & 1)) * kD + g + 8 * (e >> 1)];
  }
  const auto store_sh = [&] {
    const Lane l = lane_addresses(smem, opaque(tid));
#pragma unroll
    for (int kb = 0; kb < kQuarter / 8; ++kb) {
      __half2* at = reinterpret_cast<__half2*>(smem_bytes + l.sh_w + ((kb << 4) ^ l.sh_wx));
      at[0] = __floats2half2_rn(s[kb][0], s[kb][1]);
      at[2048 / 4] = __floats2half2_rn(s[kb][2], s[kb][3]);
    }
  };
  copies.issue<0>(0, 0);
  copies.issue<1>(0, 1);
  copies.issue<2>(0, 2);
  store_sh();  // read after step 0's barrier

  float vp[2][4], o[2][4];
  // Steps 0..3: vp[j] += Sᵀ Wᵀ and o[j] += Sᵀ Qgᵀ over key quarter kQ.
  const auto quarter = [&](uint32_t buf, auto quarter_index) {
    constexpr int kQ = decltype(quarter_index)::value;
    const Lane l = lane_addresses(smem, opaque(tid));
    uint32_t a[2][4];
#pragma unroll
    for (int k = 0; k < 2; ++k) ldmatrix_x4(a[k], l.sh_a + (((2 * (2 * kQ + k)) << 4) ^ l.sh_x));
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      uint32_t bw[4], bq[4];
      ldmatrix_x4(bw, buf + l.w_at[j]);
      ldmatrix_x4(bq, buf + kStageQg + l.w_at[j]);
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        mma_f16(vp[j], a[k], bw[2 * k], bw[2 * k + 1]);
        mma_f16(o[j], a[k], bq[2 * k], bq[2 * k + 1]);
      }
    }
  };
  // Steps 5, 6: Sᵀ += V'ᵀ Kd over the tokens [32·kHalf, 32·kHalf + 32) and the warp's keys.
  const auto state_half = [&](uint32_t buf, auto half_index) {
    constexpr int kHalf = decltype(half_index)::value;
    const Lane l = lane_addresses(smem, opaque(tid));
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      uint32_t a[4];
      ldmatrix_x4_trans(a, l.vh_a + 1024 * (2 * kHalf + k));
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, buf + l.kd_at + 4096 * k + (((2 * i) << 4) ^ l.kd_x));
        mma_f16(s[2 * i], a, b[0], b[1]);
        mma_f16(s[2 * i + 1], a, b[2], b[3]);
      }
    }
  };

  const float* us = reinterpret_cast<const float*>(smem_bytes + kUs);
  __half* const vh_out = reinterpret_cast<__half*>(smem_bytes + kVh);
  int ring = 0;  // the ring buffer of the chunk's step 0: 7·chunk mod 4
  for (int chunk = 0; chunk < chunks; ++chunk) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) vp[j][e] = o[j][e] = 0.0f;
    quarter(copies.begin<0>(chunk, ring), std::integral_constant<int, 0>{});
    quarter(copies.begin<1>(chunk, ring), std::integral_constant<int, 1>{});
    quarter(copies.begin<2>(chunk, ring), std::integral_constant<int, 2>{});  // U is in Us from here
    quarter(copies.begin<3>(chunk, ring), std::integral_constant<int, 3>{});
    {
      // V'ᵀ = Uᵀ − Sᵀ Wᵀ over the lane's elements (token 8·tile + 2t + (e & 1), value row0 + g + 8(e >> 1)), into Vh
      // (read by every warp after step 4's barrier).
      const int lane_tid = opaque(tid), w = lane_tid / 32, tg = (lane_tid % 32) / 4, tt = lane_tid % 4;
      const int whalf = w % 2, wp = w / 2;
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int token = 8 * (j == 0 ? wp : kChunk / 8 - 1 - wp) + 2 * tt + (e & 1);
          const int v = kWarpValues * whalf + tg + 8 * (e >> 1);
          vh_out[(token * 64 + (((2 * whalf + (e >> 1)) ^ tt) << 4)) / 2 + tg] =
              __float2half_rn(us[us_index(token, v)] - vp[j][e]);
        }
    }

    const int64_t t0 = int64_t(chunk) * kChunk;
    const int n = tokens - t0 < kChunk ? int(tokens - t0) : kChunk;
    {
      // Step 4: Oᵀ += V'ᵀ A_qkᵀ over the 16-token blocks up to each tile's own; O out; Sᵀ ← Sᵀ Diag(e^{G_last}).
      const uint32_t buf = copies.begin<4>(chunk, ring);
      const Lane l = lane_addresses(smem, opaque(tid));
      float* out_chunk = out + t0 * P + int64_t(h) * kD + value0;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int blocks = tiles[j] / 2 + 1;  // A_qk is zero past the 16-token diagonal block
        for (int k = 0; k < blocks; k += 2) {
          uint32_t b[4], a[4];
          ldmatrix_x4(b, buf + l.aqk_at[j] + (((2 * k) << 4) ^ l.aqk_x));
          ldmatrix_x4_trans(a, l.vh_a + 1024 * k);
          mma_f16(o[j], a, b[0], b[1]);
          if (k + 1 < blocks) {
            ldmatrix_x4_trans(a, l.vh_a + 1024 * (k + 1));
            mma_f16(o[j], a, b[2], b[3]);
          }
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int token = 8 * tiles[j] + 2 * t + (e & 1);
          if (token < n) out_chunk[token * P + g + 8 * (e >> 1)] = o[j][e];
        }
      }
      decay_state_tiles(s, reinterpret_cast<const float*>(smem_bytes + (buf - smem) + kStageDecay) + key0 + 2 * t);
    }
    state_half(copies.begin<5>(chunk, ring), std::integral_constant<int, 0>{});
    state_half(copies.begin<6>(chunk, ring), std::integral_constant<int, 1>{});
    store_sh();  // every warp's reads of Sh for this chunk were before step 4's barrier
    ring = (ring + kStepsPerChunk) % kStages;
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");

  float* s_global = state + int64_t(h) * kD * kD + value0;
#pragma unroll
  for (int kb = 0; kb < kQuarter / 8; ++kb)
#pragma unroll
    for (int e = 0; e < 4; ++e) s_global[(key0 + 8 * kb + 2 * t + (e & 1)) * kD + g + 8 * (e >> 1)] = s[kb][e];
}

}  // namespace

cudaError_t launch_state_pass_split_key_f16(WorkspaceF16 ws, float* state, float* out, int tokens, int heads,
                                            int chunks, cudaStream_t stream) {
  const auto pass = kda_chunk_state_pass_split_key_f16;
  // Per call: the attributes belong to the current device; three blocks per SM need the largest carveout.
  if (const cudaError_t status = allow_dynamic_shared_memory(pass, kSmemBytes); status != cudaSuccess) return status;
  pass<<<dim3(kValueBlocks, unsigned(heads)), kThreads, kSmemBytes, stream>>>(ws, state, out, tokens, heads, chunks);
  return cudaGetLastError();
}

}  // namespace k3::kernels::kda_chunk
