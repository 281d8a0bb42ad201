#include "kernels/mxfp4_grouped.h"

#include "kernels/mxfp4_grouped_device.h"
#include "kernels/ptx/sm90a_device.h"

#include <algorithm>
#include <climits>

namespace k3::kernels {

namespace {

using namespace mxfp4_detail;

// ---- Decode: mxfp4_grouped_gemv_mma_lean ---------------------------------------------------------------
constexpr int kGemvThreads = 128;
constexpr int kGemvWarpRows = 16;                                  // one mma m-tile per warp
constexpr int kGemvBlockRows = kGemvThreads / 32 * kGemvWarpRows;  // 64
constexpr int kGemvSlots = 8;                                      // one mma n-tile per pass
constexpr int kGemvLoads = 2;                                      // 16-byte chunks per row and lane in one group
constexpr int kGemvGroupBlocks = 4 * kGemvLoads;                   // blocks per row in one group

// blockIdx.x = active expert index · row_blocks + (output row) / 64. Lane (g, t) of a warp loads, for its rows g and
// g + 8 of the warp's 16, the whole 32-element blocks 4u + t of each group of 8 blocks (16-byte loads, two per row
// and lane in flight), and the same blocks of x for slot g of the pass: every mma then covers 16 k of one word
// position of four different blocks, whose scales are already folded into the bf16 weights. The instruction stream
// is kept lean: the k-loop over whole groups has no bounds tests (one checked group finishes a row whose block count
// is not a multiple of 8) and walks pointers, lanes without a slot read a valid x row whose mma column is never
// stored (no zero fill), and the scale is one multiply-add while no scale of the warp's group exceeds 2^1 (above
// it, or NaN, the group takes block_scale's two-multiply path).
struct GemvGroup {
  uint4 q_lo[kGemvLoads], q_hi[kGemvLoads];  // rows g and g + 8: blocks 4u + t of the group
  uint32_t s_lo[kGemvLoads], s_hi[kGemvLoads];
};

// 2^(s − 1) in both bf16 halves, for s ≤ 128: (s + 126) << 7 twice.
__device__ __forceinline__ uint32_t small_scale_factor(uint32_t s) { return s * 0x00800080u + 126u * 0x00800080u; }

template <bool kChecked>
__device__ __forceinline__ GemvGroup load_gemv_group(const uint4* w_lo, const uint4* w_hi, const uint8_t* sc_lo,
                                                     const uint8_t* sc_hi, int first_block, int t, int blocks) {
  GemvGroup g;
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
  return g;
}

// The mma work of one group: x of this lane's slot for its blocks, the decode, 2·4·kGemvLoads products. kGeneral: the
// two-multiply scales of block_scale (any scale above 2^1, or NaN), else one multiply by small_scale_factor.
template <bool kChecked, bool kGeneral>
__device__ __forceinline__ void gemv_group_products(const GemvGroup& g, const __nv_bfloat16* x_lane, int first_block,
                                                    int t, int blocks, float (&acc)[4]) {
#pragma unroll
  for (int u = 0; u < kGemvLoads; ++u) {
    const int b = first_block + 4 * u;
    uint4 xv[4];
    if (!kChecked || b + t < blocks) {
      const uint4* p = reinterpret_cast<const uint4*>(x_lane + b * kMxBlockElements);
#pragma unroll
      for (int k = 0; k < 4; ++k) xv[k] = __ldg(p + k);
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) xv[k] = make_uint4(0, 0, 0, 0);
    }
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
__device__ __forceinline__ void gemv_group_math(const GemvGroup& g, const __nv_bfloat16* x_lane, int first_block, int t,
                                                int blocks, float (&acc)[4]) {
  uint32_t big = 0;
#pragma unroll
  for (int u = 0; u < kGemvLoads; ++u) big |= static_cast<uint32_t>(max(g.s_lo[u], g.s_hi[u]) > 128u);
  if (__any_sync(0xFFFFFFFFu, big != 0)) {
    gemv_group_products<kChecked, true>(g, x_lane, first_block, t, blocks, acc);
  } else {
    gemv_group_products<kChecked, false>(g, x_lane, first_block, t, blocks, acc);
  }
}

template <typename OutT>
__global__ void __launch_bounds__(kGemvThreads, 7)
    mxfp4_grouped_gemv_mma_lean(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride,
                                unsigned row_blocks) {
  int expert = 0, first_slot = 0, end_slot = 0;
  if (!gemv_expert(w, r, static_cast<int>(blockIdx.x / row_blocks), expert, first_slot, end_slot)) return;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t tile_row = int64_t(blockIdx.x % row_blocks) * kGemvBlockRows + warp * kGemvWarpRows;
  if (tile_row >= w.out_features) return;  // the whole warp (out is a multiple of 16)
  const int64_t row = tile_row + g;        // and row + 8
  const int blocks = static_cast<int>(w.in_features / kMxBlockElements);
  const int64_t first_row = int64_t(expert) * w.out_features + row;
  const uint4* w_lo = reinterpret_cast<const uint4*>(w.packed + first_row * blocks * kMxBlockBytes) + t;
  const uint4* w_hi = w_lo + 8 * blocks;
  const uint8_t* sc_lo = w.scales + first_row * blocks + t;
  const uint8_t* sc_hi = sc_lo + 8 * blocks;
  const int full_end = blocks / kGemvGroupBlocks * kGemvGroupBlocks;

  for (int pass = first_slot; pass < end_slot; pass += kGemvSlots) {
    const __nv_bfloat16* x_lane = gemv_x_row(r, x, x_stride, x_rows, pass, end_slot, g) + t * kMxBlockElements;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint4 *wl = w_lo, *wh = w_hi;  // walked a group at a time
    const uint8_t *sl = sc_lo, *sh = sc_hi;
    const __nv_bfloat16* xl = x_lane;
    for (int b0 = 0; b0 < full_end; b0 += kGemvGroupBlocks) {
      const GemvGroup current = load_gemv_group<false>(wl, wh, sl, sh, 0, t, blocks);
      gemv_group_math<false>(current, xl, 0, t, blocks, acc);
      wl += kGemvGroupBlocks;
      wh += kGemvGroupBlocks;
      sl += kGemvGroupBlocks;
      sh += kGemvGroupBlocks;
      xl += kGemvGroupBlocks * kMxBlockElements;
    }
    if (full_end < blocks) {
      const GemvGroup last = load_gemv_group<true>(w_lo, w_hi, sc_lo, sc_hi, full_end, t, blocks);
      gemv_group_math<true>(last, x_lane, full_end, t, blocks, acc);
    }
    gemv_store(acc, r, pass, end_slot, t, x_rows, y, y_stride, row);
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
      algorithm != Mxfp4GroupedAlgorithm::gemm_pipelined && algorithm != Mxfp4GroupedAlgorithm::gemm_wgmma) {
    return cudaErrorInvalidValue;
  }
  if (r.max_slots == 0 || r.max_active_experts == 0) return cudaSuccess;  // no slot can be active
  if (x == nullptr || !aligned16(x) || x_stride < w.in_features || x_stride % 8 != 0 || x_rows <= 0 || y == nullptr ||
      y_stride < w.out_features) {
    return cudaErrorInvalidValue;
  }
  const int64_t active = active_bound(r, w.experts);
  if (algorithm == Mxfp4GroupedAlgorithm::automatic) algorithm = mxfp4_grouped_algorithm(w, r);
  if (w.layout != Mxfp4Layout::canonical && w.layout != Mxfp4Layout::tiled16) return cudaErrorInvalidValue;
  const bool tiled = w.layout == Mxfp4Layout::tiled16;
  if (tiled && algorithm == Mxfp4GroupedAlgorithm::gemv) {
    return launch_gemv_tiled(w, r, x, x_stride, x_rows, y, y_stride, active, stream);
  }

  if (algorithm == Mxfp4GroupedAlgorithm::gemv) {
    const int64_t row_blocks = (w.out_features + kGemvBlockRows - 1) / kGemvBlockRows;
    if (active * row_blocks > INT32_MAX) return cudaErrorInvalidValue;
    const auto grid = static_cast<unsigned>(active * row_blocks);
    mxfp4_grouped_gemv_mma_lean<OutT>
        <<<grid, kGemvThreads, 0, stream>>>(w, r, x, x_stride, x_rows, y, y_stride, static_cast<unsigned>(row_blocks));
    return cudaGetLastError();
  }

  if (active > kMxfp4GroupedGemmMaxActiveExperts) return cudaErrorInvalidValue;
  if (algorithm == Mxfp4GroupedAlgorithm::gemm_wgmma) {
    return launch_gemm_wgmma(w, r, x, x_stride, x_rows, y, y_stride, active, stream);
  }
  return launch_gemm_pipelined(w, r, x, x_stride, x_rows, y, y_stride, active, stream);
}

}  // namespace

Mxfp4GroupedAlgorithm mxfp4_grouped_algorithm(const Mxfp4ExpertWeights& w, const ExpertRouting& routing) {
  const int64_t active = std::max<int64_t>(1, active_bound(routing, w.experts));
  if (routing.max_slots <= int64_t(kMxfp4GroupedGemvMaxAverageSlots) * active ||
      active > kMxfp4GroupedGemmMaxActiveExperts) {
    return Mxfp4GroupedAlgorithm::gemv;
  }
  if (routing.max_slots >= int64_t(kMxfp4GroupedWgmmaMinAverageSlots) * active &&
      mxfp4_grouped_gemm_wgmma_supported(w)) {
    return Mxfp4GroupedAlgorithm::gemm_wgmma;
  }
  return Mxfp4GroupedAlgorithm::gemm_pipelined;
}

bool mxfp4_grouped_gemm_wgmma_supported(const Mxfp4ExpertWeights& w) {
  int device = 0;
  return w.layout == Mxfp4Layout::tiled16 && mxfp4_tiled_supported(w.out_features, w.in_features) &&
         cudaGetDevice(&device) == cudaSuccess && sm90a_device(device);
}

cudaError_t mxfp4_grouped_bf16_to_f32(const Mxfp4ExpertWeights& w, const ExpertRouting& routing, const __nv_bfloat16* x,
                                      int64_t x_row_stride, int64_t x_rows, float* y, int64_t y_row_stride,
                                      cudaStream_t stream, Mxfp4GroupedAlgorithm algorithm) {
  return launch(w, routing, x, x_row_stride, x_rows, y, y_row_stride, stream, algorithm);
}

cudaError_t mxfp4_grouped_bf16_to_bf16(const Mxfp4ExpertWeights& w, const ExpertRouting& routing,
                                       const __nv_bfloat16* x, int64_t x_row_stride, int64_t x_rows, __nv_bfloat16* y,
                                       int64_t y_row_stride, cudaStream_t stream, Mxfp4GroupedAlgorithm algorithm) {
  return launch(w, routing, x, x_row_stride, x_rows, y, y_row_stride, stream, algorithm);
}

}  // namespace k3::kernels
