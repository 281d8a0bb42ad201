#include "kernels/mxfp4_grouped.h"

#include "kernels/mxfp4_grouped_device.h"

#include <algorithm>
#include <climits>

namespace k3::kernels {

namespace {

using namespace mxfp4_detail;

// ---- Decode: mxfp4_grouped_gemv_mma_rows16 (and its L2-prefetching form) ------------------------------
constexpr int kGemvThreads = 128;
constexpr int kGemvWarpRows = 16;                                  // one mma m-tile per warp
constexpr int kGemvBlockRows = kGemvThreads / 32 * kGemvWarpRows;  // 64
constexpr int kGemvSlots = 8;                                      // one mma n-tile per pass
constexpr int kGemvLoads = 2;  // 16-byte weight loads per row and lane issued together
constexpr int kGemvGroupBlocks = 4 * kGemvLoads;  // blocks of one rows16 k-group: lanes t = 0..3, kGemvLoads each

// blockIdx.x = active expert index · row_blocks + (output row) / 64; lane (g, t) of a warp owns rows g and g + 8
// of the warp's 16.
struct GemvWarpRows {
  const uint8_t* packed_lo;  // this lane's row g, then row g + 8
  const uint8_t* packed_hi;
  const uint8_t* scales_lo;
  const uint8_t* scales_hi;
  int64_t row;     // row g (the output row of acc[0], acc[1]; acc[2], acc[3] are row + 8)
  int64_t blocks;  // 32-element blocks per row
  int first_slot, end_slot;
};

// Lane (g, t) of warp `warp`: its rows of the block's active expert, or false when the warp has none (the whole
// warp returns).
__device__ __forceinline__ bool gemv_warp_rows(const Mxfp4ExpertWeights& w, const ExpertRouting& r,
                                               unsigned row_blocks, int warp, int g, GemvWarpRows& rows) {
  const int active = static_cast<int>(blockIdx.x / row_blocks);
  if (active >= min(*r.active_count, r.max_active_experts)) return false;
  const int expert = r.active_experts[active];
  if (expert < 0 || expert >= w.experts) return false;
  expert_slots(r, expert, rows.first_slot, rows.end_slot);

  const int64_t tile_row = int64_t(blockIdx.x % row_blocks) * kGemvBlockRows + warp * kGemvWarpRows;
  if (tile_row >= w.out_features) return false;  // the whole warp (out is a multiple of 16)
  rows.row = tile_row + g;
  rows.blocks = w.in_features / kMxBlockElements;
  const int64_t first_row = int64_t(expert) * w.out_features + rows.row;
  rows.packed_lo = w.packed + first_row * rows.blocks * kMxBlockBytes;
  rows.packed_hi = rows.packed_lo + 8 * rows.blocks * kMxBlockBytes;
  rows.scales_lo = w.scales + first_row * rows.blocks;
  rows.scales_hi = rows.scales_lo + 8 * rows.blocks;
  return true;
}

// The x row of this lane's mma column, slot `slot` of the pass; none (zeros) past the expert's slots or for a
// token outside x.
__device__ __forceinline__ const __nv_bfloat16* gemv_x_row(const ExpertRouting& r, const __nv_bfloat16* x,
                                                           int64_t x_stride, int64_t x_rows, int slot, int end_slot) {
  if (slot < end_slot) {
    const int token = r.slot_token[slot];
    if (token >= 0 && token < x_rows) return x + int64_t(token) * x_stride;
  }
  return nullptr;
}

// Block b of this lane's two rows; past the end of the rows, zeros at the neutral scale.
__device__ __forceinline__ void gemv_load_weights(const GemvWarpRows& rows, int64_t b, uint4& q_lo, uint4& q_hi,
                                                  uint32_t& s_lo, uint32_t& s_hi) {
  if (b < rows.blocks) {
    q_lo = __ldcs(reinterpret_cast<const uint4*>(rows.packed_lo + b * kMxBlockBytes));
    q_hi = __ldcs(reinterpret_cast<const uint4*>(rows.packed_hi + b * kMxBlockBytes));
    s_lo = __ldcs(rows.scales_lo + b);
    s_hi = __ldcs(rows.scales_hi + b);
  } else {
    q_lo = q_hi = make_uint4(0, 0, 0, 0);
    s_lo = s_hi = kNeutralScale;
  }
}

// Block b of this lane's x row (32 elements); zeros for no row or past its end.
__device__ __forceinline__ void gemv_load_x(const __nv_bfloat16* x_row, int64_t b, int64_t blocks, uint4 (&xv)[4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) xv[k] = make_uint4(0, 0, 0, 0);
  if (x_row != nullptr && b < blocks) {
    const uint4* p = reinterpret_cast<const uint4*>(x_row + b * kMxBlockElements);
#pragma unroll
    for (int k = 0; k < 4; ++k) xv[k] = __ldg(p + k);
  }
}

// acc += the products of this lane's block of its two rows with its block of x, across the warp: every mma
// covers 16 k of one word position of the four lanes' t blocks, whose scales are already folded into the bf16
// weights; word positions k = 0..3 in turn (permuted positions 0..3, then 4..7 of each).
__device__ __forceinline__ void gemv_multiply_block(float (&acc)[4], const uint4& q_lo, const uint4& q_hi,
                                                    uint32_t s_lo, uint32_t s_hi, const uint4 (&xv)[4]) {
  const uint32_t words_lo[4] = {q_lo.x, q_lo.y, q_lo.z, q_lo.w};
  const uint32_t words_hi[4] = {q_hi.x, q_hi.y, q_hi.z, q_hi.w};
  const BlockScale scale_lo = block_scale(s_lo), scale_hi = block_scale(s_hi);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    uint32_t a_lo[4], a_hi[4];
    dequantize_word(words_lo[k], scale_lo, a_lo);
    dequantize_word(words_hi[k], scale_hi, a_hi);
    const uint4 bx = permute_x8(xv[k]);
    mma_bf16_16x8x16(acc, a_lo[0], a_hi[0], a_lo[1], a_hi[1], bx.x, bx.y);
    mma_bf16_16x8x16(acc, a_lo[2], a_hi[2], a_lo[3], a_hi[3], bx.z, bx.w);
  }
}

// The pass's columns 2t, 2t + 1 of rows g and g + 8; NaN for a slot whose token lies outside x.
template <typename OutT>
__device__ __forceinline__ void gemv_store(const ExpertRouting& r, const GemvWarpRows& rows, int pass, int t,
                                           int64_t x_rows, const float (&acc)[4], OutT* y, int64_t y_stride) {
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int slot = pass + 2 * t + c;
    if (slot < rows.end_slot) {
      const bool ok = token_valid(r, slot, x_rows);
      OutT* out = y + int64_t(slot) * y_stride + rows.row;
      store_out(out, ok ? acc[c] : __int_as_float(0x7FC00000));
      store_out(out + 8, ok ? acc[2 + c] : __int_as_float(0x7FC00000));
    }
  }
}

