#include "kernels/mxfp4_grouped.h"

#include "kernels/mxfp4_grouped_device.h"
#include "kernels/ptx_mma.h"
#include "kernels/shared_memory_config.h"

#include <algorithm>
#include <atomic>
#include <climits>

namespace k3::kernels {

namespace {

using namespace mxfp4_detail;

// ---- Decode: mxfp4_grouped_gemv_mma_rows16 ----------------------------------------------------------
constexpr int kGemvThreads = 128;
constexpr int kGemvWarpRows = 16;                                  // one mma m-tile per warp
constexpr int kGemvBlockRows = kGemvThreads / 32 * kGemvWarpRows;  // 64
constexpr int kGemvSlots = 8;                                      // one mma n-tile per pass
constexpr int kRows16Loads = 2;  // 16-byte weight loads per row and lane issued together

// blockIdx.x = active expert index · row_blocks + (output row) / 64. Lane (g, t) of a warp loads, for its
// rows g and g + 8 of the warp's 16, the whole 32-element blocks 4u + t of each group of 4·kRows16Loads
// blocks, and the same blocks of x for slot g of the pass: every mma then covers 16 k of one word position
// of four different blocks, whose scales are already folded into the bf16 weights.
template <typename OutT>
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
    for (int64_t b0 = 0; b0 < blocks; b0 += 4 * kRows16Loads) {
      uint4 q_lo[kRows16Loads], q_hi[kRows16Loads];
      uint32_t s_lo[kRows16Loads], s_hi[kRows16Loads];
#pragma unroll
      for (int u = 0; u < kRows16Loads; ++u) {
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
      for (int u = 0; u < kRows16Loads; ++u) {
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

// ---- Decode: mxfp4_grouped_gemv_mma_lean ----------------------------------------------------------------
// rows16's tile, lane mapping and products (so the same bits) with a lean instruction stream: the k-loop over whole
// groups of 8 blocks has no bounds tests (one checked group finishes a row whose block count is not a multiple of
// 8), walks pointers, lets lanes without a slot read a valid x row whose mma column is never stored (so no zero fill), and decodes the scale as one
// multiply-add while no scale of the warp's group exceeds 2^1 (above it, or NaN, the group takes block_scale's
// two-multiply path).
constexpr int kGemvLoads = 2;                    // 16-byte weight chunks per row and lane in one group
constexpr int kGemvGroupBlocks = 4 * kGemvLoads;  // blocks per row in one group

struct GemvGroup {
  uint4 q_lo[kGemvLoads], q_hi[kGemvLoads];  // rows g and g + 8: blocks 4u + t of the group
  uint32_t s_lo[kGemvLoads], s_hi[kGemvLoads];
};

// 2^(s − 1) in both bf16 halves, for s ≤ 128: (s + 126) << 7 twice.
__device__ __forceinline__ uint32_t small_scale_factor(uint32_t s) { return s * 0x00800080u + 126u * 0x00800080u; }

// The weights and scales of the group whose first block is first_block (checked: blocks past the row's end are
// zeros at scale 2^0).
template <bool kChecked>
__device__ __forceinline__ void load_gemv_weights(GemvGroup& g, const uint4* w_lo, const uint4* w_hi,
                                                  const uint8_t* sc_lo, const uint8_t* sc_hi, int first_block, int t,
                                                  int blocks) {
#pragma unroll
  for (int u = 0; u < kGemvLoads; ++u) {
    const int b = first_block + 4 * u;  // this lane's block is b + t
    if (!kChecked || b + t < blocks) {
      g.q_lo[u] = __ldcs(w_lo + b);
      g.q_hi[u] = __ldcs(w_hi + b);
      g.s_lo[u] = __ldcs(sc_lo + b);
      g.s_hi[u] = __ldcs(sc_hi + b);
    } else {
      g.q_lo[u] = g.q_hi[u] = make_uint4(0, 0, 0, 0);
      g.s_lo[u] = g.s_hi[u] = kNeutralScale;
    }
  }
}

// The group's 2·4·kGemvLoads products with x of this lane's slot from x_group (the group's first block; checked:
// `blocks` blocks are left in the row). kGeneral: the two-multiply scales of block_scale (any scale above 2^1, or
// NaN), else one multiply by small_scale_factor.
template <bool kChecked, bool kGeneral>
__device__ __forceinline__ void gemv_group_products(const GemvGroup& g, const __nv_bfloat16* x_group, int t,
                                                    int blocks, float (&acc)[4]) {
#pragma unroll
  for (int u = 0; u < kGemvLoads; ++u) {
    uint4 xv[4];
    const uint4* p = reinterpret_cast<const uint4*>(x_group + 4 * u * kMxBlockElements);
#pragma unroll
    for (int k = 0; k < 4; ++k) xv[k] = !kChecked || 4 * u + t < blocks ? __ldg(p + k) : make_uint4(0, 0, 0, 0);
    const uint32_t words_lo[4] = {g.q_lo[u].x, g.q_lo[u].y, g.q_lo[u].z, g.q_lo[u].w};
    const uint32_t words_hi[4] = {g.q_hi[u].x, g.q_hi[u].y, g.q_hi[u].z, g.q_hi[u].w};
    BlockScale scale_lo{}, scale_hi{};
    if constexpr (kGeneral) {
      scale_lo = block_scale(g.s_lo[u]);
      scale_hi = block_scale(g.s_hi[u]);
    } else {
      scale_lo.first2 = small_scale_factor(g.s_lo[u]);
      scale_hi.first2 = small_scale_factor(g.s_hi[u]);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // word k of the block: permuted positions 0..3, then 4..7
      uint32_t a_lo[4], a_hi[4];
      if constexpr (kGeneral) {
        dequantize_word(words_lo[k], scale_lo, a_lo);
        dequantize_word(words_hi[k], scale_hi, a_hi);
      } else {
        a_lo[0] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<0>(words_lo[k]), scale_lo.first2);
        a_lo[1] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<1>(words_lo[k]), scale_lo.first2);
        a_lo[2] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<2>(words_lo[k]), scale_lo.first2);
        a_lo[3] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<3>(words_lo[k]), scale_lo.first2);
        a_hi[0] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<0>(words_hi[k]), scale_hi.first2);
        a_hi[1] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<1>(words_hi[k]), scale_hi.first2);
        a_hi[2] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<2>(words_hi[k]), scale_hi.first2);
        a_hi[3] = bf16x2_mul(e2m1_pair_times_2_pow_minus_126<3>(words_hi[k]), scale_hi.first2);
      }
      const uint4 bx = permute_x8(xv[k]);
      mma_bf16_16x8x16(acc, a_lo[0], a_hi[0], a_lo[1], a_hi[1], bx.x, bx.y);
      mma_bf16_16x8x16(acc, a_lo[2], a_hi[2], a_lo[3], a_hi[3], bx.z, bx.w);
    }
  }
}

