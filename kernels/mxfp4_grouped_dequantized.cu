#include "kernels/mxfp4_grouped_dequantized.h"

#include "kernels/mxfp4_grouped_device.h"

#include <climits>

namespace k3::kernels {

namespace {

using namespace mxfp4_detail;

constexpr int kDequantizeThreads = 256;
constexpr int kWordsPerThread = 4;  // words kDequantizeThreads apart, so every load and store of a warp is contiguous
constexpr int kWordsPerBlock = kDequantizeThreads * kWordsPerThread;
constexpr int kWordsPerMxBlock = kMxBlockElements / 8;

// Words (8 elements, 4 packed bytes) of the expert in row-major order; word n of a row is elements 8n..8n+7 and
// shares the scale of its 32-element block. Each thread decodes kWordsPerThread words, kDequantizeThreads apart:
// a warp reads 128 contiguous packed bytes and writes 512 contiguous bf16 bytes per word.
__global__ void __launch_bounds__(kDequantizeThreads)
    mxfp4_dequantize_words(const uint32_t* __restrict__ packed, const uint8_t* __restrict__ scales,
                           int64_t words_per_row, int64_t words, __nv_bfloat16* __restrict__ out,
                           int64_t out_row_stride) {
  const int64_t first = int64_t(blockIdx.x) * kWordsPerBlock + threadIdx.x;
#pragma unroll
  for (int j = 0; j < kWordsPerThread; ++j) {
    const int64_t word = first + j * kDequantizeThreads;
    if (word >= words) return;
    const int64_t row = word / words_per_row, word_in_row = word - row * words_per_row;
    const BlockScale scale = block_scale(__ldcs(scales + word / kWordsPerMxBlock));
    uint32_t pairs[4];
    dequantize_word_lut(__ldcs(packed + word), scale, pairs);
    *reinterpret_cast<uint4*>(out + row * out_row_stride + word_in_row * 8) =
        make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
  }
}

// The tiled layout (kernels/mxfp4_tiled.h): a block of 8 warps takes 8 consecutive units (block pairs) of one 16-row
// tile; each lane decodes its 16 bytes (8 elements of rows g and g + 8 in each block) into a shared 16 × 512 tile,
// which the block then writes row by row (1 KiB contiguous per row; a lane's own rows would be 64-byte pieces).
constexpr int kTiledUnitsPerBlock = kDequantizeThreads / 32;
constexpr int kTiledShareRowBytes = kTiledUnitsPerBlock * 128 + 64;  // 64 bytes of padding: conflict-free stores

__global__ void __launch_bounds__(kDequantizeThreads)
    mxfp4_dequantize_tiled(const uint4* __restrict__ packed, const uint32_t* __restrict__ scales, int64_t pairs,
                           int64_t blocks_per_tile, __nv_bfloat16* __restrict__ out, int64_t out_row_stride) {
  __shared__ __align__(16) uint8_t tile_rows[kTiledRows * kTiledShareRowBytes];
  const int64_t tile = blockIdx.x / blocks_per_tile, first_pair = (blockIdx.x % blocks_per_tile) * kTiledUnitsPerBlock;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int units = int(pairs - first_pair < kTiledUnitsPerBlock ? pairs - first_pair : kTiledUnitsPerBlock);
  if (warp < units) {
    const int64_t unit = tile * pairs + first_pair + warp;
    const uint4 wv = __ldcs(packed + unit * (kTiledUnitWeightBytes / 16) + lane);
    const uint32_t sv = __ldcs(scales + unit * (kTiledUnitScaleBytes / 4) + g);
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const uint32_t w0 = b == 0 ? wv.x : wv.z, w1 = b == 0 ? wv.y : wv.w;
      const int column_bytes = warp * 128 + b * 64 + t * 16;
      *reinterpret_cast<uint4*>(tile_rows + g * kTiledShareRowBytes + column_bytes) =
          tiled_row_scaled<0>(w0, w1, block_scale((sv >> (8 * b)) & 0xFFu));
      *reinterpret_cast<uint4*>(tile_rows + (g + 8) * kTiledShareRowBytes + column_bytes) =
          tiled_row_scaled<1>(w0, w1, block_scale((sv >> (8 * (2 + b))) & 0xFFu));
    }
  }
  __syncthreads();
  const int chunks_per_row = units * 8;  // 16-byte chunks of a row this block writes
  for (int i = threadIdx.x; i < kTiledRows * chunks_per_row; i += kDequantizeThreads) {
    const int row = i / chunks_per_row, chunk = i % chunks_per_row;
    *reinterpret_cast<uint4*>(out + (tile * kTiledRows + row) * out_row_stride + first_pair * 64 + chunk * 8) =
        *reinterpret_cast<const uint4*>(tile_rows + row * kTiledShareRowBytes + chunk * 16);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool weights_ok(const Mxfp4ExpertWeights& w) {
  return w.packed != nullptr && aligned16(w.packed) && w.scales != nullptr && w.experts > 0 && w.out_features > 0 &&
         w.in_features > 0 && w.in_features % kMxBlockElements == 0;
}

}  // namespace

cudaError_t mxfp4_dequantize_expert_bf16(const Mxfp4ExpertWeights& w, int expert, __nv_bfloat16* out,
                                         int64_t out_row_stride, cudaStream_t stream) {
  if (!weights_ok(w) || expert < 0 || expert >= w.experts || out == nullptr || !aligned16(out) ||
      out_row_stride < w.in_features || out_row_stride % 8 != 0) {
    return cudaErrorInvalidValue;
  }
  if (w.layout == Mxfp4Layout::tiled16) {
    if (!mxfp4_tiled_supported(w.out_features, w.in_features)) return cudaErrorInvalidValue;
    const int64_t pairs = w.in_features / 64;
    const int64_t blocks_per_tile = (pairs + kTiledUnitsPerBlock - 1) / kTiledUnitsPerBlock;
    const int64_t grid = w.out_features / kTiledRows * blocks_per_tile;
    if (grid > INT32_MAX) return cudaErrorInvalidValue;
    mxfp4_dequantize_tiled<<<static_cast<unsigned>(grid), kDequantizeThreads, 0, stream>>>(
        reinterpret_cast<const uint4*>(w.packed + int64_t(expert) * w.out_features * (w.in_features / 2)),
        reinterpret_cast<const uint32_t*>(w.scales + int64_t(expert) * w.out_features * (w.in_features / 32)), pairs,
        blocks_per_tile, out, out_row_stride);
    return cudaGetLastError();
  }
  if (w.layout != Mxfp4Layout::canonical) return cudaErrorInvalidValue;
  const int64_t words_per_row = w.in_features / 8, words = w.out_features * words_per_row;
  const int64_t grid = (words + kWordsPerBlock - 1) / kWordsPerBlock;
  if (grid > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t first_word = int64_t(expert) * words;
  mxfp4_dequantize_words<<<static_cast<unsigned>(grid), kDequantizeThreads, 0, stream>>>(
      reinterpret_cast<const uint32_t*>(w.packed) + first_word, w.scales + first_word / kWordsPerMxBlock, words_per_row,
      words, out, out_row_stride);
  return cudaGetLastError();
}

cudaError_t mxfp4_grouped_dequantized_check(const Mxfp4ExpertWeights& w, const int32_t* host_expert_offsets,
                                            const __nv_bfloat16* x_by_slot, int64_t x_row_stride, const float* y,
                                            int64_t y_row_stride, const __nv_bfloat16* scratch,
                                            int64_t scratch_elements) {
  if (!weights_ok(w) || w.out_features % 8 != 0 || host_expert_offsets == nullptr || x_by_slot == nullptr ||
      !aligned16(x_by_slot) || x_row_stride < w.in_features || x_row_stride % 8 != 0 || y == nullptr || !aligned16(y) ||
      y_row_stride < w.out_features || y_row_stride % 4 != 0 || scratch == nullptr || !aligned16(scratch) ||
      scratch_elements < w.out_features * w.in_features || host_expert_offsets[0] < 0) {
    return cudaErrorInvalidValue;
  }
  for (int e = 0; e < w.experts; ++e) {
    if (host_expert_offsets[e + 1] < host_expert_offsets[e]) return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

}  // namespace k3::kernels
