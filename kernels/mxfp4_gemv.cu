#include "kernels/mxfp4_gemv.h"

#include <algorithm>

namespace k3::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;  // one warp per output row
constexpr int kMxBlockElements = 32;          // elements sharing one E8M0 scale
constexpr int kMxBlockBytes = kMxBlockElements / 2;

// E2M1 by nibble: bit 3 is the sign, bits 0..2 index {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
__constant__ float kE2m1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// 2^(scale − 127); 0xFF is NaN. Built from the bits: exact for every byte, 2^-127 included (subnormal).
__device__ float e8m0_value(uint32_t scale) {
  if (scale == 0xFFu) return __int_as_float(0x7FC00000);
  if (scale == 0u) return __int_as_float(0x00400000);
  return __int_as_float(static_cast<int>(scale << 23));
}

// bf16 → fp32 is the bf16 bits in the upper half: the element at the lower address is the low half.
__device__ float bf16_low(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ float bf16_high(uint32_t pair) { return __uint_as_float(pair & 0xFFFF0000u); }

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One 32-element block of a bf16 x row as fp32: four 16-byte loads; 32-bit word m holds elements 2m
// (low half) and 2m + 1.
__device__ __forceinline__ void load_x_block(const __nv_bfloat16* p, float (&xf)[kMxBlockElements]) {
  const uint4* xv = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint4 u = xv[k];
    const uint32_t pairs[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      xf[8 * k + 2 * j] = bf16_low(pairs[j]);
      xf[8 * k + 2 * j + 1] = bf16_high(pairs[j]);
    }
  }
}

// The decode table in shared memory (per-lane indices differ; constant memory would serialise them).
// Call before any warp leaves the block.
__device__ void load_decode_table(float* table) {
  if (threadIdx.x < 16) table[threadIdx.x] = kE2m1Values[threadIdx.x];
  __syncthreads();
}

// One output row, by the calling warp: y_first[t · y_stride] = Σ_i W[row, i] · x_rows[t][i] for
// t < tokens. packed_row/scale_row point at the row's in/2 bytes and in/32 scales; blocks = in/32.
// tokens is the same in every lane, so the guarded shuffles are warp-uniform.
__device__ void gemv_row(const uint8_t* packed_row, const uint8_t* scale_row, int64_t blocks,
                         const __nv_bfloat16* const (&x_rows)[kMxfp4GemvMaxTokens], int tokens, const float* table,
                         float* y_first, int64_t y_stride) {
  float acc[kMxfp4GemvMaxTokens];
#pragma unroll
  for (int t = 0; t < kMxfp4GemvMaxTokens; ++t) acc[t] = 0.0f;

  const int lane = threadIdx.x % 32;
  for (int64_t b = lane; b < blocks; b += 32) {
    // Element 2m is the low nibble of byte m; bytes 4k..4k+3 are word k (little-endian).
    const uint4 q = *reinterpret_cast<const uint4*>(packed_row + b * kMxBlockBytes);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
    float w[kMxBlockElements];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int j = 0; j < 8; ++j) w[8 * k + j] = table[(words[k] >> (4 * j)) & 0xFu];
    }
    const float scale = e8m0_value(scale_row[b]);
#pragma unroll
    for (int t = 0; t < kMxfp4GemvMaxTokens; ++t) {
      if (t < tokens) {
        float xf[kMxBlockElements];
        load_x_block(x_rows[t] + b * kMxBlockElements, xf);
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < kMxBlockElements; ++e) dot = fmaf(w[e], xf[e], dot);
        acc[t] = fmaf(dot, scale, acc[t]);  // the power-of-two scale once per block
      }
    }
  }

#pragma unroll
  for (int t = 0; t < kMxfp4GemvMaxTokens; ++t) {
    if (t < tokens) {
      const float total = warp_sum(acc[t]);
      if (lane == 0) y_first[t * y_stride] = total;
    }
  }
}

__global__ void mxfp4_gemv_warp_per_row(const uint8_t* packed, const uint8_t* scales, int64_t out, int64_t blocks,
                                        const __nv_bfloat16* x, int64_t x_stride, int tokens, float* y,
                                        int64_t y_stride) {
  __shared__ float table[16];
  load_decode_table(table);
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= out) return;  // the whole warp
  const __nv_bfloat16* x_rows[kMxfp4GemvMaxTokens];
#pragma unroll
  for (int t = 0; t < kMxfp4GemvMaxTokens; ++t) x_rows[t] = x + (t < tokens ? t : 0) * x_stride;
  gemv_row(packed + row * blocks * kMxBlockBytes, scales + row * blocks, blocks, x_rows, tokens, table, y + row,
           y_stride);
}