template <bool kChecked>
__device__ __forceinline__ void gemv_group_math(const GemvGroup& g, const __nv_bfloat16* x_group, int t, int blocks,
                                                float (&acc)[4]) {
  uint32_t big = 0;
#pragma unroll
  for (int u = 0; u < kGemvLoads; ++u) big |= static_cast<uint32_t>(max(g.s_lo[u], g.s_hi[u]) > 128u);
  if (__any_sync(0xFFFFFFFFu, big != 0)) {
    gemv_group_products<kChecked, true>(g, x_group, t, blocks, acc);
  } else {
    gemv_group_products<kChecked, false>(g, x_group, t, blocks, acc);
  }
}

// Asks the L2 for the weights of the group kAhead groups on (rows g, g + 8; their scales share lines with this
// group's).
template <int kAhead>
__device__ __forceinline__ void prefetch_gemv_weights(const uint4* w_lo, const uint4* w_hi) {
#pragma unroll
  for (int u = 0; u < kGemvLoads; ++u) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(w_lo + kAhead * kGemvGroupBlocks + 4 * u));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(w_hi + kAhead * kGemvGroupBlocks + 4 * u));
  }
}

// What every GEMV block starts from: its expert's slots, this warp's rows and this lane's pointers.
struct GemvLane {
  int first_slot, end_slot, g, t, blocks;
  int64_t row;                   // and row + 8
  const uint4 *w_lo, *w_hi;      // this lane's first 16-byte chunk of rows g, g + 8 (block t)
  const uint8_t *sc_lo, *sc_hi;  // their scale of block t
};

// False when the block or warp has nothing to do.
__device__ __forceinline__ bool gemv_lane(const Mxfp4ExpertWeights& w, const ExpertRouting& r, unsigned row_blocks,
                                          GemvLane& l) {
  const int active = static_cast<int>(blockIdx.x / row_blocks);
  if (active >= min(*r.active_count, r.max_active_experts)) return false;
  const int expert = r.active_experts[active];
  if (expert < 0 || expert >= w.experts) return false;
  expert_slots(r, expert, l.first_slot, l.end_slot);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  l.g = lane / 4;
  l.t = lane % 4;
  const int64_t tile_row = int64_t(blockIdx.x % row_blocks) * kGemvBlockRows + warp * kGemvWarpRows;
  if (tile_row >= w.out_features) return false;  // the whole warp (out is a multiple of 16)
  l.row = tile_row + l.g;
  l.blocks = static_cast<int>(w.in_features / kMxBlockElements);
  const int64_t first_row = int64_t(expert) * w.out_features + l.row;
  l.w_lo = reinterpret_cast<const uint4*>(w.packed + first_row * l.blocks * kMxBlockBytes) + l.t;
  l.w_hi = l.w_lo + 8 * l.blocks;
  l.sc_lo = w.scales + first_row * l.blocks + l.t;
  l.sc_hi = l.sc_lo + 8 * l.blocks;
  return true;
}

