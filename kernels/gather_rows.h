// gather_rows: dst[i, :] = src[rows[i], :], the rows of a matrix picked by an index list — the routed tokens'
// inputs of each expert gathered into one dense block (slot order, expert-major), so that each expert's rows
// are one contiguous GEMM operand (the bf16-expert MoE path: engine/runtime/gpu_model.cpp).
// Shapes: src [src_rows, width] bf16 with its row stride in elements, rows [count] int32 (device), dst
// [count, width] bf16 with its row stride. An index outside [0, src_rows) reads nothing: its dst row is zeros.
// Versions: gather_rows_block_per_row_16b — one thread block per dst row, threads stride over it in 16-byte chunks,
// when both bases are 16-byte aligned and the width and both strides are multiples of 8; else
// gather_rows_block_per_row, the same one element at a time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

cudaError_t gather_rows_bf16(const __nv_bfloat16* src, int64_t src_row_stride, int64_t src_rows, const int32_t* rows,
                             int64_t count, __nv_bfloat16* dst, int64_t dst_row_stride, int64_t width,
                             cudaStream_t stream);

}  // namespace k3::kernels
