// rmsnorm: y[t, :] = x[t, :] / sqrt(mean(x[t, :]²) + eps) · w, in fp32 arithmetic.
// Shapes: x, y [rows, width] bf16 or fp32 (row stride in elements), w [width] bf16.
// Versions: rmsnorm_block_per_row — one thread block per row, a block-wide sum of squares in fp32;
// rmsnorm_block_per_row_vec8 — the same with 16-byte bf16 vectors, used when width and row strides are
// multiples of 8 and the pointers 16-byte aligned.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

cudaError_t rmsnorm_bf16(const __nv_bfloat16* x, int64_t x_row_stride, const __nv_bfloat16* weight, float eps,
                         __nv_bfloat16* y, int64_t y_row_stride, int64_t rows, int64_t width, cudaStream_t stream);
cudaError_t rmsnorm_f32(const float* x, int64_t x_row_stride, const __nv_bfloat16* weight, float eps, float* y,
                        int64_t y_row_stride, int64_t rows, int64_t width, cudaStream_t stream);

}  // namespace k3::kernels
