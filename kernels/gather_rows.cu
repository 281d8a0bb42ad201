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

// The same in 16-byte chunks (8 bf16): width, both strides and both bases are multiples of 8 elements / 16 bytes.
__global__ void gather_rows_block_per_row_16b(const uint4* src, int64_t src_stride_chunks, int64_t src_rows,
                                              const int32_t* rows, uint4* dst, int64_t dst_stride_chunks,
                                              int64_t width_chunks) {
  const int64_t i = blockIdx.x;
  const int64_t row = rows[i];
  uint4* out = dst + i * dst_stride_chunks;
  if (row < 0 || row >= src_rows) {
    for (int64_t c = threadIdx.x; c < width_chunks; c += blockDim.x) out[c] = make_uint4(0, 0, 0, 0);
    return;
  }
  const uint4* in = src + row * src_stride_chunks;
  for (int64_t c = threadIdx.x; c < width_chunks; c += blockDim.x) out[c] = in[c];
}

bool whole_chunks(const void* p, int64_t elements) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && elements % 8 == 0;
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
  if (whole_chunks(src, src_row_stride) && whole_chunks(dst, dst_row_stride) && width % 8 == 0) {
    gather_rows_block_per_row_16b<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
        reinterpret_cast<const uint4*>(src), src_row_stride / 8, src_rows, rows, reinterpret_cast<uint4*>(dst),
        dst_row_stride / 8, width / 8);
  } else {
    gather_rows_block_per_row<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(src, src_row_stride, src_rows,
                                                                                     rows, dst, dst_row_stride, width);
  }
  return cudaGetLastError();
}

}  // namespace k3::kernels
