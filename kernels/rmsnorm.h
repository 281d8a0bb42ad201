// rmsnorm: y[t, :] = x[t, :] / sqrt(mean(x[t, :]²) + eps) · w, in fp32 arithmetic.
// Shapes: x, y [rows, width] bf16 or fp32 (row stride in elements), w [width] bf16; rmsnorm_f32_to_bf16 reads fp32
// and writes bf16 (the fp32 result rounded to nearest even). y may be x (in place) when both have the same type.
// Versions: rmsnorm_block_per_row — one thread block per row, a block-wide sum of squares in fp32; a load per
// iteration, read twice (latency-bound for one row);
// rmsnorm_block_per_row_vec8 — the same with 16-byte bf16 vectors, used when width and row strides are
// multiples of 8 and the pointers 16-byte aligned;
// rmsnorm_row_in_registers (fp32 x; RmsNormF32Algorithm) — one 256-thread block per row, the whole row and its
// weights loaded into registers at once (16-byte fp32 vectors and 8-byte bf16 weight vectors when width and
// strides are multiples of 4 and the pointers aligned, else scalars), one block reduction, the row written from
// registers: all loads in flight at once; width ≤ kRmsNormRowInRegistersMaxWidth.
// Measurements: bench/results/kernel-notes.md (rmsnorm).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

cudaError_t rmsnorm_bf16(const __nv_bfloat16* x, int64_t x_row_stride, const __nv_bfloat16* weight, float eps,
                         __nv_bfloat16* y, int64_t y_row_stride, int64_t rows, int64_t width, cudaStream_t stream);

inline constexpr int64_t kRmsNormRowInRegistersMaxWidth = 8192;

// automatic: row_in_registers when width ≤ kRmsNormRowInRegistersMaxWidth, else block_per_row.
enum class RmsNormF32Algorithm { automatic, block_per_row, row_in_registers };

cudaError_t rmsnorm_f32(const float* x, int64_t x_row_stride, const __nv_bfloat16* weight, float eps, float* y,
                        int64_t y_row_stride, int64_t rows, int64_t width, cudaStream_t stream,
                        RmsNormF32Algorithm algorithm = RmsNormF32Algorithm::automatic);
cudaError_t rmsnorm_f32_to_bf16(const float* x, int64_t x_row_stride, const __nv_bfloat16* weight, float eps,
                                __nv_bfloat16* y, int64_t y_row_stride, int64_t rows, int64_t width,
                                cudaStream_t stream, RmsNormF32Algorithm algorithm = RmsNormF32Algorithm::automatic);

}  // namespace k3::kernels
