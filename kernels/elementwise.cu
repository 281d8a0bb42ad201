#include "kernels/elementwise.h"

#include <algorithm>

namespace k3::kernels {
namespace {

constexpr int kThreads = 256;
int grid_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536)); }

#define K3_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void add_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int64_t n) {
  K3_GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

__global__ void sigmoid_gate_kernel(const __nv_bfloat16* x, const __nv_bfloat16* gate, int64_t gate_stride,
                                    __nv_bfloat16* out, int64_t rows, int64_t width) {
  K3_GRID_STRIDE(i, rows * width) {
    const float g = __bfloat162float(gate[(i / width) * gate_stride + i % width]);
    out[i] = __float2bfloat16_rn(__bfloat162float(x[i]) / (1.0f + expf(-g)));
  }
}

__global__ void convert_kernel(const float* x, __nv_bfloat16* out, int64_t n) {
  K3_GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(x[i]);
}

__global__ void increment_kernel(int32_t* values, int n) { K3_GRID_STRIDE(i, n) values[i] += 1; }

}  // namespace

cudaError_t add_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int64_t n,
                     cudaStream_t stream) {
  if (n < 0 || (n > 0 && (!a || !b || !out))) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  add_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, out, n);
  return cudaGetLastError();
}

cudaError_t sigmoid_gate_bf16(const __nv_bfloat16* x, const __nv_bfloat16* gate, int64_t gate_row_stride,
                              __nv_bfloat16* out, int64_t rows, int64_t width, cudaStream_t stream) {
  if (rows < 0 || width <= 0 || gate_row_stride < width || (rows > 0 && (!x || !gate || !out))) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  sigmoid_gate_kernel<<<grid_for(rows * width), kThreads, 0, stream>>>(x, gate, gate_row_stride, out, rows, width);
  return cudaGetLastError();
}

cudaError_t convert_f32_to_bf16(const float* x, __nv_bfloat16* out, int64_t n, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (!x || !out))) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  convert_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

cudaError_t increment_i32(int32_t* values, int n, cudaStream_t stream) {
  if (n < 0 || (n > 0 && !values)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  increment_kernel<<<grid_for(n), kThreads, 0, stream>>>(values, n);
  return cudaGetLastError();
}

}  // namespace k3::kernels
