#include "kernels/kda_output_gate.h"

#include <climits>
#include <cstdint>

namespace k3::kernels {
namespace {

// Block = (token t, head h), blockIdx.x = t·heads + h; thread i < d is channel i of the head.
__global__ void kda_output_gate_block_kernel(const float* o, const float* w, const __nv_bfloat16* gate,
                                             int64_t gate_stride, float eps, __nv_bfloat16* out, int heads, int d) {
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

constexpr int kThreads = 256;  // warp_per_token_head: 8 (token, head) pairs per block

// Warp = (token t, head h), warp index t·heads + h: lane l reads channels l + 32j (each load covers 32 consecutive
// channels), the sum of squares is a warp sum (no block barrier), then each lane reads its channels of o again (from
// the L1) beside the gate's.
__global__ void __launch_bounds__(kThreads)
    kda_output_gate_warp_kernel(const float* __restrict__ o, const float* __restrict__ w,
                                const __nv_bfloat16* __restrict__ gate, int64_t gate_stride, float eps,
                                __nv_bfloat16* __restrict__ out, int64_t pairs, int heads, int d) {
  const int64_t pair = int64_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (pair >= pairs) return;
  const int lane = int(threadIdx.x % 32);
  const int64_t t = pair / heads;
  const int h = int(pair % heads);
  const int64_t base = pair * d;  // (t·heads + h)·d
  const __nv_bfloat16* gate_row = gate + t * gate_stride + int64_t(h) * d;
  float s = 0.0f;
  for (int i = lane; i < d; i += 32) s = fmaf(o[base + i], o[base + i], s);
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
  const float inv_rms = rsqrtf(s / float(d) + eps);
  for (int i = lane; i < d; i += 32) {
    const float g = __bfloat162float(gate_row[i]);
    const float normed = o[base + i] * inv_rms * w[i];
    out[base + i] = __float2bfloat16_rn(normed / (1.0f + expf(-g)));
  }
}

}  // namespace

cudaError_t kda_output_gate_bf16(const float* o, const float* norm_weight, const __nv_bfloat16* gate,
                                 int64_t gate_row_stride, float eps, __nv_bfloat16* out, int tokens, int heads,
                                 int head_dim, cudaStream_t stream, KdaOutputGateAlgorithm algorithm) {
  if (tokens < 0 || heads <= 0 || head_dim <= 0 || head_dim > 1024 || gate_row_stride < int64_t(heads) * head_dim ||
      !o || !norm_weight || !gate || !out) {
    return cudaErrorInvalidValue;
  }
  if (tokens == 0) return cudaSuccess;
  const int64_t pairs = int64_t(tokens) * heads;
  if (algorithm == KdaOutputGateAlgorithm::automatic)
    algorithm = pairs >= kKdaOutputGateWarpPairs ? KdaOutputGateAlgorithm::warp_per_token_head
                                                 : KdaOutputGateAlgorithm::block_per_token_head;
  if (algorithm == KdaOutputGateAlgorithm::warp_per_token_head) {
    const int64_t blocks = (pairs + kThreads / 32 - 1) / (kThreads / 32);
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    kda_output_gate_warp_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(o, norm_weight, gate, gate_row_stride, eps,
                                                                           out, pairs, heads, head_dim);
  } else if (algorithm == KdaOutputGateAlgorithm::block_per_token_head) {
    if (pairs > INT32_MAX) return cudaErrorInvalidValue;
    kda_output_gate_block_kernel<<<unsigned(pairs), (head_dim + 31) / 32 * 32, 0, stream>>>(
        o, norm_weight, gate, gate_row_stride, eps, out, heads, head_dim);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace k3::kernels
