// mxfp4_grouped_device: the device building blocks that the MXFP4 grouped kernels (mxfp4_grouped.cu, the GEMV and
// the first GEMM; mxfp4_grouped_gemm.cu, the pipelined GEMM) share: E2M1 decode by bit placement and by byte lookup
// (and of the tiled layout, kernels/mxfp4_tiled.h),
// E8M0 block scales as exact bf16 multiplies, the bf16 m16n8k16 MMA, output stores, the routing accessors, cp.async
// group commit/wait and a block-wide scan; and the pipelined GEMM's launchers. Internal to kernels/: callers use
// mxfp4_grouped.h.
#pragma once

#include "kernels/mxfp4_grouped.h"
#include "kernels/mxfp4_tiled.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels::mxfp4_detail {

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
  const uint32_t sign = (J == 3 ? q : q << (12 - 4 * J)) & 0x80008000u;                    // bits 4J+3, 4J+19
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

// ---- Dequantisation by byte lookup (mxfp4_grouped_gemm_mma_128x128_pipelined) -----------------------
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

// ---- Decode of the tiled layout (kernels/mxfp4_tiled.h) ------------------------------------------------------
// W1:W0 rotated right by kRotation (0: W0, 32: W1; else one funnel shift).
template <int kRotation>
__device__ __forceinline__ uint32_t rotate64(uint32_t w0, uint32_t w1) {
  if constexpr (kRotation == 0) {
    return w0;
  } else if constexpr (kRotation == 32) {
    return w1;
  } else if constexpr (kRotation < 32) {
    return __funnelshift_r(w0, w1, kRotation);
  } else {
    return __funnelshift_r(w1, w0, kRotation - 32);
  }
}

// Output o of a lane's block (mxfp4_tiled.h): the bf16 bits of a pair of weights times 2^-126.
template <int kO>
__device__ __forceinline__ uint32_t tiled_output(uint32_t w0, uint32_t w1) {
  constexpr TiledPiece a = kTiledOutputs[kO].piece[0];
  constexpr TiledPiece b = kTiledOutputs[kO].piece[1];
  uint32_t v = rotate64<a.rotation>(w0, w1) & a.mask;
  if constexpr (b.mask != 0) v |= rotate64<b.rotation>(w0, w1) & b.mask;
  return v;
}

// Row half kR (0: row g, 1: row g + 8) of one lane's block in the tiled layout times the block's scale (both
// multiplies of block_scale): the bf16 pairs of elements 8t … 8t + 7 of the block, in memory order.
template <int kR>
__device__ __forceinline__ uint4 tiled_row_scaled(uint32_t w0, uint32_t w1, const BlockScale& s) {
  uint32_t pairs[4] = {tiled_output<4 * kR>(w0, w1), tiled_output<4 * kR + 1>(w0, w1), tiled_output<4 * kR + 2>(w0, w1),
                       tiled_output<4 * kR + 3>(w0, w1)};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    pairs[j] = bf16x2_mul(pairs[j], s.first2);
    if (s.twice) pairs[j] = bf16x2_mul(pairs[j], s.second2);
  }
  return make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
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

// ---- The GEMVs' passes (mxfp4_grouped_gemv_mma_lean, mxfp4_grouped_gemv_tiled) ----------------------
// Block row `active`'s expert and its slots; false where the block has nothing to do.
__device__ __forceinline__ bool gemv_expert(const Mxfp4ExpertWeights& w, const ExpertRouting& r, int active,
                                            int& expert, int& first_slot, int& end_slot) {
  if (active >= min(*r.active_count, r.max_active_experts)) return false;
  expert = r.active_experts[active];
  if (expert < 0 || expert >= w.experts) return false;
  expert_slots(r, expert, first_slot, end_slot);
  return true;
}

// The x row lane (g, ·) reads in the pass from `pass`: slot pass + g's token; without that slot (or with an invalid
// token) the pass's first slot's, or row 0: that mma column is never stored.
__device__ __forceinline__ const __nv_bfloat16* gemv_x_row(const ExpertRouting& r, const __nv_bfloat16* x,
                                                           int64_t x_stride, int64_t x_rows, int pass, int end_slot,
                                                           int g) {
  const int slot = pass + g < end_slot ? pass + g : pass;
  const int token = r.slot_token[slot];
  return x + (token >= 0 && token < x_rows ? int64_t(token) * x_stride : 0);
}

// The pass's outputs of lane (g, t): columns 2t, 2t + 1 (slots pass + 2t + c) of rows `row` and `row` + 8; NaN for a
// slot whose token is invalid.
template <typename OutT>
__device__ __forceinline__ void gemv_store(const float (&acc)[4], const ExpertRouting& r, int pass, int end_slot, int t,
                                           int64_t x_rows, OutT* y, int64_t y_stride, int64_t row) {
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int s = pass + 2 * t + c;
    if (s < end_slot) {
      const bool ok = token_valid(r, s, x_rows);
      OutT* out = y + int64_t(s) * y_stride + row;
      store_out(out, ok ? acc[c] : __int_as_float(0x7FC00000));
      store_out(out + 8, ok ? acc[2 + c] : __int_as_float(0x7FC00000));
    }
  }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's most recent groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Exclusive prefix of `value` over the block's kThreads threads; `total` gets the sum. warp_sums holds one int per
