#include "kernels/mxfp4_grouped.h"

#include <algorithm>
#include <atomic>
#include <climits>

namespace k3::kernels {

namespace {

constexpr int kMxBlockElements = 32;  // elements sharing one E8M0 scale
constexpr int kMxBlockBytes = kMxBlockElements / 2;
constexpr uint32_t kNeutralScale = 127;  // 2^0, for blocks past the end of a row

// ---- Dequantisation (both algorithms) ---------------------------------------------------------------
// Both operands of every product are read in one permuted k order: within each group of 8 consecutive
// elements, position 2j holds element j and position 2j + 1 element j + 4 (j = 0..3). A 32-bit word of
// packed nibbles is 8 elements, so each bf16 pair (j, j + 4) takes the same shifts for both halves.

// Pair j of the 8 E2M1 nibbles in q (nibble i = element i): element j in the low half, j + 4 in the high
// half, as bf16 bits sign | magnitude << 6. That places the exponent bits of E2M1 in the bf16 exponent and
// its mantissa bit on top of the bf16 mantissa: the value is v · 2^-126, a bf16 subnormal for 0 and 0.5.
template <int J>
__device__ __forceinline__ uint32_t e2m1_pair_times_2_pow_minus_126(uint32_t q) {
  static_assert(J >= 0 && J < 4);
  const uint32_t sign = (J == 3 ? q : q << (12 - 4 * J)) & 0x80008000u;           // bits 4J+3, 4J+19
  const uint32_t magnitude = (J < 2 ? q << (6 - 4 * J) : q >> (4 * J - 6)) & 0x01C001C0u;  // bits 4J.., 4J+16..
  return sign | magnitude;
}

// d = a · b on bf16 pairs, rounded to nearest (exact here: b is a power of two and the product representable).
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// A block's scale 2^(s − 127) as bf16 factors for v · 2^-126: one multiply by 2^(s − 1) for s ≤ 128, else
// 2^127 then 2^(s − 128) (2^(s − 1) would exceed bf16); the NaN scale gives NaN.
struct BlockScale {
  uint32_t first2, second2;  // the factor in both halves
  bool twice;
};

__device__ __forceinline__ BlockScale block_scale(uint32_t scale) {
  const uint32_t first = scale == 0xFFu ? 0x7FC0u : (scale <= 128u ? (scale + 126u) << 7 : 0x7F00u);
  const uint32_t second = (scale - 1u) << 7;
  return {first | (first << 16), second | (second << 16), scale > 128u && scale < 0xFFu};
}

// One word (8 elements) dequantised to bf16 pairs in the permuted order: out[j] = pair j times the scale.
__device__ __forceinline__ void dequantize_word(uint32_t q, const BlockScale& s, uint32_t (&out)[4]) {
  out[0] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<0>(q), s.first2);
  out[1] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<1>(q), s.first2);
  out[2] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<2>(q), s.first2);
  out[3] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<3>(q), s.first2);
  if (s.twice) {  // only at scales above 2, i.e. block maxima ≥ 16
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j] = bf16x2_mul(out[j], s.second2);
  }
}

// ---- Dequantisation by byte lookup (mxfp4_grouped_gemv_mma_rows16_lut) -------------------------------
// The same bf16 bits as e2m1_pair_times_2_pow_minus_126, sign | magnitude << 6, but in the natural k order
// (pairs (0, 1), (2, 3), (4, 5), (6, 7) of a word) and from byte permutes: of an E2M1 code s e1 e0 m, the
// low bf16 byte is e0 m << 6, a function of bits 1..0, and the high byte s << 7 | e1, a function of bits
// 3..2. So q & 0x33333333 and (q >> 2) & 0x33333333 are, four elements at a time, prmt selectors into the
// 4-byte tables below (nibble bit 3, prmt's sign mode, is always 0), and two more prmt interleave the low
// and high bytes into bf16 pairs: 13 integer instructions per word against about 18 for the shifts and
// masks plus the x permutation, which the natural order does not need.
constexpr uint32_t kLowByteTable = 0xC0804000u;   // e0 m = 0, 1, 2, 3 → 0x00, 0x40, 0x80, 0xC0
constexpr uint32_t kHighByteTable = 0x81800100u;  // s e1 = 0, 1, 2, 3 → 0x00, 0x01, 0x80, 0x81

// Bytes of (b:a) picked by the low 16 bits of selector (nibble n picks output byte n; bit 3 of each nibble 0).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// One word (8 elements) dequantised to bf16 pairs in the natural order: out[j] = elements (2j, 2j + 1)
// times the scale, bit for bit dequantize_word's values.
__device__ __forceinline__ void dequantize_word_lut(uint32_t q, const BlockScale& s, uint32_t (&out)[4]) {
  const uint32_t low_index = q & 0x33333333u, high_index = (q >> 2) & 0x33333333u;
  const uint32_t low_0123 = prmt(kLowByteTable, 0u, low_index), low_4567 = prmt(kLowByteTable, 0u, low_index >> 16);
  const uint32_t high_0123 = prmt(kHighByteTable, 0u, high_index);
  const uint32_t high_4567 = prmt(kHighByteTable, 0u, high_index >> 16);
  out[0] = bf16x2_mul(prmt(low_0123, high_0123, 0x5140u), s.first2);  // low 0, high 0, low 1, high 1
  out[1] = bf16x2_mul(prmt(low_0123, high_0123, 0x7362u), s.first2);
  out[2] = bf16x2_mul(prmt(low_4567, high_4567, 0x5140u), s.first2);
  out[3] = bf16x2_mul(prmt(low_4567, high_4567, 0x7362u), s.first2);
  if (s.twice) {  // only at scales above 2, i.e. block maxima ≥ 16
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j] = bf16x2_mul(out[j], s.second2);
  }
}

// 8 consecutive bf16 x values (words = element pairs (0,1), (2,3), (4,5), (6,7)) in the permuted order:
// pairs (0,4), (1,5), (2,6), (3,7).
__device__ __forceinline__ uint4 permute_x8(uint4 v) {
  return make_uint4(__byte_perm(v.x, v.z, 0x5410), __byte_perm(v.x, v.z, 0x7632), __byte_perm(v.y, v.w, 0x5410),
                    __byte_perm(v.y, v.w, 0x7632));
}

// d += A·B for one m16n8k16 tile: A 16×16 bf16 (a0: rows g, k 2t..2t+1; a1: rows g+8; a2, a3: k + 8),
// B 16×8 bf16 (b0: k 2t..2t+1, column g; b1: k + 8), fp32 d (d0, d1: row g, columns 2t, 2t+1; d2, d3: row g+8);
// g = lane / 4, t = lane % 4; the lower k is the lower half of each register.
__device__ __forceinline__ void mma_bf16_16x8x16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                 uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

__device__ __forceinline__ bool token_valid(const ExpertRouting& r, int slot, int64_t x_rows) {
  const int token = r.slot_token[slot];
  return token >= 0 && token < x_rows;
}

// Slots [first, end) of an expert, clipped to [0, max_slots).
__device__ __forceinline__ void expert_slots(const ExpertRouting& r, int expert, int& first, int& end) {
  first = max(r.expert_offsets[expert], 0);
  end = min(r.expert_offsets[expert + 1], r.max_slots);
}

// ---- Decode: mxfp4_grouped_gemv_mma_rows16 ----------------------------------------------------------
constexpr int kGemvThreads = 128;
constexpr int kGemvWarpRows = 16;                                  // one mma m-tile per warp
constexpr int kGemvBlockRows = kGemvThreads / 32 * kGemvWarpRows;  // 64
constexpr int kGemvSlots = 8;                                      // one mma n-tile per pass
constexpr int kGemvLoads = 2;  // 16-byte weight loads per row and lane issued together