// This lane's x for the pass starting at slot `pass`: its mma column is slot pass + g; without one (or with an
// invalid token) it reads the pass's first slot, or row 0, instead, as that column is never stored.
__device__ __forceinline__ const __nv_bfloat16* gemv_x_lane(const ExpertRouting& r, const GemvLane& l, int pass,
                                                            const __nv_bfloat16* x, int64_t x_stride, int64_t x_rows) {
  const int slot = pass + l.g < l.end_slot ? pass + l.g : pass;
  const int token = r.slot_token[slot];
  return x + (token >= 0 && token < x_rows ? int64_t(token) * x_stride : 0) + l.t * kMxBlockElements;
}

// The pass's outputs: columns 2t, 2t + 1 of rows g, g + 8; NaN for a slot whose token is invalid.
template <typename OutT>
__device__ __forceinline__ void store_gemv_pass(const ExpertRouting& r, const GemvLane& l, int pass,
                                                const float (&acc)[4], int64_t x_rows, OutT* y, int64_t y_stride) {
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int s = pass + 2 * l.t + c;
    if (s < l.end_slot) {
      const bool ok = token_valid(r, s, x_rows);
      OutT* out = y + int64_t(s) * y_stride + l.row;
      store_out(out, ok ? acc[c] : __int_as_float(0x7FC00000));
      store_out(out + 8, ok ? acc[2 + c] : __int_as_float(0x7FC00000));
    }
  }
}

template <int kPrefetchAhead, typename OutT>
__global__ void __launch_bounds__(kGemvThreads, 6)
    mxfp4_grouped_gemv_mma_lean(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride,
                                unsigned row_blocks) {
  GemvLane l;
  if (!gemv_lane(w, r, row_blocks, l)) return;
  const int full_end = l.blocks / kGemvGroupBlocks * kGemvGroupBlocks;
  for (int pass = l.first_slot; pass < l.end_slot; pass += kGemvSlots) {
    const __nv_bfloat16* xl = gemv_x_lane(r, l, pass, x, x_stride, x_rows);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int b0 = 0; b0 < full_end; b0 += kGemvGroupBlocks) {  // the lane's pointers walk a group at a time
      if constexpr (kPrefetchAhead > 0) {
        if (b0 + kPrefetchAhead * kGemvGroupBlocks < full_end) prefetch_gemv_weights<kPrefetchAhead>(l.w_lo, l.w_hi);
      }
      GemvGroup group;
      load_gemv_weights<false>(group, l.w_lo, l.w_hi, l.sc_lo, l.sc_hi, 0, l.t, kGemvGroupBlocks);
      gemv_group_math<false>(group, xl, l.t, kGemvGroupBlocks, acc);
      l.w_lo += kGemvGroupBlocks;
      l.w_hi += kGemvGroupBlocks;
      l.sc_lo += kGemvGroupBlocks;
      l.sc_hi += kGemvGroupBlocks;
      xl += kGemvGroupBlocks * kMxBlockElements;
    }
    if (full_end < l.blocks) {  // the blocks left: fewer than a group
      GemvGroup group;
      load_gemv_weights<true>(group, l.w_lo, l.w_hi, l.sc_lo, l.sc_hi, 0, l.t, l.blocks - full_end);
      gemv_group_math<true>(group, xl, l.t, l.blocks - full_end, acc);
    }
    l.w_lo -= full_end;  // back to the row starts for the next pass
    l.w_hi -= full_end;
    l.sc_lo -= full_end;
    l.sc_hi -= full_end;
    store_gemv_pass(r, l, pass, acc, x_rows, y, y_stride);
  }
}

// ---- Decode: mxfp4_grouped_gemv_mma_async ---------------------------------------------------------------
// gemv_lean's products and order for rows of whole groups (in a multiple of 256), with each warp's weights and
// scales brought by cp.async through a kGemvRingStages-deep ring in shared memory (each lane copies and reads back
// its own 16-byte chunks; lanes 0..15 copy one row's 8 scale bytes each), so two groups are in flight while the
// warp does one group's math.
constexpr int kGemvRingStages = 3;

