#include "kernels/mxfp4_grouped.h"

#include "kernels/mxfp4_grouped_device.h"

#include "core/error.h"

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
__device__ __forceinline__ void gemv_group_products(const GemvGroup& g, const __nv_bfloat16* x_lane,
                                                    int first_block, int t, int blocks, float (&acc)[4]) {
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
__device__ __forceinline__ void gemv_group_math(const GemvGroup& g, const __nv_bfloat16* x_lane,
                                                int first_block, int t, int blocks, float (&acc)[4]) {
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
      algorithm != Mxfp4GroupedAlgorithm::gemm && algorithm != Mxfp4GroupedAlgorithm::gemm_pipelined) {
    return cudaErrorInvalidValue;
  }
  if (r.max_slots == 0 || r.max_active_experts == 0) return cudaSuccess;  // no slot can be active
  if (x == nullptr || !aligned16(x) || x_stride < w.in_features || x_stride % 8 != 0 || x_rows <= 0 ||
      y == nullptr || y_stride < w.out_features) {
    return cudaErrorInvalidValue;
  }
  const int64_t active = active_bound(r, w.experts);
  if (algorithm == Mxfp4GroupedAlgorithm::automatic) algorithm = mxfp4_grouped_algorithm(w, r);
  if (w.layout != Mxfp4Layout::canonical && w.layout != Mxfp4Layout::tiled16) return cudaErrorInvalidValue;
  const bool tiled = w.layout == Mxfp4Layout::tiled16;
  K3_CHECK(!tiled || algorithm != Mxfp4GroupedAlgorithm::gemm,
           "mxfp4_grouped: weights in the tiled layout are read by the GEMV and the pipelined GEMM, not by gemm");
  if (tiled && algorithm == Mxfp4GroupedAlgorithm::gemv) {
    return launch_gemv_tiled(w, r, x, x_stride, x_rows, y, y_stride, active, stream);
  }

  if (algorithm == Mxfp4GroupedAlgorithm::gemv) {
    const int64_t row_blocks = (w.out_features + kGemvBlockRows - 1) / kGemvBlockRows;
    if (active * row_blocks > INT32_MAX) return cudaErrorInvalidValue;
    const auto grid = static_cast<unsigned>(active * row_blocks);
    mxfp4_grouped_gemv_mma_lean<OutT><<<grid, kGemvThreads, 0, stream>>>(w, r, x, x_stride, x_rows, y, y_stride,
                                                                       static_cast<unsigned>(row_blocks));
    return cudaGetLastError();
  }

  if (active > kMxfp4GroupedGemmMaxActiveExperts) return cudaErrorInvalidValue;
  if (algorithm == Mxfp4GroupedAlgorithm::gemm_pipelined) {
    return launch_gemm_pipelined(w, r, x, x_stride, x_rows, y, y_stride, active, stream);
  }
  const size_t prefix_bytes = size_t(active + 1) * sizeof(int);
  static_assert(kGemmStaticSharedBytes + (kMxfp4GroupedGemmMaxActiveExperts + 1) * sizeof(int) <= 48 * 1024);
  int sms = 0;
  if (const cudaError_t status = current_multiprocessors(sms); status != cudaSuccess) return status;
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
