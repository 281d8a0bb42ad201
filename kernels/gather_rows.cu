#include "kernels/gather_rows.h"

#include <climits>

namespace k3::kernels {

namespace {

constexpr int kThreads = 256;

__global__ void gather_rows_block_per_row(const __nv_bfloat16* src, int64_t src_stride, int64_t src_rows,
                                          const int32_t* rows, __nv_bfloat16* dst, int64_t dst_stride, int64_t width) {
  const int64_t i = blockIdx.x;
  const int64_t row = rows[i];
  __nv_bfloat16* out = dst + i * dst_stride;
  if (row < 0 || row >= src_rows) {
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) out[c] = __float2bfloat16_rn(0.0f);
    return;
  }
  const __nv_bfloat16* in = src + row * src_stride;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) out[c] = in[c];
}

}  // namespace

cudaError_t gather_rows_bf16(const __nv_bfloat16* src, int64_t src_row_stride, int64_t src_rows, const int32_t* rows,
                             int64_t count, __nv_bfloat16* dst, int64_t dst_row_stride, int64_t width,
                             cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (count < 0 || count > INT32_MAX || width <= 0 || src_rows <= 0 || src_row_stride < width ||
      dst_row_stride < width || src == nullptr || rows == nullptr || dst == nullptr) {
    return cudaErrorInvalidValue;
  }
  gather_rows_block_per_row<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(src, src_row_stride, src_rows, rows,
                                                                                   dst, dst_row_stride, width);
  return cudaGetLastError();
}

}  // namespace k3::kernels