// blockIdx.x = active expert index · row_blocks + (output row) / 64. Lane (g, t) of a warp loads, for its
// rows g and g + 8 of the warp's 16, the whole 32-element blocks 4u + t of each group of 4·kGemvLoads
// blocks, and the same blocks of x for slot g of the pass: every mma then covers 16 k of one word position
// of four different blocks, whose scales are already folded into the bf16 weights.
// kLut picks the decode: shifts and masks in the permuted k order (rows16), or the byte lookup in the
// natural order (mxfp4_grouped_gemv_mma_rows16_lut: x words go to the mma as loaded).
template <typename OutT, bool kLut>
__global__ void __launch_bounds__(kGemvThreads, 6)
    mxfp4_grouped_gemv_mma_rows16(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                  int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride,
                                  unsigned row_blocks) {
  const int active = static_cast<int>(blockIdx.x / row_blocks);
  if (active >= min(*r.active_count, r.max_active_experts)) return;
  const int expert = r.active_experts[active];
  if (expert < 0 || expert >= w.experts) return;
  int first_slot = 0, end_slot = 0;
  expert_slots(r, expert, first_slot, end_slot);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t tile_row = int64_t(blockIdx.x % row_blocks) * kGemvBlockRows + warp * kGemvWarpRows;
  if (tile_row >= w.out_features) return;  // the whole warp (out is a multiple of 16)
  const int64_t row = tile_row + g;        // and row + 8
  const int64_t blocks = w.in_features / kMxBlockElements;
  const int64_t first_row = int64_t(expert) * w.out_features + row;
  const uint8_t* packed_lo = w.packed + first_row * blocks * kMxBlockBytes;
  const uint8_t* packed_hi = packed_lo + 8 * blocks * kMxBlockBytes;
  const uint8_t* scales_lo = w.scales + first_row * blocks;
  const uint8_t* scales_hi = scales_lo + 8 * blocks;

  for (int pass = first_slot; pass < end_slot; pass += kGemvSlots) {
    const __nv_bfloat16* x_row = nullptr;  // this lane's mma column: slot pass + g (none: zeros)
    if (pass + g < end_slot) {
      const int token = r.slot_token[pass + g];
      if (token >= 0 && token < x_rows) x_row = x + int64_t(token) * x_stride;
    }
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b0 = 0; b0 < blocks; b0 += 4 * kGemvLoads) {
      uint4 q_lo[kGemvLoads], q_hi[kGemvLoads];
      uint32_t s_lo[kGemvLoads], s_hi[kGemvLoads];
#pragma unroll
      for (int u = 0; u < kGemvLoads; ++u) {
        const int64_t b = b0 + 4 * u + t;
        if (b < blocks) {
          q_lo[u] = __ldcs(reinterpret_cast<const uint4*>(packed_lo + b * kMxBlockBytes));
          q_hi[u] = __ldcs(reinterpret_cast<const uint4*>(packed_hi + b * kMxBlockBytes));
          s_lo[u] = __ldcs(scales_lo + b);
          s_hi[u] = __ldcs(scales_hi + b);
        } else {
          q_lo[u] = q_hi[u] = make_uint4(0, 0, 0, 0);
          s_lo[u] = s_hi[u] = kNeutralScale;
        }
      }
#pragma unroll
      for (int u = 0; u < kGemvLoads; ++u) {
        const int64_t b = b0 + 4 * u + t;
        uint4 xv[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) xv[k] = make_uint4(0, 0, 0, 0);
        if (x_row != nullptr && b < blocks) {
          const uint4* p = reinterpret_cast<const uint4*>(x_row + b * kMxBlockElements);
#pragma unroll
          for (int k = 0; k < 4; ++k) xv[k] = __ldg(p + k);
        }
        const uint32_t words_lo[4] = {q_lo[u].x, q_lo[u].y, q_lo[u].z, q_lo[u].w};
        const uint32_t words_hi[4] = {q_hi[u].x, q_hi[u].y, q_hi[u].z, q_hi[u].w};
        const BlockScale scale_lo = block_scale(s_lo[u]), scale_hi = block_scale(s_hi[u]);
#pragma unroll
        for (int k = 0; k < 4; ++k) {  // word k of the block: (rows16) permuted positions 0..3, then 4..7
          uint32_t a_lo[4], a_hi[4];
          uint4 bx;
          if constexpr (kLut) {  // elements 8k..8k+3, then 8k+4..8k+7, in order
            dequantize_word_lut(words_lo[k], scale_lo, a_lo);
            dequantize_word_lut(words_hi[k], scale_hi, a_hi);
            bx = xv[k];
          } else {
            dequantize_word(words_lo[k], scale_lo, a_lo);
            dequantize_word(words_hi[k], scale_hi, a_hi);
            bx = permute_x8(xv[k]);
          }
          mma_bf16_16x8x16(acc, a_lo[0], a_hi[0], a_lo[1], a_hi[1], bx.x, bx.y);
          mma_bf16_16x8x16(acc, a_lo[2], a_hi[2], a_lo[3], a_hi[3], bx.z, bx.w);
        }
      }
    }
#pragma unroll
    for (int c = 0; c < 2; ++c) {  // columns 2t, 2t + 1
      const int slot = pass + 2 * t + c;
      if (slot < end_slot) {
        const bool ok = token_valid(r, slot, x_rows);
        OutT* out = y + int64_t(slot) * y_stride + row;
        store_out(out, ok ? acc[c] : __int_as_float(0x7FC00000));
        store_out(out + 8, ok ? acc[2 + c] : __int_as_float(0x7FC00000));
      }
    }
  }
}

// ---- Decode: mxfp4_grouped_gemv_mma_rows16_cp_async ------------------------------------------------
// The same warp tile, lane roles and products as mxfp4_grouped_gemv_mma_rows16, but the weights reach the
// registers through shared memory: every lane copies (cp.async, no registers held) exactly the 16-byte
// chunks it will multiply into its own slots of a ring of kCpAsyncStages steps, so each warp keeps the
// next two steps' weights in flight while it computes one, and no lane waits on another's copy. The warp's
// 16 rows of scales are one span, copied once before the steps.
constexpr int kCpAsyncStages = 3;
constexpr int kCpAsyncBlocksPerSm = 6;
constexpr int kCpAsyncStepBlocks = 4 * kGemvLoads;                     // 32-element blocks per row and step
constexpr int kCpAsyncChunks = 2 * kGemvLoads;                         // 16-byte chunks per lane and step
constexpr int kCpAsyncStageChunks = kCpAsyncChunks * 32;               // per warp and step
constexpr int kCpAsyncWarpChunks = kCpAsyncStages * kCpAsyncStageChunks;  // the ring of one warp
constexpr int kGemvWarps = kGemvThreads / 32;

// Dynamic shared memory: the warps' rings, then their scale spans of 16 rows × blocks bytes each.
size_t gemv_cp_async_shared_bytes(int64_t blocks) {
  return size_t(kGemvWarps) * (kCpAsyncWarpChunks * sizeof(uint4) + size_t(kGemvWarpRows) * size_t(blocks));
}
static_assert(kGemvWarps * (kCpAsyncWarpChunks * 16 + kGemvWarpRows * (kMxfp4GroupedGemvCpAsyncMaxIn / 32)) <=
              48 * 1024);

