// mxfp4_gemv: the decode-time routed-expert product with in-kernel MXFP4 dequantisation (K3-SPEC §5, §6):
//   y[t, o] = Σ_i W[o, i] · x[t, i]        W[o, i] = E2M1(nibble) · 2^(scale[o, i/32] − 127)
// Shapes: W stored as packed [out, in/2] u8 (low nibble = even element) and scales [out, in/32] u8 E8M0
// (0xFF = NaN), both contiguous; x [tokens, in] bf16 (row stride in elements); y [tokens, out] fp32.
// in is a positive multiple of 32; 1 ≤ tokens ≤ 16. packed and x must be 16-byte aligned and
// x_row_stride a multiple of 8 (each lane reads a 32-element block as 16-byte vectors).
// Versions: mxfp4_gemv_warp_per_row — one warp per output row, 8 rows per 256-thread block; lane l
// takes the 32-element blocks l, l+32, …: one 16-byte load of packed nibbles and one scale byte per
// block, decoded through a 16-entry table in shared memory, dotted with every token's x in fp32 (the
// scale applied once per block), then a warp-shuffle reduction per token.
// mxfp4_gemv_experts: the same per row, for up to 16 experts of one shape in one launch; the grid's
// one dimension runs over (expert, block of 8 output rows).
// Faster: decode nibble pairs straight to bf16x2 and use packed HFMA2 (or stage x as bf16 in shared
// memory and share it across warps), several rows per warp to reuse the x loads, split-in (split-K)
// when out·experts is too small to fill the GPU, and for T > 16 a tensor-core GEMM that dequantises
// tiles to bf16/fp8 in shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kMxfp4GemvMaxTokens = 16;
inline constexpr int kMxfp4GemvMaxExperts = 16;

cudaError_t mxfp4_gemv_bf16(const uint8_t* packed, const uint8_t* scales, int64_t out_features, int64_t in_features,
                            const __nv_bfloat16* x, int64_t x_row_stride, int64_t tokens, float* y,
                            int64_t y_row_stride, cudaStream_t stream);

// Several experts of the same [out, in] shape, each over its own tokens; passed by value to the kernel.
// Expert e reads x rows token_index[e][0 .. token_count[e]) and writes y rows
// first_output_row(e) .. first_output_row(e) + token_count[e] − 1 in that order, where
// first_output_row(e) = Σ_{e' < e} token_count[e'] (expert-major slot order, as a grouped MoE lays
// out its routed tokens). An expert with no tokens is skipped.
struct Mxfp4GemvExperts {
  int count = 0;                                                        // experts in [0, count) are used
  const uint8_t* packed[kMxfp4GemvMaxExperts] = {};                     // [out, in/2] each
  const uint8_t* scales[kMxfp4GemvMaxExperts] = {};                     // [out, in/32] each
  int token_count[kMxfp4GemvMaxExperts] = {};                           // 0..16
  int32_t token_index[kMxfp4GemvMaxExperts][kMxfp4GemvMaxTokens] = {};  // rows of x

  // First row of y that expert e writes: Σ_{e' < e} token_count[e'].
  __host__ __device__ int first_output_row(int e) const {
    int rows = 0;
    for (int i = 0; i < e; ++i) rows += token_count[i];
    return rows;
  }
  // Rows of y that the experts write: Σ token_count.
  int output_rows() const { return first_output_row(count); }
};

// x has x_rows rows (every token_index must lie in [0, x_rows)); y has experts.output_rows() rows.
cudaError_t mxfp4_gemv_experts_bf16(const Mxfp4GemvExperts& experts, int64_t out_features, int64_t in_features,
                                    const __nv_bfloat16* x, int64_t x_row_stride, int64_t x_rows, float* y,
                                    int64_t y_row_stride, cudaStream_t stream);

}  // namespace k3::kernels