struct GemvRing {
  uint4 q[kGemvRingStages][2 * kGemvLoads][32];                  // [stage][2u + (row g + 8)][lane]
  uint8_t s[kGemvRingStages][kGemvWarpRows][kGemvGroupBlocks];  // [stage][warp row][block of the group]
};
constexpr int kGemvRingBytes = kGemvThreads / 32 * int(sizeof(GemvRing));

__device__ __forceinline__ void cp_async_8(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src));
}

template <typename OutT>
__global__ void __launch_bounds__(kGemvThreads, 6)
    mxfp4_grouped_gemv_mma_async(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                 int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride,
                                 unsigned row_blocks) {
  extern __shared__ __align__(16) unsigned char gemv_ring_bytes[];
  GemvLane l;
  if (!gemv_lane(w, r, row_blocks, l)) return;
  const int lane = threadIdx.x % 32;
  GemvRing& ring = reinterpret_cast<GemvRing*>(gemv_ring_bytes)[threadIdx.x / 32];
  const int groups = l.blocks / kGemvGroupBlocks;
  // Lanes 0..15 copy the scales of warp row `lane` (rows g are 0..7, rows g + 8 are 8..15).
  const uint8_t* sc_copy = (lane < 8 ? l.sc_lo - l.t : l.sc_hi - l.t) + int64_t(lane % 8 - l.g) * l.blocks;

  const auto issue = [&](int group) {
    const int stage = group % kGemvRingStages, b0 = group * kGemvGroupBlocks;
#pragma unroll
    for (int u = 0; u < kGemvLoads; ++u) {
      ptx::cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(&ring.q[stage][2 * u][lane])),
                       l.w_lo + b0 + 4 * u, true);
      ptx::cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(&ring.q[stage][2 * u + 1][lane])),
                       l.w_hi + b0 + 4 * u, true);
    }
    if (lane < kGemvWarpRows) cp_async_8(&ring.s[stage][lane][0], sc_copy + b0);
  };

  for (int pass = l.first_slot; pass < l.end_slot; pass += kGemvSlots) {
    const __nv_bfloat16* x_lane = gemv_x_lane(r, l, pass, x, x_stride, x_rows);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    __syncwarp();  // the previous pass's reads of the ring are done
#pragma unroll
    for (int i = 0; i < kGemvRingStages - 1; ++i) {
      if (i < groups) issue(i);
      cp_async_commit();
    }
    for (int n = 0; n < groups; ++n) {
      GemvGroup group;
      cp_async_wait<kGemvRingStages - 2>();  // group n has landed (this lane's copies) …
      __syncwarp();                          // … and every lane's; stage (n − 1) % stages is free again
      if (n + kGemvRingStages - 1 < groups) issue(n + kGemvRingStages - 1);
      cp_async_commit();
      const int stage = n % kGemvRingStages;
#pragma unroll
      for (int u = 0; u < kGemvLoads; ++u) {
        group.q_lo[u] = ring.q[stage][2 * u][lane];
        group.q_hi[u] = ring.q[stage][2 * u + 1][lane];
        group.s_lo[u] = ring.s[stage][l.g][4 * u + l.t];
        group.s_hi[u] = ring.s[stage][8 + l.g][4 * u + l.t];
      }
      gemv_group_math<false>(group, x_lane + n * kGemvGroupBlocks * kMxBlockElements, l.t, kGemvGroupBlocks, acc);
    }
    store_gemv_pass(r, l, pass, acc, x_rows, y, y_stride);
  }
}

template <typename OutT>
cudaError_t launch_gemv_async(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                              int64_t x_stride, int64_t x_rows, OutT* y, int64_t y_stride, unsigned grid,
                              unsigned row_blocks, cudaStream_t stream) {
  static std::atomic<uint64_t> configured{0};
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess) {
    status = allow_dynamic_shared_memory_once(mxfp4_grouped_gemv_mma_async<OutT>, kGemvRingBytes, device, configured);
  }
  if (status != cudaSuccess) return status;
  mxfp4_grouped_gemv_mma_async<OutT>
      <<<grid, kGemvThreads, kGemvRingBytes, stream>>>(w, r, x, x_stride, x_rows, y, y_stride, row_blocks);
  return cudaGetLastError();
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

  const int active = build_tile_prefix<kGemmThreads, kGemmRows, kGemmSlots>(w, r, tile_prefix, warp_sums);

  const int64_t out = w.out_features, blocks = w.in_features / kMxBlockElements;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_row = (warp % 4) * 32, warp_slot = (warp / 4) * 32;
  const int load_row = threadIdx.x / 2, load_half = threadIdx.x % 2;    // W: 8 bytes = 16 elements
  const int load_slot = threadIdx.x / 4, load_chunk = threadIdx.x % 4;  // x: 16 bytes = 8 elements
  const int total_tiles = tile_prefix[active];

  for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
    const GemmTile tile_at = locate_tile<kGemmRows, kGemmSlots>(r, tile_prefix, active, tile);
    const int expert = tile_at.expert, end_slot = tile_at.end_slot, slot0 = tile_at.slot0;
    const int64_t row0 = tile_at.row0;

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