__device__ __forceinline__ void cp_async_16(void* shared_dst, const void* global_src) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's most recent groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// blockIdx.x as in mxfp4_grouped_gemv_mma_rows16. Step i covers the blocks [8i, 8i + 8) of every row; lane
// (g, t) owns chunks 2u (row g) and 2u + 1 (row g + 8) of block 8i + 4u + t in every stage.
template <typename OutT>
__global__ void __launch_bounds__(kGemvThreads, kCpAsyncBlocksPerSm)
    mxfp4_grouped_gemv_mma_rows16_cp_async(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                           int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride,
                                           unsigned row_blocks) {
  extern __shared__ uint4 gemv_staging[];
  const int active = static_cast<int>(blockIdx.x / row_blocks);
  if (active >= min(*r.active_count, r.max_active_experts)) return;
  const int expert = r.active_experts[active];
  if (expert < 0 || expert >= w.experts) return;
  int first_slot = 0, end_slot = 0;
  expert_slots(r, expert, first_slot, end_slot);
  if (first_slot >= end_slot) return;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t tile_row = int64_t(blockIdx.x % row_blocks) * kGemvBlockRows + warp * kGemvWarpRows;
  if (tile_row >= w.out_features) return;  // the whole warp (out is a multiple of 16); no block barriers follow
  const int64_t row = tile_row + g;        // and row + 8
  const int64_t blocks = w.in_features / kMxBlockElements;
  const int steps = static_cast<int>((blocks + kCpAsyncStepBlocks - 1) / kCpAsyncStepBlocks);
  const int64_t warp_first_row = int64_t(expert) * w.out_features + tile_row;
  const uint8_t* packed_lo = w.packed + (warp_first_row + g) * blocks * kMxBlockBytes;
  const uint8_t* packed_hi = packed_lo + 8 * blocks * kMxBlockBytes;
  uint4* ring = gemv_staging + warp * kCpAsyncWarpChunks;
  uint8_t* scales = reinterpret_cast<uint8_t*>(gemv_staging + kGemvWarps * kCpAsyncWarpChunks) +
                    int64_t(warp) * kGemvWarpRows * blocks;

  // The scale span starts 16·blocks·(an integer) bytes after the 16-byte-aligned scales (out and tile_row
  // are multiples of 16) and holds `blocks` 16-byte chunks: the first group of every lane.
  {
    const uint8_t* span = w.scales + warp_first_row * blocks;
    for (int64_t c = lane; c < blocks; c += 32) cp_async_16(scales + 16 * c, span + 16 * c);
    cp_async_commit();
  }
  const auto issue = [&](int step) {
    uint4* stage = ring + (step % kCpAsyncStages) * kCpAsyncStageChunks;
#pragma unroll
    for (int u = 0; u < kGemvLoads; ++u) {
      const int64_t b = int64_t(step) * kCpAsyncStepBlocks + 4 * u + t;
      if (b < blocks) {
        cp_async_16(stage + (2 * u) * 32 + lane, packed_lo + b * kMxBlockBytes);
        cp_async_16(stage + (2 * u + 1) * 32 + lane, packed_hi + b * kMxBlockBytes);
      }
    }
  };

  for (int pass = first_slot; pass < end_slot; pass += kGemvSlots) {
    const __nv_bfloat16* x_row = nullptr;  // this lane's mma column: slot pass + g (none: zeros)
    if (pass + g < end_slot) {
      const int token = r.slot_token[pass + g];
      if (token >= 0 && token < x_rows) x_row = x + int64_t(token) * x_stride;
    }
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int s = 0; s < kCpAsyncStages - 1; ++s) {  // one group per step, empty past the last
      if (s < steps) issue(s);
      cp_async_commit();
    }
    for (int step = 0; step < steps; ++step) {
      // The groups committed after this step's are those of steps step + 1 .. step + stages − 2, so at most
      // stages − 2 in flight means this step and the scale span have landed; the barrier shows the span,
      // copied by all lanes, to every lane.
      cp_async_wait<kCpAsyncStages - 2>();
      __syncwarp();
      // Refill the stage that step − 1 used (this lane's own slots, whose values it has consumed).
      if (step + kCpAsyncStages - 1 < steps) issue(step + kCpAsyncStages - 1);
      cp_async_commit();

      const uint4* stage = ring + (step % kCpAsyncStages) * kCpAsyncStageChunks;
#pragma unroll
      for (int u = 0; u < kGemvLoads; ++u) {
        const int64_t b = int64_t(step) * kCpAsyncStepBlocks + 4 * u + t;
        uint4 q_lo = make_uint4(0, 0, 0, 0), q_hi = make_uint4(0, 0, 0, 0);
        uint32_t s_lo = kNeutralScale, s_hi = kNeutralScale;
        uint4 xv[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) xv[k] = make_uint4(0, 0, 0, 0);
        if (b < blocks) {
          q_lo = stage[(2 * u) * 32 + lane];
          q_hi = stage[(2 * u + 1) * 32 + lane];
          s_lo = scales[g * blocks + b];
          s_hi = scales[(g + 8) * blocks + b];
          if (x_row != nullptr) {
            const uint4* p = reinterpret_cast<const uint4*>(x_row + b * kMxBlockElements);
#pragma unroll
            for (int k = 0; k < 4; ++k) xv[k] = __ldg(p + k);
          }
        }
        const uint32_t words_lo[4] = {q_lo.x, q_lo.y, q_lo.z, q_lo.w};
        const uint32_t words_hi[4] = {q_hi.x, q_hi.y, q_hi.z, q_hi.w};
        const BlockScale scale_lo = block_scale(s_lo), scale_hi = block_scale(s_hi);
#pragma unroll
        for (int k = 0; k < 4; ++k) {  // word k of the block: permuted positions 0..3, then 4..7
          uint32_t a_lo[4], a_hi[4];
          dequantize_word(words_lo[k], scale_lo, a_lo);
          dequantize_word(words_hi[k], scale_hi, a_hi);
          const uint4 bx = permute_x8(xv[k]);
          mma_bf16_16x8x16(acc, a_lo[0], a_hi[0], a_lo[1], a_hi[1], bx.x, bx.y);
          mma_bf16_16x8x16(acc, a_lo[2], a_hi[2], a_lo[3], a_hi[3], bx.z, bx.w);
        }
      }
    }
#pragma unroll
    for (int c = 0; c < 2; ++c) {  // columns 2t, 2t + 1
      const int slot = pass + 2 * t + c;
      if (slot < end_slot) {
        const bool ok = token_valid(r, slot, x_rows);
        OutT* out = y + int64_t(slot) * y_stride + row;
        store_out(out, ok ? acc[c] : __int_as_float(0x7FC00000));
        store_out(out + 8, ok ? acc[2 + c] : __int_as_float(0x7FC00000));
      }
    }
  }
}

