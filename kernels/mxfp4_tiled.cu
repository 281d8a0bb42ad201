#include "kernels/mxfp4_tiled.h"

#include <climits>

namespace k3::kernels {

namespace {

__constant__ TiledOutput kDeviceTiledOutputs[8] = {
    kTiledOutputs[0], kTiledOutputs[1], kTiledOutputs[2], kTiledOutputs[3],
    kTiledOutputs[4], kTiledOutputs[5], kTiledOutputs[6], kTiledOutputs[7],
};

// One lane of one unit: its 16 weight bytes and, for lanes with t = 0, its row pair's 4 scale bytes.
__host__ __device__ inline void repack_lane(const TiledOutput* outputs, const uint8_t* packed, const uint8_t* scales,
                                            int64_t in_features, int64_t tile, int64_t pair, int lane,
                                            uint8_t* tiled_packed, uint8_t* tiled_scales) {
  const int64_t row_bytes = in_features / 2, blocks = in_features / 32, pairs = in_features / 64;
  const int g = lane / 4, t = lane % 4;
  const int64_t row_lo = tile * kTiledRows + g, row_hi = row_lo + 8;
  const int64_t unit = tile * pairs + pair;
  uint8_t* dst = tiled_packed + unit * kTiledUnitWeightBytes + lane * 16;
  for (int b = 0; b < 2; ++b) {
    uint32_t w[2];
    mxfp4_tiled_lane_words(outputs, packed + row_lo * row_bytes, packed + row_hi * row_bytes, 2 * pair + b, t, w[0],
                           w[1]);
    for (int k = 0; k < 8; ++k) dst[8 * b + k] = uint8_t(w[k / 4] >> (8 * (k % 4)));
  }
  if (t == 0) {
    uint8_t* s = tiled_scales + unit * kTiledUnitScaleBytes + 4 * g;
    s[0] = scales[row_lo * blocks + 2 * pair];
    s[1] = scales[row_lo * blocks + 2 * pair + 1];
    s[2] = scales[row_hi * blocks + 2 * pair];
    s[3] = scales[row_hi * blocks + 2 * pair + 1];
  }
}

// One thread per (expert, unit, lane).
__global__ void mxfp4_tiled_repack_kernel(const uint8_t* __restrict__ packed, const uint8_t* __restrict__ scales,
                                          int64_t out_features, int64_t in_features, int64_t lanes_per_expert,
                                          int64_t total_lanes, uint8_t* __restrict__ tiled_packed,
                                          uint8_t* __restrict__ tiled_scales) {
  const int64_t index = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= total_lanes) return;
  const int64_t expert = index / lanes_per_expert, within = index % lanes_per_expert;
  const int64_t pairs = in_features / 64, lane_unit = within / 32;
  const int64_t weight_offset = expert * out_features * (in_features / 2);
  const int64_t scale_offset = expert * out_features * (in_features / 32);
  repack_lane(kDeviceTiledOutputs, packed + weight_offset, scales + scale_offset, in_features, lane_unit / pairs,
              lane_unit % pairs, int(within % 32), tiled_packed + weight_offset, tiled_scales + scale_offset);
}

}  // namespace

bool mxfp4_tiled_supported(int64_t out_features, int64_t in_features) {
  return out_features > 0 && in_features > 0 && out_features % kTiledRows == 0 && in_features % 64 == 0;
}

void mxfp4_tiled_repack_host(const uint8_t* packed, const uint8_t* scales, int experts, int64_t out_features,
                             int64_t in_features, uint8_t* tiled_packed, uint8_t* tiled_scales) {
  const int64_t weight_bytes = out_features * (in_features / 2), scale_bytes = out_features * (in_features / 32);
  for (int e = 0; e < experts; ++e)
    for (int64_t tile = 0; tile < out_features / kTiledRows; ++tile)
      for (int64_t pair = 0; pair < in_features / 64; ++pair)
        for (int lane = 0; lane < 32; ++lane)
          repack_lane(kTiledOutputs, packed + e * weight_bytes, scales + e * scale_bytes, in_features, tile, pair, lane,
                      tiled_packed + e * weight_bytes, tiled_scales + e * scale_bytes);
}

cudaError_t mxfp4_tiled_repack(const uint8_t* packed, const uint8_t* scales, int experts, int64_t out_features,
                               int64_t in_features, uint8_t* tiled_packed, uint8_t* tiled_scales, cudaStream_t stream) {
  if (packed == nullptr || scales == nullptr || tiled_packed == nullptr || tiled_scales == nullptr || experts <= 0 ||
      !mxfp4_tiled_supported(out_features, in_features) || packed == tiled_packed || scales == tiled_scales) {
    return cudaErrorInvalidValue;
  }
  const int64_t lanes_per_expert = out_features / kTiledRows * (in_features / 64) * 32;
  const int64_t total = lanes_per_expert * experts;
  constexpr int kThreads = 256;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > INT_MAX) return cudaErrorInvalidValue;
  mxfp4_tiled_repack_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(
      packed, scales, out_features, in_features, lanes_per_expert, total, tiled_packed, tiled_scales);
  return cudaGetLastError();
}

}  // namespace k3::kernels
