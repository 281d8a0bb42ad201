#include "kernels/embedding.h"

#include <cstdint>

namespace k3::kernels {

namespace {

constexpr int kThreads = 256;

__global__ void embedding_gather_block_per_token(const __nv_bfloat16* table, int64_t table_stride, int64_t vocab,
                                                 int64_t first_row, int64_t rows, const int32_t* ids, __nv_bfloat16* y,
                                                 int64_t y_stride, int64_t width, int* error_flag, bool vec8) {
  const int64_t token = blockIdx.x;
  const int64_t id = ids[token];
  __nv_bfloat16* out = y + token * y_stride;
  const bool valid = id >= 0 && id < vocab;
  if (!valid || id < first_row || id >= first_row + rows) {
    if (!valid && error_flag != nullptr && threadIdx.x == 0) *error_flag = 1;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) out[i] = __float2bfloat16_rn(0.0f);
    return;
  }
  const __nv_bfloat16* row = table + (id - first_row) * table_stride;
  if (vec8) {  // 16-byte copies: a few in flight per thread instead of one 2-byte load after another
    const uint4* src = reinterpret_cast<const uint4*>(row);
    uint4* dst = reinterpret_cast<uint4*>(out);
    for (int64_t i = threadIdx.x; i < width / 8; i += blockDim.x) dst[i] = src[i];
    return;
  }
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) out[i] = row[i];
}

}  // namespace

cudaError_t embedding_gather_bf16(const __nv_bfloat16* table, int64_t table_row_stride, int64_t vocab,
                                  const int32_t* ids, int64_t tokens, __nv_bfloat16* y, int64_t y_row_stride,
                                  int64_t width, int* error_flag, cudaStream_t stream) {
  return embedding_gather_rows_bf16(table, table_row_stride, vocab, 0, vocab, ids, tokens, y, y_row_stride, width,
                                    error_flag, stream);
}

cudaError_t embedding_gather_rows_bf16(const __nv_bfloat16* table, int64_t table_row_stride, int64_t vocab,
                                       int64_t first_row, int64_t rows, const int32_t* ids, int64_t tokens,
                                       __nv_bfloat16* y, int64_t y_row_stride, int64_t width, int* error_flag,
                                       cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (tokens < 0 || tokens > INT32_MAX || width <= 0 || vocab <= 0 || table_row_stride < width ||
      y_row_stride < width || table == nullptr || ids == nullptr || y == nullptr || first_row < 0 || rows < 1 ||
      first_row + rows > vocab) {
    return cudaErrorInvalidValue;
  }
  const bool vec8 = width % 8 == 0 && table_row_stride % 8 == 0 && y_row_stride % 8 == 0 &&
                    reinterpret_cast<uintptr_t>(table) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  embedding_gather_block_per_token<<<static_cast<unsigned>(tokens), kThreads, 0, stream>>>(
      table, table_row_stride, vocab, first_row, rows, ids, y, y_row_stride, width, error_flag, vec8);
  return cudaGetLastError();
}

}  // namespace k3::kernels