// ---- Decode: mxfp4_grouped_gemv_bulk_split8 ----------------------------------------------------------
// What: rows16's products (16 output rows of one active expert × 8 slots per pass, mma.sync m16n8k16, bf16 in,
// fp32 accumulate), with each 16-row tile of weights streamed into shared memory by Hopper's bulk copies
// (cp.async.bulk … mbarrier::complete_tx::bytes) instead of per-lane loads.
// Why: rows16 on an H200 under Nsight Compute (SM clock locked at 1.35 GHz, T = 1 and 8): 80 registers, 6 blocks of
// 128 threads per SM (register-limited, 36.7 % achieved occupancy, 2.3 eligible warps per scheduler), issue slots
// 79.8 % and the integer pipe 79.6 % busy, DRAM throughput 50.8 %, L2 hit 18 %; 62 % of copy bandwidth at boost
// clocks (T = 8). The same warps issue the loads and the decode, each lane has only two 16-byte weight loads per row
// in flight before it must compute, and at T = 1 only 768 blocks of 14 dependent steps exist. Here one warp keeps
// several whole tiles (tens of KiB per SM) in flight whatever the consumers do, and the tiles are read as long
// contiguous runs.
// Pipeline (one persistent block of 10 warps per SM; items are (active expert, 16-row tile) pairs, block b taking
// items b, b + gridDim.x, … of active · out/16):
//   warp 0, producer: looks the items' routing up 32 at a time (one item per lane); for each item with slots it
//     waits for the next ring stage's empty barrier, writes the stage's header (expert, slots, row, the first
//     pass's 8 tokens), arms the stage's full barrier with arrive.expect_tx(16 · (in/2 + in/32) bytes), and lanes
//     0-15 copy one weight row each (in/2 bytes) into a padded row stride (≡ 64 mod 128 bytes, so that rows g and
//     g + 1 of one 8-lane phase of a 16-byte shared load fall in different banks) while lane 16 copies the tile's
//     16 · in/32 scale bytes, one contiguous span. At the end it sends a header with done = 1.
//   warps 2-9, consumers: wait for the stage's full barrier; for every pass of 8 slots each warp takes one of 8
//     k-groups — lane (g, t) of group q owns the 32-element blocks 4q + t, 4q + t + 32, … of rows g and g + 8 —
//     dequantises them from shared memory with gemv_lut's byte-lookup decode, reads x of slot pass + g with __ldg
//     (the next item's x lines are prefetched into L1 when its stage is already full), accumulates as rows16 does,
//     and puts the group's 16×8 partial in a reduction slot (4 slots, their own full/empty barriers). The group of
//     a warp turns with every pass, so the warps share the groups' uneven block counts (112 blocks at in = 3584:
//     groups 0-3 take 4, groups 4-7 take 3). After an item's last pass every consumer thread arrives on the stage's
//     empty barrier.
//   warp 1, reducer: adds each pass's 8 partials in group order 0..7 and writes y (NaN for a slot whose token lies
//     outside x).
// Shared memory: the ring of max(3, min(8, 128 KiB / stage)) stages of 16 · stride + 16 · in/32 bytes rounded up to
// 128 (4 stages of 31,488 bytes at in = 3584, 4 of 27,136 at 3072), 4 reduction slots of 4 KiB, headers and
// barriers: 142,848 bytes at in = 3584 and 125,440 at 3072, one block per SM, which leaves the rest of the SM's
// 256 KiB to L1 (x); 202,672 bytes (3 stages) at the largest in, 7168.
// Summation order: within a k-group, gemv_lut's mma products over that group's blocks in two chains (words 0 and 2
// of every block, words 1 and 3) added at the end; then the groups in order 0..7. rows16 adds all blocks in one
// chain, so the two differ by fp32 rounding; the result does not depend on the grid or on warp timing.
constexpr int kBulkConsumerWarps = 8;                // = the k-groups, 4 lanes of k each
constexpr int kBulkKLanes = 4 * kBulkConsumerWarps;  // a k-lane's blocks are kBulkKLanes apart
constexpr int kBulkThreads = (2 + kBulkConsumerWarps) * 32;
constexpr int kBulkTileRows = 16;
constexpr int kBulkReduceSlots = 4;
constexpr int kBulkMinStages = 3, kBulkMaxStages = 8;
constexpr int kBulkRingBytes = 128 * 1024;

struct BulkItem {  // a stage's tile, written by the producer before it arms the stage
  int32_t expert, first_slot, end_slot, row0, done;
  int32_t tokens[kGemvSlots];  // slot_token of the first pass (−1 past the expert's slots)
  int32_t unused[3];
};
struct BulkUnit {  // a pass's partials, described by consumer warp 0
  int32_t slot0, end_slot, row0, done;
  uint32_t valid_lanes;  // ballot of the lanes whose slot has a token inside x: column c ↔ lane 4c
  int32_t unused[3];
};
static_assert(sizeof(BulkItem) == 64 && sizeof(BulkUnit) == 32);

// Byte offsets of the dynamic shared memory, from in alone (host-computed, passed by value).
struct BulkLayout {
  int row_bytes, row_stride, stage_bytes, stages;
  uint32_t stage_tx_bytes;  // what the copies of one stage deliver
  int partials_offset, items_offset, units_offset, barriers_offset, shared_bytes;
};

constexpr BulkLayout gemv_bulk_layout(int64_t in_features) {
  BulkLayout l{};
  const int blocks = static_cast<int>(in_features / kMxBlockElements);
  l.row_bytes = static_cast<int>(in_features / 2);
  l.row_stride = l.row_bytes + (64 - l.row_bytes % 128 + 128) % 128;
  const int scale_bytes = kBulkTileRows * blocks;
  l.stage_bytes = (kBulkTileRows * l.row_stride + scale_bytes + 127) / 128 * 128;
  l.stages = std::clamp(kBulkRingBytes / l.stage_bytes, kBulkMinStages, kBulkMaxStages);
  l.stage_tx_bytes = static_cast<uint32_t>(kBulkTileRows * l.row_bytes + scale_bytes);
  l.partials_offset = l.stages * l.stage_bytes;
  l.items_offset = l.partials_offset + kBulkReduceSlots * kBulkConsumerWarps * 32 * int(sizeof(float4));
  l.units_offset = l.items_offset + l.stages * int(sizeof(BulkItem));
  l.barriers_offset = l.units_offset + kBulkReduceSlots * int(sizeof(BulkUnit));
  l.shared_bytes = l.barriers_offset + (2 * l.stages + 2 * kBulkReduceSlots) * int(sizeof(uint64_t));
  return l;
}
// The largest in fits sm_90's opt-in shared memory per block, and a stage's bytes an mbarrier's tx-count range.
static_assert(gemv_bulk_layout(kMxfp4GroupedGemvBulkMaxIn).shared_bytes <= 227 * 1024);
static_assert(gemv_bulk_layout(kMxfp4GroupedGemvBulkMaxIn).stage_tx_bytes < (1u << 20));

struct BulkShared {
  uint8_t* stages;         // [stages][stage_bytes]: 16 rows at row_stride, then 16 × blocks scale bytes
  float4* partials;        // [kBulkReduceSlots][k-group][lane]
  BulkItem* items;         // [stages]
  BulkUnit* units;         // [kBulkReduceSlots]
  uint64_t* full;          // [stages], 1 arrival + the copies' bytes
  uint64_t* empty;         // [stages], every consumer thread
  uint64_t* reduce_full;   // [kBulkReduceSlots], every consumer thread
  uint64_t* reduce_empty;  // [kBulkReduceSlots], the reducer's 32 threads
};

// mbarrier and bulk-copy wrappers (PTX ISA 8.0, sm_90). Arrivals release and waits acquire at CTA scope, the
// instructions' defaults.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("{\n\t.reg .b64 state;\n\tmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(shared_address(bar))
               : "memory");
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("{\n\t.reg .b64 state;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
                   shared_address(bar)),
               "r"(bytes)
               : "memory");
}
// True once the phase of the given parity has completed (the current phase's parity differs).
__device__ __forceinline__ bool mbarrier_test_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.b32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.b32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
}
// bytes (a multiple of 16) from 16-byte-aligned global src to 16-byte-aligned shared dst, completing on bar.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(dst)),
               "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(__cvta_generic_to_global(p)));
}

