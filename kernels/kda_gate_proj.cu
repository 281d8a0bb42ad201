#include "kernels/kda_gate_proj.h"

#include <cstdint>

namespace k3::kernels {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreadsA = 256, kWarpsPerRowA = 4, kRowsPerBlockA = kThreadsA / 32 / kWarpsPerRowA;
constexpr int kChunkStrideA = kWarpsPerRowA * 32;  // chunks between one lane's consecutive chunks of a row
constexpr int kLoadsInFlightA = 8;                 // K3: 7168 / 8 / 128 = 7 chunks per lane, all in one batch
constexpr int kThreadsB = 256, kRowsPerGroupB = 4;
// Shared memory a block may opt into on compute capability 9.0 (227 KB) less kernel A's static part.
constexpr int kMaxDynamicSmemBytes = 227 * 1024 - 1024;

// Eight bf16 (one 16-byte chunk, element 0 in the low half of .x) to fp32, exactly.
__device__ __forceinline__ void bf16x8_to_f32(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    f[2 * j] = __uint_as_float(w[j] << 16);
    f[2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
  }
}

// Launch A: row `row` of [W_fa; W_b] (rank + heads rows) against the T tokens of x.
template <int T>
__global__ void __launch_bounds__(kThreadsA)
    kda_gate_low_rank_and_beta(const bf16* __restrict__ x, int64_t x_stride, const bf16* __restrict__ w_fa,
                               const bf16* __restrict__ w_b, int hidden, int rank, int heads, bf16* __restrict__ fa,
                               float* __restrict__ b) {
  extern __shared__ uint4 x_s[];  // [T, hidden / 8] 16-byte chunks
  __shared__ float partial_s[kRowsPerBlockA][kWarpsPerRowA][T];
  const int chunks = hidden / 8;
  for (int i = threadIdx.x; i < T * chunks; i += kThreadsA) {
    const int t = i / chunks, c = i - t * chunks;
    x_s[i] = *reinterpret_cast<const uint4*>(x + t * x_stride + int64_t(c) * 8);
  }
  __syncthreads();

  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int row_in_block = warp / kWarpsPerRowA, quarter = warp % kWarpsPerRowA;
  const int rows = rank + heads;
  const int row = int(blockIdx.x) * kRowsPerBlockA + row_in_block;
  float acc[T];
#pragma unroll
  for (int t = 0; t < T; ++t) acc[t] = 0.0f;
  if (row < rows) {
    const uint4* w =
        reinterpret_cast<const uint4*>(row < rank ? w_fa + int64_t(row) * hidden : w_b + int64_t(row - rank) * hidden);
    for (int c0 = quarter * 32 + lane; c0 < chunks; c0 += kLoadsInFlightA * kChunkStrideA) {
      uint4 wv[kLoadsInFlightA];
#pragma unroll
      for (int u = 0; u < kLoadsInFlightA; ++u) {
        const int c = c0 + u * kChunkStrideA;
        wv[u] = c < chunks ? __ldg(w + c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kLoadsInFlightA; ++u) {
        const int c = c0 + u * kChunkStrideA;
        if (c < chunks) {
          float wf[8];
          bf16x8_to_f32(wv[u], wf);
#pragma unroll
          for (int t = 0; t < T; ++t) {
            float xf[8];
            bf16x8_to_f32(x_s[t * chunks + c], xf);
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[t] = fmaf(wf[j], xf[j], acc[t]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) acc[t] += __shfl_xor_sync(0xFFFFFFFFu, acc[t], offset);
  }
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < T; ++t) partial_s[row_in_block][quarter][t] = acc[t];
  }
  __syncthreads();
  if (int(threadIdx.x) < kRowsPerBlockA * T) {
    const int rb = int(threadIdx.x) / T, t = int(threadIdx.x) % T;
    const int out_row = int(blockIdx.x) * kRowsPerBlockA + rb;
    if (out_row < rows) {
      float sum = 0.0f;
#pragma unroll
      for (int q = 0; q < kWarpsPerRowA; ++q) sum += partial_s[rb][q][t];
      if (out_row < rank) {
        fa[int64_t(t) * rank + out_row] = __float2bfloat16_rn(sum);
      } else {
        b[int64_t(t) * heads + (out_row - rank)] = sum;
      }
    }
  }
}

// Launch B: f = fa · W_fbᵀ. A group of `group_lanes` lanes (a power of two ≥ rank / 8, ≤ 32) per row, lane c holding
// chunk c of the row; the group takes rows row0 + k·groups for k < kRowsPerGroupB.
template <int T>
__global__ void __launch_bounds__(kThreadsB)
    kda_gate_forget_up(const bf16* __restrict__ fa, const bf16* __restrict__ w_fb, int rank, int projection,
                       int group_lanes, float* __restrict__ f) {
  __shared__ __align__(16) float fa_s[T * kKdaGateProjMaxRank];  // [T, rank]
  for (int i = threadIdx.x; i < T * rank; i += kThreadsB) fa_s[i] = __bfloat162float(fa[i]);
  __syncthreads();

  const int chunks = rank / 8;
  const int groups = kThreadsB / group_lanes;
  const int group = int(threadIdx.x) / group_lanes, c = int(threadIdx.x) % group_lanes;
  const int64_t row0 = int64_t(blockIdx.x) * groups * kRowsPerGroupB + group;
  float wf[kRowsPerGroupB][8];
  {
    uint4 wv[kRowsPerGroupB];
#pragma unroll
    for (int k = 0; k < kRowsPerGroupB; ++k) {
      const int64_t row = row0 + int64_t(k) * groups;
      wv[k] = c < chunks && row < projection ? __ldg(reinterpret_cast<const uint4*>(w_fb + row * rank) + c)
                                             : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kRowsPerGroupB; ++k) bf16x8_to_f32(wv[k], wf[k]);
  }
  float acc[kRowsPerGroupB][T];
#pragma unroll
  for (int k = 0; k < kRowsPerGroupB; ++k)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[k][t] = 0.0f;
  if (c < chunks) {
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const float4 lo = *reinterpret_cast<const float4*>(fa_s + t * rank + c * 8);
      const float4 hi = *reinterpret_cast<const float4*>(fa_s + t * rank + c * 8 + 4);
      const float a[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int k = 0; k < kRowsPerGroupB; ++k)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[k][t] = fmaf(wf[k][j], a[j], acc[k][t]);
    }
  }
  // Sums over the group's lanes (xor offsets below group_lanes stay inside the aligned group); every lane ends
  // with the sums, and the writes are spread over the group's lanes.
#pragma unroll
  for (int k = 0; k < kRowsPerGroupB; ++k) {
#pragma unroll
    for (int t = 0; t < T; ++t) {
      for (int offset = group_lanes / 2; offset > 0; offset >>= 1)
        acc[k][t] += __shfl_xor_sync(0xFFFFFFFFu, acc[k][t], offset);
      const int64_t row = row0 + int64_t(k) * groups;
      if (row < projection && c == (k * T + t) % group_lanes) f[int64_t(t) * projection + row] = acc[k][t];
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <int T>
cudaError_t launch(const bf16* x, int64_t x_stride, const bf16* w_fa, const bf16* w_fb, const bf16* w_b, int hidden,
                   int rank, int projection, int heads, bf16* fa, float* f, float* b, cudaStream_t stream) {
  const int smem_bytes = T * hidden * int(sizeof(bf16));
  auto* low_rank = kda_gate_low_rank_and_beta<T>;
  if (smem_bytes > 48 * 1024) {
    // A host-side attribute, not a stream operation: allowed while a stream is being captured.
    const cudaError_t status = cudaFuncSetAttribute(low_rank, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (status != cudaSuccess) return status;
  }
  const int rows = rank + heads;
  low_rank<<<unsigned((rows + kRowsPerBlockA - 1) / kRowsPerBlockA), kThreadsA, size_t(smem_bytes), stream>>>(
      x, x_stride, w_fa, w_b, hidden, rank, heads, fa, b);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  int group_lanes = 1;
  while (group_lanes < rank / 8) group_lanes *= 2;
  const int64_t rows_per_block = int64_t(kThreadsB / group_lanes) * kRowsPerGroupB;
  const int64_t blocks = (projection + rows_per_block - 1) / rows_per_block;
  kda_gate_forget_up<T><<<unsigned(blocks), kThreadsB, 0, stream>>>(fa, w_fb, rank, projection, group_lanes, f);
  return cudaGetLastError();
}

}  // namespace

bool kda_gate_proj_supported(const bf16* x, int64_t x_stride, const bf16* w_fa, const bf16* w_fb, const bf16* w_b,
                             int tokens, int hidden, int rank, int projection, int heads) {
  return tokens >= 1 && tokens <= kKdaGateProjMaxTokens && hidden > 0 && hidden % 8 == 0 &&
         int64_t(tokens) * hidden * int64_t(sizeof(bf16)) <= kMaxDynamicSmemBytes && x_stride >= hidden &&
         x_stride % 8 == 0 && rank > 0 && rank % 8 == 0 && rank <= kKdaGateProjMaxRank && projection > 0 && heads > 0 &&
         x && w_fa && w_fb && w_b && aligned16(x) && aligned16(w_fa) && aligned16(w_fb) && aligned16(w_b);
}

cudaError_t kda_gate_proj_bf16(const bf16* x, int64_t x_stride, const bf16* w_fa, const bf16* w_fb, const bf16* w_b,
                               int tokens, int hidden, int rank, int projection, int heads, bf16* fa, float* f,
                               float* b, cudaStream_t stream) {
  if (!kda_gate_proj_supported(x, x_stride, w_fa, w_fb, w_b, tokens, hidden, rank, projection, heads) || !fa || !f ||
      !b) {
    return cudaErrorInvalidValue;
  }
  switch (tokens) {
    case 1: return launch<1>(x, x_stride, w_fa, w_fb, w_b, hidden, rank, projection, heads, fa, f, b, stream);
    case 2: return launch<2>(x, x_stride, w_fa, w_fb, w_b, hidden, rank, projection, heads, fa, f, b, stream);
    case 3: return launch<3>(x, x_stride, w_fa, w_fb, w_b, hidden, rank, projection, heads, fa, f, b, stream);
    case 4: return launch<4>(x, x_stride, w_fa, w_fb, w_b, hidden, rank, projection, heads, fa, f, b, stream);
    case 5: return launch<5>(x, x_stride, w_fa, w_fb, w_b, hidden, rank, projection, heads, fa, f, b, stream);
    case 6: return launch<6>(x, x_stride, w_fa, w_fb, w_b, hidden, rank, projection, heads, fa, f, b, stream);
    case 7: return launch<7>(x, x_stride, w_fa, w_fb, w_b, hidden, rank, projection, heads, fa, f, b, stream);
    default: return launch<8>(x, x_stride, w_fa, w_fb, w_b, hidden, rank, projection, heads, fa, f, b, stream);
  }
}

}  // namespace k3::kernels
