// mxfp4_grouped_gemv_tiled: the decode GEMV of mxfp4_grouped.h on weights in the tiled layout (kernels/mxfp4_tiled.h).
// The lean GEMV's grid, passes and products (one warp per 16 output rows of one active expert, mma.sync m16n8k16 per
// 8 slots, fp32 accumulation), with the layout's loads and decode: per two blocks a lane loads 16 weight bytes (the
// warp 512 contiguous bytes), its row pair's 4 scale bytes, and 16 bytes of x per block in memory order; 8 bf16
// pairs decode in 18 integer instructions (mxfp4_tiled.h) and the scales are the same exact bf16 multiplies, so the
// products are those of the canonical GEMV up to the order of the fp32 sums. Blocks of 4 warps (7 per SM), or one block
// of 28 warps per SM over an even share of the tiles where that covers the launch in one wave
// (mxfp4_gemv_tiled_block_warps, mxfp4_grouped.h).
#include "kernels/mxfp4_grouped_device.h"
#include "kernels/mxfp4_tiled.h"

#include <algorithm>
#include <climits>

namespace k3::kernels::mxfp4_detail {

namespace {

constexpr int kSlots = 8;                                 // one mma n-tile per pass
constexpr int kGroupPairs = 4;                            // block pairs loaded together (8 blocks, as the lean GEMV)
constexpr int kUnitVectors = kTiledUnitWeightBytes / 16;  // uint4 per unit
constexpr int kUnitScaleWords = kTiledUnitScaleBytes / 4;

// Byte k of s in both bf16 halves as the factor 2^(byte − 1) (valid for bytes ≤ 128): (byte + 126) << 7 twice.
template <int kByte>
__device__ __forceinline__ uint32_t small_factor(uint32_t s) {
  constexpr uint32_t kSelector = 0x4040u | (kByte << 8) | kByte;  // bytes 0 and 2 from byte kByte, 1 and 3 zero
  return __byte_perm(s, 0u, kSelector) * 128u + 126u * 0x00800080u;
}

// Row half kR of a lane's block in the tiled layout times a scale factor of small_factor's form (one multiply).
template <int kR>
__device__ __forceinline__ uint4 tiled_row_factored(uint32_t w0, uint32_t w1, uint32_t factor) {
  return make_uint4(
      bf16x2_mul(tiled_output<4 * kR>(w0, w1), factor), bf16x2_mul(tiled_output<4 * kR + 1>(w0, w1), factor),
      bf16x2_mul(tiled_output<4 * kR + 2>(w0, w1), factor), bf16x2_mul(tiled_output<4 * kR + 3>(w0, w1), factor));
}

// One block of the lane: its decoded pairs of rows g (lo) and g + 8 (hi) times x's 8 elements. k-half 0 takes elements
// 0, 1 | 2, 3 of the lane's 8, k-half 1 elements 4, 5 | 6, 7 (mxfp4_tiled.h's k order).
__device__ __forceinline__ void block_products(const uint4& lo, const uint4& hi, const uint4& xv, float (&acc)[4]) {
  mma_bf16_16x8x16(acc, lo.x, hi.x, lo.y, hi.y, xv.x, xv.y);
  mma_bf16_16x8x16(acc, lo.z, hi.z, lo.w, hi.w, xv.z, xv.w);
}

// One unit (two blocks) of the lane: weights wv, scales sv (row g blocks 0, 1, row g + 8 blocks 0, 1), x at the
// lane's elements of the first block. kGeneral: block_scale's two multiplies (any scale above 2^1, or NaN).
template <bool kGeneral>
__device__ __forceinline__ void pair_products(const uint4& wv, uint32_t sv, const __nv_bfloat16* x_pair,
                                              float (&acc)[4]) {
  const uint4 x0 = __ldg(reinterpret_cast<const uint4*>(x_pair));
  const uint4 x1 = __ldg(reinterpret_cast<const uint4*>(x_pair + kMxBlockElements));
  if constexpr (kGeneral) {
    block_products(tiled_row_scaled<0>(wv.x, wv.y, block_scale(sv & 0xFFu)),
                   tiled_row_scaled<1>(wv.x, wv.y, block_scale((sv >> 16) & 0xFFu)), x0, acc);
    block_products(tiled_row_scaled<0>(wv.z, wv.w, block_scale((sv >> 8) & 0xFFu)),
                   tiled_row_scaled<1>(wv.z, wv.w, block_scale(sv >> 24)), x1, acc);
  } else {
    block_products(tiled_row_factored<0>(wv.x, wv.y, small_factor<0>(sv)),
                   tiled_row_factored<1>(wv.x, wv.y, small_factor<2>(sv)), x0, acc);
    block_products(tiled_row_factored<0>(wv.z, wv.w, small_factor<1>(sv)),
                   tiled_row_factored<1>(wv.z, wv.w, small_factor<3>(sv)), x1, acc);
  }
}

// Whether a byte of s exceeds 128 (a scale above 2^1, or NaN).
__device__ __forceinline__ bool has_big_scale(uint32_t s) {
  return (((s & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) & s & 0x80808080u) != 0;
}

// kPairs loaded units (x from the first's block on): the general scale path for all of them where any lane of the
// warp holds a big scale, else the one-multiply path.
template <int kPairs>
__device__ __forceinline__ void units_products(const uint4 (&wv)[kPairs], const uint32_t (&sv)[kPairs],
                                               const __nv_bfloat16* xp, float (&acc)[4]) {
  bool big = false;
#pragma unroll
  for (int k = 0; k < kPairs; ++k) big |= has_big_scale(sv[k]);
  if (__any_sync(0xFFFFFFFFu, big)) {
#pragma unroll
    for (int k = 0; k < kPairs; ++k) pair_products<true>(wv[k], sv[k], xp + k * 64, acc);
  } else {
#pragma unroll
    for (int k = 0; k < kPairs; ++k) pair_products<false>(wv[k], sv[k], xp + k * 64, acc);
  }
}

// Tile `tile` (16 output rows) of `expert` for its slots [first_slot, end_slot), by one warp.
template <typename OutT>
__device__ __forceinline__ void tile_products(const Mxfp4ExpertWeights& w, const ExpertRouting& r,
                                              const __nv_bfloat16* __restrict__ x, int64_t x_stride, int64_t x_rows,
                                              OutT* __restrict__ y, int64_t y_stride, int expert, int first_slot,
                                              int end_slot, int64_t tile) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t row = tile * kTiledRows + g;  // and row + 8
  const int pairs = static_cast<int>(w.in_features / 64);
  const int64_t first_unit = tile * pairs;
  const uint4* w_lane = reinterpret_cast<const uint4*>(w.packed + expert * w.out_features * (w.in_features / 2)) +
                        first_unit * kUnitVectors + lane;
  const uint8_t* expert_scales = w.scales + expert * w.out_features * (w.in_features / 32);
  const uint32_t* s_lane = reinterpret_cast<const uint32_t*>(expert_scales) + first_unit * kUnitScaleWords + g;
  const int full_groups = pairs / kGroupPairs;

  for (int pass = first_slot; pass < end_slot; pass += kSlots) {
    const __nv_bfloat16* x_lane = gemv_x_row(r, x, x_stride, x_rows, pass, end_slot, g) + 8 * t;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint4* wp = w_lane;
    const uint32_t* sp = s_lane;
    const __nv_bfloat16* xp = x_lane;
    for (int group = 0; group < full_groups; ++group) {
      uint4 wv[kGroupPairs];
      uint32_t sv[kGroupPairs];
#pragma unroll
      for (int k = 0; k < kGroupPairs; ++k) {
        wv[k] = __ldcs(wp + k * kUnitVectors);
        sv[k] = __ldcs(sp + k * kUnitScaleWords);
      }
      units_products(wv, sv, xp, acc);
      wp += kGroupPairs * kUnitVectors;
      sp += kGroupPairs * kUnitScaleWords;
      xp += kGroupPairs * 64;
    }
    for (int p = full_groups * kGroupPairs; p < pairs; ++p) {  // the last 1 … 3 pairs
      const uint4 wv[1] = {__ldcs(w_lane + p * kUnitVectors)};
      const uint32_t sv[1] = {__ldcs(s_lane + p * kUnitScaleWords)};
      units_products(wv, sv, x_lane + p * 64, acc);
    }
    gemv_store(acc, r, pass, end_slot, t, x_rows, y, y_stride, row);
  }
}

// Blocks of 4 warps, 7 per SM: blockIdx.x = active expert index · row_blocks + (output row) / 64; warp w of the block
// owns tile 4·(that) + w.
template <typename OutT>
__global__ void __launch_bounds__(32 * kMxfp4GemvTiledBlockWarps, kMxfp4GemvTiledWarpsPerSm / kMxfp4GemvTiledBlockWarps)
    mxfp4_grouped_gemv_tiled(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                             int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride,
                             unsigned row_blocks) {
  int expert = 0, first_slot = 0, end_slot = 0;
  if (!gemv_expert(w, r, static_cast<int>(blockIdx.x / row_blocks), expert, first_slot, end_slot)) return;
  const int64_t tile = int64_t(blockIdx.x % row_blocks) * kMxfp4GemvTiledBlockWarps + threadIdx.x / 32;
  if (tile * kTiledRows >= w.out_features) return;  // the whole warp
  tile_products(w, r, x, x_stride, x_rows, y, y_stride, expert, first_slot, end_slot, tile);
}

// One block of 28 warps per SM (all of the launch in one wave): the tiles of the first min(active count, `active`)
// active experts in order, an even share of them per block, one per warp; the host sizes the grid so that no share
// exceeds 28 (active · tiles per expert ≤ 28 · blocks, or one tile per block).
template <typename OutT>
__global__ void __launch_bounds__(32 * kMxfp4GemvTiledWarpsPerSm, 1)
    mxfp4_grouped_gemv_tiled_whole_sm(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                      int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride,
                                      int active) {
  const int64_t tiles_per_expert = w.out_features / kTiledRows;
  const int64_t tiles = int64_t(max(0, min(*r.active_count, active))) * tiles_per_expert;
  const int64_t begin = tiles * blockIdx.x / gridDim.x, end = tiles * (blockIdx.x + 1) / gridDim.x;
  const int64_t flat = begin + threadIdx.x / 32;
  if (flat >= end) return;  // the whole warp
  int expert = 0, first_slot = 0, end_slot = 0;
  if (!gemv_expert(w, r, static_cast<int>(flat / tiles_per_expert), expert, first_slot, end_slot)) return;
  tile_products(w, r, x, x_stride, x_rows, y, y_stride, expert, first_slot, end_slot, flat % tiles_per_expert);
}

}  // namespace

template <typename OutT>
cudaError_t launch_gemv_tiled(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                              int64_t x_stride, int64_t x_rows, OutT* y, int64_t y_stride, int64_t active,
                              cudaStream_t stream) {
  if (!mxfp4_tiled_supported(w.out_features, w.in_features)) return cudaErrorInvalidValue;
  int sms = 0;
  if (const cudaError_t status = current_multiprocessors(sms); status != cudaSuccess) return status;
  if (mxfp4_gemv_tiled_block_warps(active, w.out_features, sms) == kMxfp4GemvTiledWarpsPerSm) {
    const auto grid = static_cast<unsigned>(std::min<int64_t>(sms, active * (w.out_features / kTiledRows)));
    mxfp4_grouped_gemv_tiled_whole_sm<OutT><<<grid, 32 * kMxfp4GemvTiledWarpsPerSm, 0, stream>>>(
        w, r, x, x_stride, x_rows, y, y_stride, static_cast<int>(active));
    return cudaGetLastError();
  }
  constexpr int kBlockRows = kMxfp4GemvTiledBlockWarps * kTiledRows;
  const int64_t row_blocks = (w.out_features + kBlockRows - 1) / kBlockRows;
  if (active * row_blocks > INT32_MAX) return cudaErrorInvalidValue;
  const auto grid = static_cast<unsigned>(active * row_blocks);
  mxfp4_grouped_gemv_tiled<OutT><<<grid, 32 * kMxfp4GemvTiledBlockWarps, 0, stream>>>(
      w, r, x, x_stride, x_rows, y, y_stride, static_cast<unsigned>(row_blocks));
  return cudaGetLastError();
}

template cudaError_t launch_gemv_tiled(const Mxfp4ExpertWeights&, const ExpertRouting&, const __nv_bfloat16*, int64_t,
                                       int64_t, float*, int64_t, int64_t, cudaStream_t);
template cudaError_t launch_gemv_tiled(const Mxfp4ExpertWeights&, const ExpertRouting&, const __nv_bfloat16*, int64_t,
                                       int64_t, __nv_bfloat16*, int64_t, int64_t, cudaStream_t);

}  // namespace k3::kernels::mxfp4_detail
