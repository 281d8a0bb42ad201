#include "kernels/mxfp4_grouped_dequantized.h"

#include "kernels/mxfp4_grouped_device.h"

#include <climits>

namespace k3::kernels {

namespace {

using namespace mxfp4_detail;

constexpr int kDequantizeThreads = 256;

// Thread b decodes the b-th 32-element block of the expert (row b / blocks_per_row): 16 packed bytes, one scale,
// four words of 8 elements each stored as 8 bf16.
__global__ void __launch_bounds__(kDequantizeThreads)
    mxfp4_dequantize_blocks(const uint4* __restrict__ packed, const uint8_t* __restrict__ scales,
                            int64_t blocks_per_row, int64_t blocks, __nv_bfloat16* __restrict__ out,
                            int64_t out_row_stride) {
  const int64_t b = int64_t(blockIdx.x) * kDequantizeThreads + threadIdx.x;
  if (b >= blocks) return;
  const int64_t row = b / blocks_per_row, block_in_row = b - row * blocks_per_row;
  const uint4 q = __ldcs(packed + b);
  const BlockScale scale = block_scale(__ldcs(scales + b));
  uint4* dst = reinterpret_cast<uint4*>(out + row * out_row_stride + block_in_row * kMxBlockElements);
  const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t pairs[4];
    dequantize_word_lut(words[j], scale, pairs);
    dst[j] = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
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
  const int64_t blocks_per_row = w.in_features / kMxBlockElements, blocks = w.out_features * blocks_per_row;
  const int64_t grid = (blocks + kDequantizeThreads - 1) / kDequantizeThreads;
  if (grid > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t first_block = int64_t(expert) * blocks;
  mxfp4_dequantize_blocks<<<static_cast<unsigned>(grid), kDequantizeThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(w.packed) + first_block, w.scales + first_block, blocks_per_row, blocks, out,
      out_row_stride);
  return cudaGetLastError();
}

cudaError_t mxfp4_grouped_dequantized_bf16_to_f32(GemmRunner& gemm, const Mxfp4ExpertWeights& w,
                                                  const int32_t* host_expert_offsets, const __nv_bfloat16* x_by_slot,
                                                  int64_t x_row_stride, float* y, int64_t y_row_stride,
                                                  __nv_bfloat16* scratch, int64_t scratch_elements,
                                                  cudaStream_t stream) {
  if (!weights_ok(w) || w.out_features % 8 != 0 || host_expert_offsets == nullptr || x_by_slot == nullptr ||
      !aligned16(x_by_slot) || x_row_stride < w.in_features || x_row_stride % 8 != 0 || y == nullptr ||
      !aligned16(y) || y_row_stride < w.out_features || y_row_stride % 4 != 0 || scratch == nullptr ||
      !aligned16(scratch) || scratch_elements < w.out_features * w.in_features || host_expert_offsets[0] < 0) {
    return cudaErrorInvalidValue;
  }
  for (int e = 0; e < w.experts; ++e) {
    if (host_expert_offsets[e + 1] < host_expert_offsets[e]) return cudaErrorInvalidValue;
  }
  for (int e = 0; e < w.experts; ++e) {
    const int64_t first = host_expert_offsets[e], rows = host_expert_offsets[e + 1] - first;
    if (rows == 0) continue;
    if (const cudaError_t status = mxfp4_dequantize_expert_bf16(w, e, scratch, w.in_features, stream);
        status != cudaSuccess) {
      return status;
    }
    if (const cudaError_t status =
            gemm.bf16_to_f32(x_by_slot + first * x_row_stride, x_row_stride, scratch, nullptr, 1.0f, 0.0f,
                             y + first * y_row_stride, y_row_stride, rows, w.out_features, w.in_features, stream);
        status != cudaSuccess) {
      return status;
    }
  }
  return cudaSuccess;
}

}  // namespace k3::kernels