// Hints the L2 to fetch [p, p + bytes) (bytes a multiple of 16, p 16-byte aligned); no effect on results.
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "r"(bytes) : "memory");
}

// One warp per 16 output rows streams them once per 8 slots: k-groups of 4·kGemvLoads blocks, lane t loading
// blocks 4u + t of each (u < kGemvLoads) together, then multiplying them in turn with the same blocks of x.
// With kPrefetchGroups > 0 (gemv_l2_prefetch), lane L < 16 also asks the L2 for the warp's row L kPrefetchGroups
// k-groups ahead of the one being loaded (one bulk prefetch of 128 bytes per row and group, the first
// kPrefetchGroups groups and lane 16 the warp's scales at the start), so more of the weight stream is in flight than
// the lanes' registers hold; the loads and the math are rows16's.
template <typename OutT, int kPrefetchGroups>
__global__ void __launch_bounds__(kGemvThreads, 6)
    mxfp4_grouped_gemv_mma_rows16(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                  int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride,
                                  unsigned row_blocks) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  GemvWarpRows rows;
  if (!gemv_warp_rows(w, r, row_blocks, warp, g, rows)) return;
  const int64_t row_bytes = rows.blocks * kMxBlockBytes;
  // The warp's row `lane` (lanes 0..15): the warp's 16 rows are consecutive in the packed array.
  const uint8_t* prefetch_row = rows.packed_lo + (int64_t(lane % kGemvWarpRows) - g) * row_bytes;
  if constexpr (kPrefetchGroups > 0) {
    if (lane < kGemvWarpRows) {
      const int64_t ahead = min(rows.blocks, int64_t(kPrefetchGroups) * kGemvGroupBlocks);
      prefetch_l2_bulk(prefetch_row, uint32_t(ahead * kMxBlockBytes));
    } else if (lane == kGemvWarpRows) {
      const uint8_t* scales = rows.scales_lo - int64_t(g) * rows.blocks;  // the warp's 16 rows of scales
      if (reinterpret_cast<uintptr_t>(scales) % 16 == 0) prefetch_l2_bulk(scales, uint32_t(kGemvWarpRows * rows.blocks));
    }
  }

  for (int pass = rows.first_slot; pass < rows.end_slot; pass += kGemvSlots) {
    const __nv_bfloat16* x_row = gemv_x_row(r, x, x_stride, x_rows, pass + g, rows.end_slot);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b0 = 0; b0 < rows.blocks; b0 += kGemvGroupBlocks) {
      if constexpr (kPrefetchGroups > 0) {
        const int64_t ahead = b0 + int64_t(kPrefetchGroups) * kGemvGroupBlocks;
        if (lane < kGemvWarpRows && ahead < rows.blocks) {
          prefetch_l2_bulk(prefetch_row + ahead * kMxBlockBytes,
                           uint32_t(min(int64_t(kGemvGroupBlocks), rows.blocks - ahead) * kMxBlockBytes));
        }
      }
      uint4 q_lo[kGemvLoads], q_hi[kGemvLoads];
      uint32_t s_lo[kGemvLoads], s_hi[kGemvLoads];
#pragma unroll
      for (int u = 0; u < kGemvLoads; ++u) gemv_load_weights(rows, b0 + 4 * u + t, q_lo[u], q_hi[u], s_lo[u], s_hi[u]);
#pragma unroll
      for (int u = 0; u < kGemvLoads; ++u) {
        uint4 xv[4];
        gemv_load_x(x_row, b0 + 4 * u + t, rows.blocks, xv);
        gemv_multiply_block(acc, q_lo[u], q_hi[u], s_lo[u], s_hi[u], xv);
      }
    }
    gemv_store(r, rows, pass, t, x_rows, acc, y, y_stride);
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
      algorithm != Mxfp4GroupedAlgorithm::gemm && algorithm != Mxfp4GroupedAlgorithm::gemm_pipelined &&
      algorithm != Mxfp4GroupedAlgorithm::gemv_l2_prefetch_4 && algorithm != Mxfp4GroupedAlgorithm::gemv_l2_prefetch_8) {
    return cudaErrorInvalidValue;
  }
  if (r.max_slots == 0 || r.max_active_experts == 0) return cudaSuccess;  // no slot can be active
  if (x == nullptr || !aligned16(x) || x_stride < w.in_features || x_stride % 8 != 0 || x_rows <= 0 ||
      y == nullptr || y_stride < w.out_features) {
    return cudaErrorInvalidValue;
  }
  const int64_t active = active_bound(r, w.experts);
  if (algorithm == Mxfp4GroupedAlgorithm::automatic) algorithm = mxfp4_grouped_algorithm(w, r);

  if (algorithm == Mxfp4GroupedAlgorithm::gemv || algorithm == Mxfp4GroupedAlgorithm::gemv_l2_prefetch_4 ||
      algorithm == Mxfp4GroupedAlgorithm::gemv_l2_prefetch_8) {
    const int64_t row_blocks = (w.out_features + kGemvBlockRows - 1) / kGemvBlockRows;
    if (active * row_blocks > INT32_MAX) return cudaErrorInvalidValue;
    const auto grid = static_cast<unsigned>(active * row_blocks);
    const auto kernel = algorithm == Mxfp4GroupedAlgorithm::gemv                 ? mxfp4_grouped_gemv_mma_rows16<OutT, 0>
                        : algorithm == Mxfp4GroupedAlgorithm::gemv_l2_prefetch_4 ? mxfp4_grouped_gemv_mma_rows16<OutT, 4>
                                                                                  : mxfp4_grouped_gemv_mma_rows16<OutT, 8>;
    kernel<<<grid, kGemvThreads, 0, stream>>>(w, r, x, x_stride, x_rows, y, y_stride, static_cast<unsigned>(row_blocks));
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
