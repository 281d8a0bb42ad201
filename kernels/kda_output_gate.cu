#include "kernels/kda_output_gate.h"

namespace k3::kernels {
namespace {

__global__ void kda_output_gate_kernel(const float* o, const float* w, const __nv_bfloat16* gate, int64_t gate_stride,
                                       float eps, __nv_bfloat16* out, int heads, int d) {
  const int t = blockIdx.x / heads, h = blockIdx.x % heads, i = threadIdx.x;
  const int64_t base = (int64_t(t) * heads + h) * d;
  const float v = i < d ? o[base + i] : 0.0f;
  __shared__ float warp_sums[32];
  float s = v * v;
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
  if (i % 32 == 0) warp_sums[i / 32] = s;
  __syncthreads();
  float total = 0.0f;
  for (int j = 0; j < (blockDim.x + 31) / 32; ++j) total += warp_sums[j];
  if (i < d) {
    const float g = __bfloat162float(gate[int64_t(t) * gate_stride + int64_t(h) * d + i]);
    const float normed = v * rsqrtf(total / float(d) + eps) * w[i];
    out[base + i] = __float2bfloat16_rn(normed / (1.0f + expf(-g)));
  }
}

}  // namespace

cudaError_t kda_output_gate_bf16(const float* o, const float* norm_weight, const __nv_bfloat16* gate,
                                 int64_t gate_row_stride, float eps, __nv_bfloat16* out, int tokens, int heads,
                                 int head_dim, cudaStream_t stream) {
  if (tokens < 0 || heads <= 0 || head_dim <= 0 || head_dim > 1024 || gate_row_stride < int64_t(heads) * head_dim ||
      !o || !norm_weight || !gate || !out) {
    return cudaErrorInvalidValue;
  }
  if (tokens == 0) return cudaSuccess;
  const int threads = (head_dim + 31) / 32 * 32;
  kda_output_gate_kernel<<<tokens * heads, threads, 0, stream>>>(o, norm_weight, gate, gate_row_stride, eps, out, heads,
                                                                 head_dim);
  return cudaGetLastError();
}

}  // namespace k3::kernels