// Producer warp: the block's items in order, one ring stage each for those with slots, then a done header.
__device__ void bulk_produce(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const BulkLayout& layout,
                             const BulkShared& sh, int active_limit) {
  const int lane = threadIdx.x % 32;
  const int64_t row_tiles = w.out_features / kBulkTileRows, blocks = w.in_features / kMxBlockElements;
  const int64_t items = int64_t(max(0, min(*r.active_count, active_limit))) * row_tiles;
  int stage = 0;
  uint32_t phase = 0;
  for (int64_t batch = blockIdx.x; batch < items; batch += int64_t(32) * gridDim.x) {
    const int64_t item = batch + int64_t(lane) * gridDim.x;  // this lane's lookup
    int expert = -1, first = 0, end = 0;
    if (item < items) {
      const int e = r.active_experts[item / row_tiles];
      if (e >= 0 && e < w.experts) {
        expert_slots(r, e, first, end);
        if (end > first) expert = e;
      }
    }
    int tokens[kGemvSlots];
#pragma unroll
    for (int c = 0; c < kGemvSlots; ++c) tokens[c] = expert >= 0 && first + c < end ? r.slot_token[first + c] : -1;

    for (unsigned live = __ballot_sync(0xffffffffu, expert >= 0); live != 0; live &= live - 1) {
      const int source = __ffs(live) - 1;
      BulkItem header;
      header.expert = __shfl_sync(0xffffffffu, expert, source);
      header.first_slot = __shfl_sync(0xffffffffu, first, source);
      header.end_slot = __shfl_sync(0xffffffffu, end, source);
      header.row0 = static_cast<int>(__shfl_sync(0xffffffffu, item, source) % row_tiles) * kBulkTileRows;
      header.done = 0;
#pragma unroll
      for (int c = 0; c < kGemvSlots; ++c) header.tokens[c] = __shfl_sync(0xffffffffu, tokens[c], source);

      mbarrier_wait_parity(&sh.empty[stage], phase ^ 1);  // the consumers have released the stage's last item
      if (lane == 0) {
        BulkItem& slot = sh.items[stage];
        slot.expert = header.expert;
        slot.first_slot = header.first_slot;
        slot.end_slot = header.end_slot;
        slot.row0 = header.row0;
        slot.done = 0;
#pragma unroll
        for (int c = 0; c < kGemvSlots; ++c) slot.tokens[c] = header.tokens[c];
        mbarrier_arrive_expect_tx(&sh.full[stage], layout.stage_tx_bytes);  // releases the header
      }
      __syncwarp();
      const int64_t tile = int64_t(header.expert) * w.out_features + header.row0;  // its first row of all experts
      uint8_t* dst = sh.stages + int64_t(stage) * layout.stage_bytes;
      if (lane < kBulkTileRows) {
        bulk_copy_to_shared(dst + lane * layout.row_stride, w.packed + (tile + lane) * layout.row_bytes,
                            static_cast<uint32_t>(layout.row_bytes), &sh.full[stage]);
      } else if (lane == kBulkTileRows) {
        bulk_copy_to_shared(dst + kBulkTileRows * layout.row_stride, w.scales + tile * blocks,
                            static_cast<uint32_t>(kBulkTileRows * blocks), &sh.full[stage]);
      }
      if (++stage == layout.stages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
  mbarrier_wait_parity(&sh.empty[stage], phase ^ 1);
  if (lane == 0) {
    sh.items[stage].done = 1;
    mbarrier_arrive(&sh.full[stage]);  // no bytes: the phase completes with this arrival
  }
}

// One consumer lane's share of a k-group's products over a tile in shared memory: blocks 4q + t + 32j of rows g
// and g + 8, each step's shared and x loads issued before the previous step's decode and mma. Words 0, 2 and 1, 3 of
// the blocks accumulate in two chains, added at the end: with 2 consumer warps per scheduler, one chain of 8
// dependent mma per step would bound a warp's pace.
__device__ __forceinline__ void bulk_group_products(const uint8_t* tile, const uint8_t* tile_scales, int row_stride,
                                                    int blocks, int group, const __nv_bfloat16* x_row,
                                                    float (&acc)[4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int first_block = 4 * group + t;
  struct Step {
    uint4 q_lo, q_hi, xv[4];
    uint32_t s_lo, s_hi;
  };
  const auto load = [&](int b) {
    Step s;
    s.q_lo = s.q_hi = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < 4; ++k) s.xv[k] = make_uint4(0, 0, 0, 0);
    s.s_lo = s.s_hi = kNeutralScale;
    if (b < blocks) {
      s.q_lo = *reinterpret_cast<const uint4*>(tile + g * row_stride + b * kMxBlockBytes);
      s.q_hi = *reinterpret_cast<const uint4*>(tile + (g + 8) * row_stride + b * kMxBlockBytes);
      s.s_lo = tile_scales[g * blocks + b];
      s.s_hi = tile_scales[(g + 8) * blocks + b];
      if (x_row != nullptr) {
        const uint4* p = reinterpret_cast<const uint4*>(x_row + b * kMxBlockElements);
#pragma unroll
        for (int k = 0; k < 4; ++k) s.xv[k] = __ldg(p + k);
      }
    }
    return s;
  };
  // Steps while lane t = 0 of the group still has a block (warp-uniform: the mma needs every lane).
  const int steps = blocks > 4 * group ? (blocks - 4 * group + kBulkKLanes - 1) / kBulkKLanes : 0;
  float acc_odd[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  Step current = load(first_block);
  for (int j = 0; j < steps; ++j) {
    const Step next = load(first_block + kBulkKLanes * (j + 1));  // past the last step: no access, zeros
    const uint32_t words_lo[4] = {current.q_lo.x, current.q_lo.y, current.q_lo.z, current.q_lo.w};
    const uint32_t words_hi[4] = {current.q_hi.x, current.q_hi.y, current.q_hi.z, current.q_hi.w};
    const BlockScale scale_lo = block_scale(current.s_lo), scale_hi = block_scale(current.s_hi);
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // word k of the block: elements 8k..8k+3, then 8k+4..8k+7, in order
      uint32_t a_lo[4], a_hi[4];
      dequantize_word_lut(words_lo[k], scale_lo, a_lo);
      dequantize_word_lut(words_hi[k], scale_hi, a_hi);
      const uint4 bx = current.xv[k];
      float(&chain)[4] = k % 2 == 0 ? acc : acc_odd;
      mma_bf16_16x8x16(chain, a_lo[0], a_hi[0], a_lo[1], a_hi[1], bx.x, bx.y);
      mma_bf16_16x8x16(chain, a_lo[2], a_hi[2], a_lo[3], a_hi[3], bx.z, bx.w);
    }
    current = next;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] += acc_odd[i];
}

// Consumer warps: every stage's passes, one k-group each, partials to the reduction ring; then a done unit.
__device__ void bulk_consume(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                             int64_t x_stride, int64_t x_rows, const BulkLayout& layout, const BulkShared& sh) {
  const int warp = threadIdx.x / 32 - 2, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int blocks = static_cast<int>(w.in_features / kMxBlockElements);
  int stage = 0, slot = 0;
  uint32_t phase = 0, slot_phase = 0;
  unsigned passes_done = 0;  // turns the warps' k-groups
  while (true) {
    mbarrier_wait_parity(&sh.full[stage], phase);
    const BulkItem& item = sh.items[stage];
    if (item.done) break;
    const int first = item.first_slot, end = item.end_slot, row0 = item.row0;
    const uint8_t* tile = sh.stages + int64_t(stage) * layout.stage_bytes;
    const uint8_t* tile_scales = tile + kBulkTileRows * layout.row_stride;

    // A hint: when the next stage is already full, pull the x lines its first pass will read into L1.
    {
      const int next = stage + 1 == layout.stages ? 0 : stage + 1;
      if (mbarrier_test_parity(&sh.full[next], next == 0 ? phase ^ 1 : phase)) {
        const BulkItem& coming = sh.items[next];
        if (coming.done == 0 && g < coming.end_slot - coming.first_slot) {
          const int token = coming.tokens[g];
          if (token >= 0 && token < x_rows) {
            const unsigned passes = static_cast<unsigned>((end - first + kGemvSlots - 1) / kGemvSlots);
            const int group = static_cast<int>((warp + passes_done + passes) % kBulkConsumerWarps);
            const __nv_bfloat16* row = x + int64_t(token) * x_stride;
            for (int b = 4 * group + t; b < blocks; b += kBulkKLanes) prefetch_l1(row + b * kMxBlockElements);
          }
        }
      }
    }

    for (int pass = first; pass < end; pass += kGemvSlots, ++passes_done) {
      const int group = static_cast<int>((warp + passes_done) % kBulkConsumerWarps);
      const __nv_bfloat16* x_row = nullptr;  // this lane's mma column: slot pass + g (none: zeros)
      if (pass + g < end) {
        const int token = pass == first ? item.tokens[g] : r.slot_token[pass + g];
        if (token >= 0 && token < x_rows) x_row = x + int64_t(token) * x_stride;
      }
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      bulk_group_products(tile, tile_scales, layout.row_stride, blocks, group, x_row, acc);
      const unsigned valid_lanes = __ballot_sync(0xffffffffu, x_row != nullptr);

      mbarrier_wait_parity(&sh.reduce_empty[slot], slot_phase ^ 1);  // the reducer has read the slot's last pass
      sh.partials[(slot * kBulkConsumerWarps + group) * 32 + lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      if (warp == 0 && lane == 0) {
        BulkUnit& unit = sh.units[slot];
        unit.slot0 = pass;
        unit.end_slot = end;
        unit.row0 = row0;
        unit.done = 0;
        unit.valid_lanes = valid_lanes;
      }
      mbarrier_arrive(&sh.reduce_full[slot]);  // releases this thread's partial (and warp 0 lane 0's unit)
      if (++slot == kBulkReduceSlots) {
        slot = 0;
        slot_phase ^= 1;
      }
    }
    mbarrier_arrive(&sh.empty[stage]);  // this thread's reads of the stage and its header are done
    if (++stage == layout.stages) {
      stage = 0;
      phase ^= 1;
    }
  }
  mbarrier_wait_parity(&sh.reduce_empty[slot], slot_phase ^ 1);
  if (warp == 0 && lane == 0) sh.units[slot].done = 1;
  mbarrier_arrive(&sh.reduce_full[slot]);
}

// Reducer warp: each pass's 8 partials in group order, then y as rows16 writes it.
template <typename OutT>
__device__ void bulk_reduce(OutT* __restrict__ y, int64_t y_stride, const BulkShared& sh) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  int slot = 0;
  uint32_t slot_phase = 0;
  while (true) {
    mbarrier_wait_parity(&sh.reduce_full[slot], slot_phase);
    const BulkUnit unit = sh.units[slot];
    if (unit.done) break;
    const float4* partial = sh.partials + slot * kBulkConsumerWarps * 32 + lane;
    float4 sum = partial[0];
#pragma unroll
    for (int group = 1; group < kBulkConsumerWarps; ++group) {
      const float4 p = partial[group * 32];
      sum.x += p.x;
      sum.y += p.y;
      sum.z += p.z;
      sum.w += p.w;
    }
    mbarrier_arrive(&sh.reduce_empty[slot]);  // the slot's partials and unit are in registers
    const float sums[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
    for (int c = 0; c < 2; ++c) {  // columns 2t, 2t + 1
      const int s = unit.slot0 + 2 * t + c;
      if (s < unit.end_slot) {
        const bool ok = (unit.valid_lanes >> (4 * (2 * t + c))) & 1u;
        OutT* out = y + int64_t(s) * y_stride + unit.row0 + g;
        store_out(out, ok ? sums[c] : __int_as_float(0x7FC00000));
        store_out(out + 8, ok ? sums[2 + c] : __int_as_float(0x7FC00000));
      }
    }
    if (++slot == kBulkReduceSlots) {
      slot = 0;
      slot_phase ^= 1;
    }
  }
}

template <typename OutT>
__global__ void __launch_bounds__(kBulkThreads, 1)
    mxfp4_grouped_gemv_bulk_split8(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                   int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride,
                                   BulkLayout layout, int active_limit) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t bulk_shared[];
  BulkShared sh;
  sh.stages = bulk_shared;
  sh.partials = reinterpret_cast<float4*>(bulk_shared + layout.partials_offset);
  sh.items = reinterpret_cast<BulkItem*>(bulk_shared + layout.items_offset);
  sh.units = reinterpret_cast<BulkUnit*>(bulk_shared + layout.units_offset);
  sh.full = reinterpret_cast<uint64_t*>(bulk_shared + layout.barriers_offset);
  sh.empty = sh.full + layout.stages;
  sh.reduce_full = sh.empty + layout.stages;
  sh.reduce_empty = sh.reduce_full + kBulkReduceSlots;
  if (threadIdx.x == 0) {
    for (int s = 0; s < layout.stages; ++s) {
      mbarrier_init(&sh.full[s], 1);
      mbarrier_init(&sh.empty[s], kBulkConsumerWarps * 32);
    }
    for (int s = 0; s < kBulkReduceSlots; ++s) {
      mbarrier_init(&sh.reduce_full[s], kBulkConsumerWarps * 32);
      mbarrier_init(&sh.reduce_empty[s], 32);
    }
    // The initialised barriers, visible to the other threads and to the bulk copies (async proxy).
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();  // the only block-wide barrier: every role below runs to its done marker
  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    bulk_produce(w, r, layout, sh, active_limit);
  } else if (warp == 1) {
    bulk_reduce(y, y_stride, sh);
  } else {
    bulk_consume(w, r, x, x_stride, x_rows, layout, sh);
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90: the host side refuses other devices before launching
#endif
}

// ---- Prefill: mxfp4_grouped_gemm_mma_128x64 ---------------------------------------------------------
constexpr int kGemmThreads = 256;
constexpr int kGemmRows = 128;   // output rows per tile (4 warps × 32)
constexpr int kGemmSlots = 64;   // slots per tile (2 warps × 32)
constexpr int kGemmStride = 40;  // bf16 per shared row: 32 + 8, so the 8 rows of an ldmatrix hit distinct banks
constexpr size_t kGemmStaticSharedBytes = 2 * (kGemmRows + kGemmSlots) * kGemmStride * 2 + kGemmThreads / 32 * 4;

struct GemmTiles {
  __nv_bfloat16 w[2][kGemmRows][kGemmStride];  // dequantised W, permuted k
  __nv_bfloat16 x[2][kGemmSlots][kGemmStride];  // gathered x rows, permuted k
};

// Loads four 8×8 bf16 matrices; thread l gives the row address of matrix l / 8 and receives, of matrix i,
// row l / 4 and columns 2(l % 4), 2(l % 4) + 1 in r[i] (the mma fragment layout).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* p) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// Exclusive prefix of `value` over the block's threads; `total` gets the sum. warp_sums holds one int per warp.
__device__ int block_exclusive_scan(int value, int* warp_sums, int& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int inclusive = value;
  for (int offset = 1; offset < 32; offset *= 2) {
    const int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  int before = 0;
  total = 0;
  for (int i = 0; i < kGemmThreads / 32; ++i) {
    if (i < warp) before += warp_sums[i];
    total += warp_sums[i];
  }
  return before + inclusive - value;
}

// Tiles (128 rows × 64 slots) of the a-th active expert; none for an id outside [0, experts).
__device__ int expert_tiles(const Mxfp4ExpertWeights& w, const ExpertRouting& r, int a, int row_tiles) {
  const int expert = r.active_experts[a];
  if (expert < 0 || expert >= w.experts) return 0;
  int first = 0, end = 0;
  expert_slots(r, expert, first, end);
  return end > first ? row_tiles * ((end - first + kGemmSlots - 1) / kGemmSlots) : 0;
}

// Persistent blocks: first the tile prefix over the active experts (in dynamic shared memory, sized for
// max_active_experts + 1), then tiles blockIdx.x, blockIdx.x + gridDim.x, … in the order (expert, row
// tile, slot tile), so the slot tiles of one W tile run close together and share it in L2.
template <typename OutT>
__global__ void __launch_bounds__(kGemmThreads, 2)
    mxfp4_grouped_gemm_mma_128x64(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                  int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride) {
  __shared__ __align__(16) GemmTiles tiles;
  __shared__ int warp_sums[kGemmThreads / 32];
  extern __shared__ int tile_prefix[];  // [active + 1]

  const int active = max(0, min(*r.active_count, r.max_active_experts));
  const int row_tiles = static_cast<int>((w.out_features + kGemmRows - 1) / kGemmRows);
  {
    const int chunk = (active + kGemmThreads - 1) / kGemmThreads;
    const int begin = min(static_cast<int>(threadIdx.x) * chunk, active), end = min(begin + chunk, active);
    int local = 0;
    for (int a = begin; a < end; ++a) {
      tile_prefix[a] = expert_tiles(w, r, a, row_tiles);
      local += tile_prefix[a];
    }
    int total = 0;
    int running = block_exclusive_scan(local, warp_sums, total);
    for (int a = begin; a < end; ++a) {
      const int tiles_a = tile_prefix[a];
      tile_prefix[a] = running;
      running += tiles_a;
    }
    if (threadIdx.x == 0) tile_prefix[active] = total;
    __syncthreads();
  }

  const int64_t out = w.out_features, blocks = w.in_features / kMxBlockElements;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_row = (warp % 4) * 32, warp_slot = (warp / 4) * 32;
  const int load_row = threadIdx.x / 2, load_half = threadIdx.x % 2;    // W: 8 bytes = 16 elements
  const int load_slot = threadIdx.x / 4, load_chunk = threadIdx.x % 4;  // x: 16 bytes = 8 elements
  const int total_tiles = tile_prefix[active];

  for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
    int lo = 0, hi = active;  // the a with prefix[a] ≤ tile < prefix[a + 1]
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (tile_prefix[mid] <= tile) lo = mid; else hi = mid;
    }
    const int expert = r.active_experts[lo];
    int first_slot = 0, end_slot = 0;
    expert_slots(r, expert, first_slot, end_slot);
    const int slot_tiles = (end_slot - first_slot + kGemmSlots - 1) / kGemmSlots;
    const int local = tile - tile_prefix[lo];
    const int64_t row0 = int64_t(local / slot_tiles) * kGemmRows;
    const int slot0 = first_slot + (local % slot_tiles) * kGemmSlots;

    // This thread's share of every k-step: 16 elements of one W row and 8 of one gathered x row.
    const int64_t w_row = row0 + load_row;
    const bool w_ok = w_row < out;
    const uint8_t* w_src = nullptr;
    const uint8_t* s_src = nullptr;
    if (w_ok) {
      const int64_t row_index = int64_t(expert) * out + w_row;
      w_src = w.packed + row_index * blocks * kMxBlockBytes + load_half * 8;
      s_src = w.scales + row_index * blocks;
    }
    const __nv_bfloat16* x_src = nullptr;
    if (slot0 + load_slot < end_slot) {
      const int token = r.slot_token[slot0 + load_slot];
      if (token >= 0 && token < x_rows) x_src = x + int64_t(token) * x_stride + load_chunk * 8;
    }
    uint2 w_words = make_uint2(0, 0);
    uint32_t w_scale = kNeutralScale;
    uint4 x_words = make_uint4(0, 0, 0, 0);
    const auto load = [&](int64_t kb) {
      if (w_ok) {
        w_words = __ldcs(reinterpret_cast<const uint2*>(w_src + kb * kMxBlockBytes));
        w_scale = __ldcs(s_src + kb);
      }
      if (x_src != nullptr) x_words = __ldg(reinterpret_cast<const uint4*>(x_src + kb * kMxBlockElements));
    };
    const auto store = [&](int buf) {
      const BlockScale scale = block_scale(w_scale);
      uint32_t a[4], b[4];
      dequantize_word(w_words.x, scale, a);
      dequantize_word(w_words.y, scale, b);
      *reinterpret_cast<uint4*>(&tiles.w[buf][load_row][load_half * 16]) = make_uint4(a[0], a[1], a[2], a[3]);
      *reinterpret_cast<uint4*>(&tiles.w[buf][load_row][load_half * 16 + 8]) = make_uint4(b[0], b[1], b[2], b[3]);
      *reinterpret_cast<uint4*>(&tiles.x[buf][load_slot][load_chunk * 8]) = permute_x8(x_words);
    };

    float acc[2][4][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

    load(0);
    store(0);
    __syncthreads();
    for (int64_t kb = 0; kb < blocks; ++kb) {
      const int buf = static_cast<int>(kb & 1);
      if (kb + 1 < blocks) load(kb + 1);
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        uint32_t a[2][4], b[4][2];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          ldmatrix_x4(a[mt], &tiles.w[buf][warp_row + mt * 16 + lane % 16][kk * 16 + (lane / 16) * 8]);
        }
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t q[4];
          ldmatrix_x4(q, &tiles.x[buf][warp_slot + np * 16 + (lane / 16) * 8 + lane % 8][kk * 16 + ((lane / 8) % 2) * 8]);
          b[2 * np][0] = q[0];
          b[2 * np][1] = q[1];
          b[2 * np + 1][0] = q[2];
          b[2 * np + 1][1] = q[3];
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
            mma_bf16_16x8x16(acc[mt][nt], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b[nt][0], b[nt][1]);
      }
      if (kb + 1 < blocks) store(buf ^ 1);
      __syncthreads();
    }

#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int slot = slot0 + warp_slot + nt * 8 + 2 * t + c;
        if (slot >= end_slot) continue;
        const bool ok = token_valid(r, slot, x_rows);
        OutT* out_row = y + int64_t(slot) * y_stride;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int64_t o = row0 + warp_row + mt * 16 + g + 8 * half;
            if (o < out) store_out(out_row + o, ok ? acc[mt][nt][2 * half + c] : __int_as_float(0x7FC00000));
          }
        }
      }
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The cp.async GEMV copies the scale spans in 16-byte chunks and keeps them in (static-limit) shared memory.
bool gemv_cp_async_fits(const Mxfp4ExpertWeights& w) {
  return aligned16(w.scales) && w.in_features <= kMxfp4GroupedGemvCpAsyncMaxIn;
}

int64_t active_bound(const ExpertRouting& r, int experts) {
  return std::min({int64_t(r.max_active_experts), int64_t(experts), int64_t(r.max_slots)});
}

// The bulk GEMV copies the scale spans with 16-byte-aligned bulk copies and keeps ≥ 3 tiles of in/2 + in/32 bytes
// per row in shared memory.
bool gemv_bulk_fits(const Mxfp4ExpertWeights& w) {
  return aligned16(w.scales) && w.in_features <= kMxfp4GroupedGemvBulkMaxIn;
}

// Lets the bulk GEMV use the device's whole opt-in shared memory, once per device (bit d for device d < 64).
template <typename OutT>
cudaError_t configure_gemv_bulk(int device, int shared_bytes_optin) {
  static std::atomic<uint64_t> configured{0};
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (configured.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  const cudaError_t status = cudaFuncSetAttribute(mxfp4_grouped_gemv_bulk_split8<OutT>,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes_optin);
  if (status == cudaSuccess) configured.fetch_or(bit, std::memory_order_release);
  return status;
}

// A persistent grid: as many blocks as fit on the device (one per SM at K3's shapes), never more than the items
// (active expert, 16-row tile) that any routing within the host bounds can have.
template <typename OutT>
cudaError_t launch_gemv_bulk(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                             int64_t x_stride, int64_t x_rows, OutT* y, int64_t y_stride, cudaStream_t stream,
                             int64_t active) {
  const int64_t max_items = active * (w.out_features / kBulkTileRows);
  if (max_items > INT32_MAX) return cudaErrorInvalidValue;
  const BulkLayout layout = gemv_bulk_layout(w.in_features);
  int device = 0, sms = 0, major = 0, optin = 0, per_sm = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess) status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (status == cudaSuccess) status = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (status == cudaSuccess) status = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (status != cudaSuccess) return status;
  if (major < 9) return cudaErrorNotSupported;  // bulk copies and mbarrier transactions are sm_90
  if (layout.shared_bytes > optin) return cudaErrorInvalidValue;
  status = configure_gemv_bulk<OutT>(device, optin);
  if (status == cudaSuccess) {
    status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mxfp4_grouped_gemv_bulk_split8<OutT>, kBulkThreads,
                                                           size_t(layout.shared_bytes));
  }
  if (status != cudaSuccess) return status;
  const auto grid = static_cast<unsigned>(std::min<int64_t>(max_items, int64_t(std::max(per_sm, 1)) * sms));
  mxfp4_grouped_gemv_bulk_split8<OutT><<<grid, kBulkThreads, size_t(layout.shared_bytes), stream>>>(
      w, r, x, x_stride, x_rows, y, y_stride, layout, static_cast<int>(active));
  return cudaGetLastError();
}

