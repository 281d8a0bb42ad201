#include "kernels/rmsnorm.h"

namespace k3::kernels {

namespace {

constexpr int kThreads = 256;

__device__ float to_float(float v) { return v; }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ void store(float* p, float v) { *p = v; }
__device__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Sum over the block of one value per thread.
__device__ float block_sum(float v) {
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? partial[lane] : 0.0f;
  if (warp == 0) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

template <typename T, typename OutT>
__global__ void rmsnorm_block_per_row(const T* x, int64_t x_stride, const __nv_bfloat16* w, float eps, OutT* y,
                                      int64_t y_stride, int64_t width) {
  const T* row = x + blockIdx.x * x_stride;
  OutT* out = y + blockIdx.x * y_stride;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    const float v = to_float(row[i]);
    sum_sq += v * v;
  }
  const float inv = rsqrtf(block_sum(sum_sq) / float(width) + eps);
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    store(out + i, to_float(row[i]) * inv * __bfloat162float(w[i]));
  }
}

// bf16 rows with 16-byte vectors (8 values per load/store); the row stays in L1 between the two passes.
__global__ void rmsnorm_block_per_row_vec8(const __nv_bfloat16* x, int64_t x_stride, const __nv_bfloat16* w, float eps,
                                           __nv_bfloat16* y, int64_t y_stride, int64_t width) {
  const uint4* row = reinterpret_cast<const uint4*>(x + blockIdx.x * x_stride);
  uint4* out = reinterpret_cast<uint4*>(y + blockIdx.x * y_stride);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  const int64_t vectors = width / 8;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
    const uint4 u = row[i];
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]);
      sum_sq += f.x * f.x + f.y * f.y;
    }
  }
  const float inv = rsqrtf(block_sum(sum_sq) / float(width) + eps);
  for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
    const uint4 u = row[i], wu = wv[i];
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
    const __nv_bfloat162* hw = reinterpret_cast<const __nv_bfloat162*>(&wu);
    uint4 o;
    __nv_bfloat162* ho = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]), g = __bfloat1622float2(hw[j]);
      ho[j] = __floats2bfloat162_rn(f.x * inv * g.x, f.y * inv * g.y);
    }
    out[i] = o;
  }
}

// V consecutive values: fp32 in, fp32 or bf16 out, bf16 weights (V = 4: one 16-byte, 8-byte or 8-byte access).
template <int V>
__device__ void load_row(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  } else {
    v[0] = *p;
  }
}
template <int V>
__device__ void load_weights(const __nv_bfloat16* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
  } else {
    v[0] = __bfloat162float(*p);
  }
}
template <int V>
__device__ void store_row(float* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *p = v[0];
  }
}
template <int V>
__device__ void store_row(__nv_bfloat16* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    const __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]), b = __floats2bfloat162_rn(v[2], v[3]);
    uint2 u;
    u.x = *reinterpret_cast<const uint32_t*>(&a);
    u.y = *reinterpret_cast<const uint32_t*>(&b);
    *reinterpret_cast<uint2*>(p) = u;
  } else {
    *p = __float2bfloat16_rn(v[0]);
  }
}

// One block per row, the row in registers: vector i (V values) of the row goes to thread i % kThreads, slot
// i / kThreads. Every element is read and written by the same thread, so y may be x.
template <typename OutT, int V>
__global__ void rmsnorm_row_in_registers(const float* x, int64_t x_stride, const __nv_bfloat16* w, float eps, OutT* y,
                                         int64_t y_stride, int64_t width) {
  constexpr int kSlots = int(kRmsNormRowInRegistersMaxWidth) / (kThreads * V);
  const float* row = x + blockIdx.x * x_stride;
  OutT* out = y + blockIdx.x * y_stride;
  const int vectors = int(width / V);  // width is a multiple of V
  float v[kSlots][V], g[kSlots][V];
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const int i = threadIdx.x + s * kThreads;
    if (i < vectors) {
      load_row<V>(row + int64_t(i) * V, v[s]);
      load_weights<V>(w + int64_t(i) * V, g[s]);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) v[s][k] = g[s][k] = 0.0f;
    }
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
#pragma unroll
    for (int k = 0; k < V; ++k) sum_sq += v[s][k] * v[s][k];
  }
  const float inv = rsqrtf(block_sum(sum_sq) / float(width) + eps);
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const int i = threadIdx.x + s * kThreads;
    if (i < vectors) {
      float o[V];
#pragma unroll
      for (int k = 0; k < V; ++k) o[k] = v[s][k] * inv * g[s][k];
      store_row<V>(out + int64_t(i) * V, o);
    }
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
bool aligned16(const void* p) { return aligned(p, 16); }