// warp.
template <int kThreads>
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
  for (int i = 0; i < kThreads / 32; ++i) {
    if (i < warp) before += warp_sums[i];
    total += warp_sums[i];
  }
  return before + inclusive - value;
}
// ---- The persistent GEMMs' schedule -----------------------------------------------------------------
// Tiles of kRows output rows × kSlots slots in the order (active expert, row tile, slot tile), so the slot tiles of
// one W tile run close together and share it in L2.

// Tiles of the a-th active expert; none for an id outside [0, experts).
template <int kSlots>
__device__ int expert_tiles(const Mxfp4ExpertWeights& w, const ExpertRouting& r, int a, int row_tiles) {
  const int expert = r.active_experts[a];
  if (expert < 0 || expert >= w.experts) return 0;
  int first = 0, end = 0;
  expert_slots(r, expert, first, end);
  return end > first ? row_tiles * ((end - first + kSlots - 1) / kSlots) : 0;
}

// Every block of kThreads threads computes the schedule into its shared memory: tile_prefix[a] = the tiles of the
// active experts before a, tile_prefix[active] = all of them (tile_prefix: active + 1 ints, sized for
// max_active_experts + 1; warp_sums: kThreads / 32). Returns active; ends with a barrier.
template <int kThreads, int kRows, int kSlots>
__device__ int build_tile_prefix(const Mxfp4ExpertWeights& w, const ExpertRouting& r, int* tile_prefix,
                                 int* warp_sums) {
  const int active = max(0, min(*r.active_count, r.max_active_experts));
  const int row_tiles = static_cast<int>((w.out_features + kRows - 1) / kRows);
  const int chunk = (active + kThreads - 1) / kThreads;
  const int begin = min(static_cast<int>(threadIdx.x) * chunk, active), end = min(begin + chunk, active);
  int local = 0;
  for (int a = begin; a < end; ++a) {
    tile_prefix[a] = expert_tiles<kSlots>(w, r, a, row_tiles);
    local += tile_prefix[a];
  }
  int total = 0;
  int running = block_exclusive_scan<kThreads>(local, warp_sums, total);
  for (int a = begin; a < end; ++a) {
    const int tiles_a = tile_prefix[a];
    tile_prefix[a] = running;
    running += tiles_a;
  }
  if (threadIdx.x == 0) tile_prefix[active] = total;
  __syncthreads();
  return active;
}

// One tile of the schedule: its expert, the end of the expert's slots, and its first output row and slot.
struct GemmTile {
  int expert, end_slot, slot0;
  int64_t row0;
};

// The tile-th tile (0 ≤ tile < tile_prefix[active]).
template <int kRows, int kSlots>
__device__ GemmTile locate_tile(const ExpertRouting& r, const int* tile_prefix, int active, int tile) {
  int lo = 0, hi = active;  // the a with prefix[a] ≤ tile < prefix[a + 1]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (tile_prefix[mid] <= tile)
      lo = mid;
    else
      hi = mid;
  }
  GemmTile at{};
  at.expert = r.active_experts[lo];
  int first_slot = 0;
  expert_slots(r, at.expert, first_slot, at.end_slot);
  const int slot_tiles = (at.end_slot - first_slot + kSlots - 1) / kSlots;
  const int local = tile - tile_prefix[lo];
  at.row0 = int64_t(local / slot_tiles) * kRows;
  at.slot0 = first_slot + (local % slot_tiles) * kSlots;
  return at;
}

// The current device's multiprocessor count (the persistent GEMMs' grids, the tiled GEMV's block shape).
inline cudaError_t current_multiprocessors(int& sms) {
  int device = 0;
  const cudaError_t status = cudaGetDevice(&device);
  return status == cudaSuccess ? cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) : status;
}

// mxfp4_grouped_gemm_mma_128x128_pipelined (mxfp4_grouped_gemm.cu) after launch()'s argument checks: `active` is the
// host bound on the active experts (at most kMxfp4GroupedGemmMaxActiveExperts), max_slots > 0. OutT float or bf16.
template <typename OutT>
cudaError_t launch_gemm_pipelined(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                                  int64_t x_stride, int64_t x_rows, OutT* y, int64_t y_stride, int64_t active,
                                  cudaStream_t stream);

// mxfp4_grouped_gemm_wgmma_128x192 (mxfp4_grouped_gemm_wgmma.cu) after launch()'s checks: cudaErrorNotSupported
// unless the weights are tiled and the current device runs sm_90a. OutT float or bf16.
template <typename OutT>
cudaError_t launch_gemm_wgmma(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                              int64_t x_stride, int64_t x_rows, OutT* y, int64_t y_stride, int64_t active,
                              cudaStream_t stream);

// mxfp4_grouped_gemv_tiled (mxfp4_grouped_gemv_tiled.cu) on Mxfp4Layout::tiled16 weights, after launch()'s checks.
// OutT float or bf16.
template <typename OutT>
cudaError_t launch_gemv_tiled(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                              int64_t x_stride, int64_t x_rows, OutT* y, int64_t y_stride, int64_t active,
                              cudaStream_t stream);

}  // namespace k3::kernels::mxfp4_detail