template <typename OutT>
cudaError_t launch(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x, int64_t x_stride,
                   int64_t x_rows, OutT* y, int64_t y_stride, cudaStream_t stream, Mxfp4GroupedAlgorithm algorithm) {
  if (w.packed == nullptr || !aligned16(w.packed) || w.scales == nullptr || w.experts <= 0 || w.out_features <= 0 ||
      w.out_features % 16 != 0 || w.in_features <= 0 || w.in_features % kMxBlockElements != 0 ||
      w.out_features > INT32_MAX || w.in_features > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (r.expert_offsets == nullptr || r.slot_token == nullptr || r.active_experts == nullptr ||
      r.active_count == nullptr || r.max_slots < 0 || r.max_active_experts < 0) {
    return cudaErrorInvalidValue;
  }
  if (algorithm != Mxfp4GroupedAlgorithm::automatic && algorithm != Mxfp4GroupedAlgorithm::gemv &&
      algorithm != Mxfp4GroupedAlgorithm::gemv_lut && algorithm != Mxfp4GroupedAlgorithm::gemv_cp_async &&
      algorithm != Mxfp4GroupedAlgorithm::gemv_bulk && algorithm != Mxfp4GroupedAlgorithm::gemm) {
    return cudaErrorInvalidValue;
  }
  if (algorithm == Mxfp4GroupedAlgorithm::gemv_cp_async && !gemv_cp_async_fits(w)) return cudaErrorInvalidValue;
  if (algorithm == Mxfp4GroupedAlgorithm::gemv_bulk && !gemv_bulk_fits(w)) return cudaErrorInvalidValue;
  if (r.max_slots == 0 || r.max_active_experts == 0) return cudaSuccess;  // no slot can be active
  if (x == nullptr || !aligned16(x) || x_stride < w.in_features || x_stride % 8 != 0 || x_rows <= 0 ||
      y == nullptr || y_stride < w.out_features) {
    return cudaErrorInvalidValue;
  }
  const int64_t active = active_bound(r, w.experts);
  if (algorithm == Mxfp4GroupedAlgorithm::automatic) algorithm = mxfp4_grouped_algorithm(w, r);

  if (algorithm == Mxfp4GroupedAlgorithm::gemv_bulk) {
    return launch_gemv_bulk(w, r, x, x_stride, x_rows, y, y_stride, stream, active);
  }
  if (algorithm == Mxfp4GroupedAlgorithm::gemv || algorithm == Mxfp4GroupedAlgorithm::gemv_lut ||
      algorithm == Mxfp4GroupedAlgorithm::gemv_cp_async) {
    const int64_t row_blocks = (w.out_features + kGemvBlockRows - 1) / kGemvBlockRows;
    if (active * row_blocks > INT32_MAX) return cudaErrorInvalidValue;
    const auto grid = static_cast<unsigned>(active * row_blocks);
    if (algorithm == Mxfp4GroupedAlgorithm::gemv) {
      mxfp4_grouped_gemv_mma_rows16<OutT, false><<<grid, kGemvThreads, 0, stream>>>(
          w, r, x, x_stride, x_rows, y, y_stride, static_cast<unsigned>(row_blocks));
    } else if (algorithm == Mxfp4GroupedAlgorithm::gemv_lut) {
      mxfp4_grouped_gemv_mma_rows16<OutT, true><<<grid, kGemvThreads, 0, stream>>>(
          w, r, x, x_stride, x_rows, y, y_stride, static_cast<unsigned>(row_blocks));
    } else {
      const size_t shared = gemv_cp_async_shared_bytes(w.in_features / kMxBlockElements);
      mxfp4_grouped_gemv_mma_rows16_cp_async<OutT><<<grid, kGemvThreads, shared, stream>>>(
          w, r, x, x_stride, x_rows, y, y_stride, static_cast<unsigned>(row_blocks));
    }
    return cudaGetLastError();
  }

  if (active > kMxfp4GroupedGemmMaxActiveExperts) return cudaErrorInvalidValue;
  const size_t prefix_bytes = size_t(active + 1) * sizeof(int);
  static_assert(kGemmStaticSharedBytes + (kMxfp4GroupedGemmMaxActiveExperts + 1) * sizeof(int) <= 48 * 1024);
  int device = 0, sms = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess) status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (status != cudaSuccess) return status;
  // Enough persistent blocks for two per SM, never more than the tiles any routing within the bounds has.
  const int64_t row_tiles = (w.out_features + kGemmRows - 1) / kGemmRows;
  const int64_t max_tiles = row_tiles * ((r.max_slots + kGemmSlots - 1) / kGemmSlots + active);
  const auto grid = static_cast<unsigned>(std::min<int64_t>(max_tiles, int64_t(2) * sms));
  if (max_tiles > INT32_MAX) return cudaErrorInvalidValue;  // tile indices are int
  mxfp4_grouped_gemm_mma_128x64<OutT>
      <<<grid, kGemmThreads, prefix_bytes, stream>>>(w, r, x, x_stride, x_rows, y, y_stride);
  return cudaGetLastError();
}

}  // namespace