int64_t active_bound(const ExpertRouting& r, int experts) {
  return std::min({int64_t(r.max_active_experts), int64_t(experts), int64_t(r.max_slots)});
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
      algorithm != Mxfp4GroupedAlgorithm::gemm && algorithm != Mxfp4GroupedAlgorithm::gemm_pipelined &&
      algorithm != Mxfp4GroupedAlgorithm::gemv_lean && algorithm != Mxfp4GroupedAlgorithm::gemv_async &&
      algorithm != Mxfp4GroupedAlgorithm::gemv_lean_l2pf1 && algorithm != Mxfp4GroupedAlgorithm::gemv_lean_l2pf2) {
    return cudaErrorInvalidValue;
  }
  if (r.max_slots == 0 || r.max_active_experts == 0) return cudaSuccess;  // no slot can be active
  if (x == nullptr || !aligned16(x) || x_stride < w.in_features || x_stride % 8 != 0 || x_rows <= 0 ||
      y == nullptr || y_stride < w.out_features) {
    return cudaErrorInvalidValue;
  }
  const int64_t active = active_bound(r, w.experts);
  if (algorithm == Mxfp4GroupedAlgorithm::automatic) algorithm = mxfp4_grouped_algorithm(w, r);

  if (algorithm != Mxfp4GroupedAlgorithm::gemm && algorithm != Mxfp4GroupedAlgorithm::gemm_pipelined) {
    const int64_t row_blocks = (w.out_features + kGemvBlockRows - 1) / kGemvBlockRows;
    if (active * row_blocks > INT32_MAX) return cudaErrorInvalidValue;
    const auto grid = static_cast<unsigned>(active * row_blocks);
    const auto rb = static_cast<unsigned>(row_blocks);
    switch (algorithm) {
      case Mxfp4GroupedAlgorithm::gemv_lean:
        mxfp4_grouped_gemv_mma_lean<0, OutT>
            <<<grid, kGemvThreads, 0, stream>>>(w, r, x, x_stride, x_rows, y, y_stride, rb);
        break;
      case Mxfp4GroupedAlgorithm::gemv_lean_l2pf1:
        mxfp4_grouped_gemv_mma_lean<1, OutT>
            <<<grid, kGemvThreads, 0, stream>>>(w, r, x, x_stride, x_rows, y, y_stride, rb);
        break;
      case Mxfp4GroupedAlgorithm::gemv_lean_l2pf2:
        mxfp4_grouped_gemv_mma_lean<2, OutT>
            <<<grid, kGemvThreads, 0, stream>>>(w, r, x, x_stride, x_rows, y, y_stride, rb);
        break;
      case Mxfp4GroupedAlgorithm::gemv_async:
        if (w.in_features % (kGemvGroupBlocks * kMxBlockElements) == 0) {
          return launch_gemv_async(w, r, x, x_stride, x_rows, y, y_stride, grid, rb, stream);
        }
        mxfp4_grouped_gemv_mma_lean<0, OutT>
            <<<grid, kGemvThreads, 0, stream>>>(w, r, x, x_stride, x_rows, y, y_stride, rb);
        break;
      default:
        mxfp4_grouped_gemv_mma_rows16<OutT><<<grid, kGemvThreads, 0, stream>>>(w, r, x, x_stride, x_rows, y, y_stride, rb);
    }
    return cudaGetLastError();
  }

  if (active > kMxfp4GroupedGemmMaxActiveExperts) return cudaErrorInvalidValue;
  if (algorithm == Mxfp4GroupedAlgorithm::gemm_pipelined) {
    return launch_gemm_pipelined(w, r, x, x_stride, x_rows, y, y_stride, active, stream);
  }
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
    return Mxfp4GroupedAlgorithm::gemv;
  }
  // The pipelined GEMM was measured 1.47x faster than gemm_mma_128x64 at a prefill of 8192 tokens on an H200
  // (18.3 vs 26.8 ms, bench/results/2026-11-30-h200-kernels-6).
  return Mxfp4GroupedAlgorithm::gemm_pipelined;
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
