// embedding: y[t, :] = table[ids[t], :], the token-embedding gather (K3-SPEC §2: p = embedding(token)).
// Shapes: table [vocab, width] bf16 (row stride in elements), ids [tokens] int32, y [tokens, width] bf16.
// An id outside [0, vocab) reads nothing: its output row is written as zeros and, when error_flag is not
// null, the kernel stores 1 into *error_flag. The kernel never writes 0 there, so the caller clears the
// flag (e.g. cudaMemsetAsync) before the launch and reads it after; one flag can collect several launches.
// Versions: embedding_gather_block_per_token — one thread block per token, threads stride over the row, with 16-byte
// copies when the width, strides and pointers allow (2-byte copies wait one HBM round trip after another).
// Measurements: bench/results/kernel-notes.md (embedding).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

cudaError_t embedding_gather_bf16(const __nv_bfloat16* table, int64_t table_row_stride, int64_t vocab,
                                  const int32_t* ids, int64_t tokens, __nv_bfloat16* y, int64_t y_row_stride,
                                  int64_t width, int* error_flag, cudaStream_t stream);

// One rank's rows of a vocabulary-parallel table: `table` holds rows [first_row, first_row + rows) of a vocabulary of
// `vocab`; an id in range but outside those rows writes a zero row (another rank holds it: the ranks' outputs are
// summed), and only an id outside [0, vocab) raises the flag.
cudaError_t embedding_gather_rows_bf16(const __nv_bfloat16* table, int64_t table_row_stride, int64_t vocab,
                                       int64_t first_row, int64_t rows, const int32_t* ids, int64_t tokens,
                                       __nv_bfloat16* y, int64_t y_row_stride, int64_t width, int* error_flag,
                                       cudaStream_t stream);

}  // namespace k3::kernels