Mxfp4GroupedAlgorithm mxfp4_grouped_algorithm(const Mxfp4ExpertWeights& w, const ExpertRouting& routing) {
  const int64_t active = std::max<int64_t>(1, active_bound(routing, w.experts));
  if (routing.max_slots <= int64_t(kMxfp4GroupedGemvMaxAverageSlots) * active ||
      active > kMxfp4GroupedGemmMaxActiveExperts) {
    // The cp.async ring was measured slower than the register-loading GEMV on an H200 (T = 1: 51.2 vs
    // 48.3 µs; T = 64: 1358 vs 1301 µs, bench/results/2026-11-30-h200-engine), so decode takes the GEMV.
    return Mxfp4GroupedAlgorithm::gemv;
  }
  return Mxfp4GroupedAlgorithm::gemm;
}

cudaError_t mxfp4_grouped_bf16_to_f32(const Mxfp4ExpertWeights& w, const ExpertRouting& routing,
                                      const __nv_bfloat16* x, int64_t x_row_stride, int64_t x_rows, float* y,
                                      int64_t y_row_stride, cudaStream_t stream, Mxfp4GroupedAlgorithm algorithm) {
  return launch(w, routing, x, x_row_stride, x_rows, y, y_row_stride, stream, algorithm);
}

cudaError_t mxfp4_grouped_bf16_to_bf16(const Mxfp4ExpertWeights& w, const ExpertRouting& routing,
                                       const __nv_bfloat16* x, int64_t x_row_stride, int64_t x_rows, __nv_bfloat16* y,
                                       int64_t y_row_stride, cudaStream_t stream, Mxfp4GroupedAlgorithm algorithm) {
  return launch(w, routing, x, x_row_stride, x_rows, y, y_row_stride, stream, algorithm);
}

}  // namespace k3::kernels
