#include "kernels/situ_glu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;

__device__ float to_float(float v) { return v; }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

struct Situ {
  float beta, linear_beta;
  __device__ float operator()(float a, float u) const {
    const float gate = beta * tanhf(a / beta) * (1.0f / (1.0f + expf(-a)));
    return gate * (linear_beta * tanhf(u / linear_beta));
  }
};

struct Silu {
  __device__ float operator()(float a, float u) const { return a / (1.0f + expf(-a)) * u; }
};

template <typename In, typename Act>
__global__ void glu_elementwise(const In* gate_up, int64_t in_stride, Act act, __nv_bfloat16* out, int64_t out_stride,
                                int64_t tokens, int64_t intermediate) {
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    const In* row = gate_up + t * in_stride;
    __nv_bfloat16* out_row = out + t * out_stride;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < intermediate;
         i += int64_t(gridDim.x) * blockDim.x) {
      out_row[i] = __float2bfloat16_rn(act(to_float(row[i]), to_float(row[intermediate + i])));
    }
  }
}

// Four consecutive inputs as fp32 (16 bytes of fp32 or 8 of bf16, aligned).
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// glu_elementwise with four consecutive elements per thread and step: 16- (or 8-) byte loads of gate and up, one
// 8-byte store; the same arithmetic per element, so the same results bit for bit. Needs intermediate, both row
// strides and both base addresses in whole 4-element groups (the host checks).
template <typename In, typename Act>
__global__ void glu_vec4(const In* gate_up, int64_t in_stride, Act act, __nv_bfloat16* out, int64_t out_stride,
                         int64_t tokens, int64_t intermediate) {
  const int64_t quads = intermediate / 4;
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    const In* row = gate_up + t * in_stride;
    __nv_bfloat16* out_row = out + t * out_stride;
    for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < quads; j += int64_t(gridDim.x) * blockDim.x) {
      const float4 a = load4(row + 4 * j), u = load4(row + intermediate + 4 * j);
      __nv_bfloat162 result[2];
      result[0] = __floats2bfloat162_rn(act(a.x, u.x), act(a.y, u.y));
      result[1] = __floats2bfloat162_rn(act(a.z, u.z), act(a.w, u.w));
      *reinterpret_cast<uint2*>(out_row + 4 * j) = *reinterpret_cast<const uint2*>(result);
    }
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename In, typename Act>
cudaError_t launch(const In* gate_up, int64_t in_stride, Act act, __nv_bfloat16* out, int64_t out_stride,
                   int64_t tokens, int64_t intermediate, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (tokens < 0 || intermediate < 1 || gate_up == nullptr || out == nullptr || in_stride < 2 * intermediate ||
      out_stride < intermediate) {
    return cudaErrorInvalidValue;
  }
  // Four elements per thread wherever every row starts on a whole group: 16-byte fp32 / 8-byte bf16 loads.
  if (intermediate % 4 == 0 && in_stride % 4 == 0 && out_stride % 4 == 0 && aligned(gate_up, 4 * sizeof(In)) &&
      aligned(out, 8)) {
    const int64_t quads = intermediate / 4;
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((quads + kThreads - 1) / kThreads, 1024)),
                    static_cast<unsigned>(std::min(tokens, kMaxGridY)));
    glu_vec4<<<grid, kThreads, 0, stream>>>(gate_up, in_stride, act, out, out_stride, tokens, intermediate);
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((intermediate + kThreads - 1) / kThreads, 1024)),
                  static_cast<unsigned>(std::min(tokens, kMaxGridY)));
  glu_elementwise<<<grid, kThreads, 0, stream>>>(gate_up, in_stride, act, out, out_stride, tokens, intermediate);
  return cudaGetLastError();
}

bool valid_betas(float beta, float linear_beta) {
  return std::isfinite(beta) && std::isfinite(linear_beta) && beta > 0 && linear_beta > 0;
}

}  // namespace

cudaError_t situ_glu_bf16(const float* gate_up, int64_t gate_up_row_stride, float beta, float linear_beta,
                          __nv_bfloat16* out, int64_t out_row_stride, int64_t tokens, int64_t intermediate,
                          cudaStream_t stream) {
  if (!valid_betas(beta, linear_beta)) return cudaErrorInvalidValue;
  return launch(gate_up, gate_up_row_stride, Situ{beta, linear_beta}, out, out_row_stride, tokens, intermediate,
                stream);
}

cudaError_t situ_glu_bf16(const __nv_bfloat16* gate_up, int64_t gate_up_row_stride, float beta, float linear_beta,
                          __nv_bfloat16* out, int64_t out_row_stride, int64_t tokens, int64_t intermediate,
                          cudaStream_t stream) {
  if (!valid_betas(beta, linear_beta)) return cudaErrorInvalidValue;
  return launch(gate_up, gate_up_row_stride, Situ{beta, linear_beta}, out, out_row_stride, tokens, intermediate,
                stream);
}

cudaError_t silu_glu_bf16(const float* gate_up, int64_t gate_up_row_stride, __nv_bfloat16* out, int64_t out_row_stride,
                          int64_t tokens, int64_t intermediate, cudaStream_t stream) {
  return launch(gate_up, gate_up_row_stride, Silu{}, out, out_row_stride, tokens, intermediate, stream);
}

cudaError_t silu_glu_bf16(const __nv_bfloat16* gate_up, int64_t gate_up_row_stride, __nv_bfloat16* out,
                          int64_t out_row_stride, int64_t tokens, int64_t intermediate, cudaStream_t stream) {
  return launch(gate_up, gate_up_row_stride, Silu{}, out, out_row_stride, tokens, intermediate, stream);
}

}  // namespace k3::kernels