// blockIdx.x = expert · row_blocks_per_expert + (output row) / kRowsPerBlock.
__global__ void mxfp4_gemv_experts_warp_per_row(Mxfp4GemvExperts experts, int64_t out, int64_t blocks,
                                                unsigned row_blocks_per_expert, const __nv_bfloat16* x,
                                                int64_t x_stride, float* y, int64_t y_stride) {
  __shared__ float table[16];
  load_decode_table(table);
  const int expert = static_cast<int>(blockIdx.x / row_blocks_per_expert);
  const int64_t row = int64_t(blockIdx.x % row_blocks_per_expert) * kRowsPerBlock + threadIdx.x / 32;
  const int tokens = experts.token_count[expert];
  if (row >= out || tokens == 0) return;  // the whole warp
  const int first_output_row = experts.first_output_row(expert);
  const __nv_bfloat16* x_rows[kMxfp4GemvMaxTokens];
#pragma unroll
  for (int t = 0; t < kMxfp4GemvMaxTokens; ++t) {
    x_rows[t] = x + int64_t(t < tokens ? experts.token_index[expert][t] : 0) * x_stride;
  }
  gemv_row(experts.packed[expert] + row * blocks * kMxBlockBytes, experts.scales[expert] + row * blocks, blocks, x_rows,
           tokens, table, y + int64_t(first_output_row) * y_stride + row, y_stride);
}

// One token, kOneTokenRowsPerWarp rows per warp: each lane loads its x block once and reuses it for
// every row, and issues that many independent packed loads per block (more bytes in flight).
constexpr int kOneTokenRowsPerWarp = 4;
constexpr int kOneTokenRowsPerBlock = kRowsPerBlock * kOneTokenRowsPerWarp;