template <typename T>
cudaError_t launch(const T* x, int64_t xs, const __nv_bfloat16* w, float eps, T* y, int64_t ys, int64_t rows,
                   int64_t width, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  rmsnorm_block_per_row<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, xs, w, eps, y, ys, width);
  return cudaGetLastError();
}

template <typename OutT>
cudaError_t launch_f32(const float* x, int64_t xs, const __nv_bfloat16* w, float eps, OutT* y, int64_t ys, int64_t rows,
                       int64_t width, cudaStream_t stream, RmsNormF32Algorithm algorithm) {
  if (rows <= 0 || width <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (rows > int64_t(0x7FFFFFFF) || x == nullptr || w == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (algorithm == RmsNormF32Algorithm::automatic) {
    algorithm = width <= kRmsNormRowInRegistersMaxWidth ? RmsNormF32Algorithm::row_in_registers
                                                        : RmsNormF32Algorithm::block_per_row;
  }
  const auto grid = static_cast<unsigned>(rows);
  if (algorithm == RmsNormF32Algorithm::block_per_row) {
    rmsnorm_block_per_row<float, OutT><<<grid, kThreads, 0, stream>>>(x, xs, w, eps, y, ys, width);
    return cudaGetLastError();
  }
  if (algorithm != RmsNormF32Algorithm::row_in_registers || width > kRmsNormRowInRegistersMaxWidth) {
    return cudaErrorInvalidValue;
  }
  if (width % 4 == 0 && xs % 4 == 0 && ys % 4 == 0 && aligned16(x) && aligned(y, 4 * sizeof(OutT)) && aligned(w, 8)) {
    rmsnorm_row_in_registers<OutT, 4><<<grid, kThreads, 0, stream>>>(x, xs, w, eps, y, ys, width);
  } else {
    rmsnorm_row_in_registers<OutT, 1><<<grid, kThreads, 0, stream>>>(x, xs, w, eps, y, ys, width);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t rmsnorm_bf16(const __nv_bfloat16* x, int64_t xs, const __nv_bfloat16* w, float eps, __nv_bfloat16* y,
                         int64_t ys, int64_t rows, int64_t width, cudaStream_t stream) {
  // 16-byte vectors when every row and the weight start on a 16-byte boundary.
  if (rows > 0 && width % 8 == 0 && xs % 8 == 0 && ys % 8 == 0 && aligned16(x) && aligned16(y) && aligned16(w)) {
    rmsnorm_block_per_row_vec8<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, xs, w, eps, y, ys, width);
    return cudaGetLastError();
  }
  return launch(x, xs, w, eps, y, ys, rows, width, stream);
}

cudaError_t rmsnorm_f32(const float* x, int64_t xs, const __nv_bfloat16* w, float eps, float* y, int64_t ys,
                        int64_t rows, int64_t width, cudaStream_t stream, RmsNormF32Algorithm algorithm) {
  return launch_f32(x, xs, w, eps, y, ys, rows, width, stream, algorithm);
}

cudaError_t rmsnorm_f32_to_bf16(const float* x, int64_t xs, const __nv_bfloat16* w, float eps, __nv_bfloat16* y,
                                int64_t ys, int64_t rows, int64_t width, cudaStream_t stream,
                                RmsNormF32Algorithm algorithm) {
  return launch_f32(x, xs, w, eps, y, ys, rows, width, stream, algorithm);
}

}  // namespace k3::kernels