__device__ void gemv_rows_one_token(const uint8_t* packed, const uint8_t* scales, int64_t row0, int64_t out,
                                    int64_t blocks, const __nv_bfloat16* x, const float* table, float* y) {
  float acc[kOneTokenRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kOneTokenRowsPerWarp; ++r) acc[r] = 0.0f;
  const int lane = threadIdx.x % 32;
  for (int64_t b = lane; b < blocks; b += 32) {
    float xf[kMxBlockElements];
    load_x_block(x + b * kMxBlockElements, xf);
    uint4 q[kOneTokenRowsPerWarp];
    uint32_t scale_byte[kOneTokenRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kOneTokenRowsPerWarp; ++r) {
      const int64_t row = row0 + r < out ? row0 + r : out - 1;  // a clamped duplicate, never stored
      q[r] = *reinterpret_cast<const uint4*>(packed + (row * blocks + b) * kMxBlockBytes);
      scale_byte[r] = scales[row * blocks + b];
    }
#pragma unroll
    for (int r = 0; r < kOneTokenRowsPerWarp; ++r) {
      const uint32_t words[4] = {q[r].x, q[r].y, q[r].z, q[r].w};
      float dot = 0.0f;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
#pragma unroll
        for (int j = 0; j < 8; ++j) dot = fmaf(table[(words[k] >> (4 * j)) & 0xFu], xf[8 * k + j], dot);
      }
      acc[r] = fmaf(dot, e8m0_value(scale_byte[r]), acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < kOneTokenRowsPerWarp; ++r) {
    const float total = warp_sum(acc[r]);
    if (lane == 0 && row0 + r < out) y[row0 + r] = total;
  }
}

__global__ void mxfp4_gemv_one_token_rows_per_warp(const uint8_t* packed, const uint8_t* scales, int64_t out,
                                                   int64_t blocks, const __nv_bfloat16* x, float* y) {
  __shared__ float table[16];
  load_decode_table(table);
  const int64_t row0 = int64_t(blockIdx.x) * kOneTokenRowsPerBlock + (threadIdx.x / 32) * kOneTokenRowsPerWarp;
  if (row0 >= out) return;  // the whole warp
  gemv_rows_one_token(packed, scales, row0, out, blocks, x, table, y);
}

// blockIdx.x = expert · row_blocks_per_expert + (output row) / kOneTokenRowsPerBlock; every expert has
// at most one token.
__global__ void mxfp4_gemv_experts_one_token_rows_per_warp(Mxfp4GemvExperts experts, int64_t out, int64_t blocks,
                                                           unsigned row_blocks_per_expert, const __nv_bfloat16* x,
                                                           int64_t x_stride, float* y, int64_t y_stride) {
  __shared__ float table[16];
  load_decode_table(table);
  const int expert = static_cast<int>(blockIdx.x / row_blocks_per_expert);
  if (experts.token_count[expert] == 0) return;  // the whole block
  const int64_t row0 =
      int64_t(blockIdx.x % row_blocks_per_expert) * kOneTokenRowsPerBlock + (threadIdx.x / 32) * kOneTokenRowsPerWarp;
  if (row0 >= out) return;  // the whole warp
  const int first_output_row = experts.first_output_row(expert);
  gemv_rows_one_token(experts.packed[expert], experts.scales[expert], row0, out, blocks,
                      x + int64_t(experts.token_index[expert][0]) * x_stride, table,
                      y + int64_t(first_output_row) * y_stride);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The checks both entry points share: shape, x layout and the grid size.
bool valid_shape(int64_t out, int64_t in, const __nv_bfloat16* x, int64_t x_stride, const float* y, int64_t y_stride,
                 int64_t grid_multiplier) {
  return out > 0 && in > 0 && in % kMxBlockElements == 0 && x != nullptr && aligned16(x) && x_stride >= in &&
         x_stride % 8 == 0 && y != nullptr && y_stride >= out &&
         (out + kRowsPerBlock - 1) / kRowsPerBlock * grid_multiplier <= INT32_MAX;
}

}  // namespace

cudaError_t mxfp4_gemv_bf16(const uint8_t* packed, const uint8_t* scales, int64_t out_features, int64_t in_features,
                            const __nv_bfloat16* x, int64_t x_row_stride, int64_t tokens, float* y,
                            int64_t y_row_stride, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (tokens < 0 || tokens > kMxfp4GemvMaxTokens || packed == nullptr || !aligned16(packed) || scales == nullptr ||
      !valid_shape(out_features, in_features, x, x_row_stride, y, y_row_stride, 1)) {
    return cudaErrorInvalidValue;
  }
  if (tokens == 1) {
    const auto grid = static_cast<unsigned>((out_features + kOneTokenRowsPerBlock - 1) / kOneTokenRowsPerBlock);
    mxfp4_gemv_one_token_rows_per_warp<<<grid, kThreads, 0, stream>>>(packed, scales, out_features,
                                                                      in_features / kMxBlockElements, x, y);
    return cudaGetLastError();
  }
  const auto grid = static_cast<unsigned>((out_features + kRowsPerBlock - 1) / kRowsPerBlock);
  mxfp4_gemv_warp_per_row<<<grid, kThreads, 0, stream>>>(packed, scales, out_features, in_features / kMxBlockElements,
                                                         x, x_row_stride, static_cast<int>(tokens), y, y_row_stride);
  return cudaGetLastError();
}

cudaError_t mxfp4_gemv_experts_bf16(const Mxfp4GemvExperts& experts, int64_t out_features, int64_t in_features,
                                    const __nv_bfloat16* x, int64_t x_row_stride, int64_t x_rows, float* y,
                                    int64_t y_row_stride, cudaStream_t stream) {
  if (experts.count < 0 || experts.count > kMxfp4GemvMaxExperts) return cudaErrorInvalidValue;
  for (int e = 0; e < experts.count; ++e) {
    const int tokens = experts.token_count[e];
    if (tokens < 0 || tokens > kMxfp4GemvMaxTokens) return cudaErrorInvalidValue;
    if (tokens == 0) continue;
    if (experts.packed[e] == nullptr || !aligned16(experts.packed[e]) || experts.scales[e] == nullptr) {
      return cudaErrorInvalidValue;
    }
    for (int t = 0; t < tokens; ++t) {
      if (experts.token_index[e][t] < 0 || experts.token_index[e][t] >= x_rows) return cudaErrorInvalidValue;
    }
  }
  if (experts.output_rows() == 0) return cudaSuccess;
  if (!valid_shape(out_features, in_features, x, x_row_stride, y, y_row_stride, experts.count)) {
    return cudaErrorInvalidValue;
  }
  int max_tokens = 0;
  for (int e = 0; e < experts.count; ++e) max_tokens = std::max(max_tokens, experts.token_count[e]);
  if (max_tokens == 1) {  // decode at batch 1: one token per selected expert
    const auto one_token_blocks =
        static_cast<unsigned>((out_features + kOneTokenRowsPerBlock - 1) / kOneTokenRowsPerBlock);
    mxfp4_gemv_experts_one_token_rows_per_warp<<<one_token_blocks * static_cast<unsigned>(experts.count), kThreads, 0,
                                                 stream>>>(experts, out_features, in_features / kMxBlockElements,
                                                           one_token_blocks, x, x_row_stride, y, y_row_stride);
    return cudaGetLastError();
  }
  const auto row_blocks = static_cast<unsigned>((out_features + kRowsPerBlock - 1) / kRowsPerBlock);
  mxfp4_gemv_experts_warp_per_row<<<row_blocks* static_cast<unsigned>(experts.count), kThreads, 0, stream>>>(
      experts, out_features, in_features / kMxBlockElements, row_blocks, x, x_row_stride, y, y_row_stride);
  return cudaGetLastError();
}

}  // namespace k3::kernels
