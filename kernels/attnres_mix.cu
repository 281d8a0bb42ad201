#include "kernels/attnres_mix.h"

#include "kernels/ptx/sm90a_device.h"

#include <cooperative_groups.h>

#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

constexpr int kThreads = 256;  // the scalar version's block
constexpr int kMaxSums = 2 * kAttnResMaxCandidates;

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Replaces v[0, count) of every thread by its sum over the block (any multiple of 32 threads up to 1024).
// count must be the same in every thread (it is: the candidate count), so the shuffles are warp-uniform.
template <int N>
__device__ void block_sums(float (&v)[N], int count) {
  __shared__ float partial[32][N];
  __shared__ float total[N];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (k < count) {
      const float s = warp_sum(v[k]);
      if (lane == 0) partial[warp][k] = s;
    }
  }
  __syncthreads();
  if (int(threadIdx.x) < count) {
    float s = 0.0f;
    for (int w = 0; w < warps; ++w) s += partial[w][threadIdx.x];
    total[threadIdx.x] = s;
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (k < count) v[k] = total[k];
  }
}

// The candidates' softmax weights from the block sums (sums[2c] = Σ v_c², sums[2c + 1] = Σ v_c · γ · w), in every
// thread (n ≤ 9 exponentials): prob[c] = exp(s_c − max s); returns 1 / Σ prob.
__device__ float softmax_weights(const float (&sums)[kMaxSums], int n, int64_t width, float eps_mix,
                                 float (&prob)[kAttnResMaxCandidates]) {
  float max_score = -INFINITY;
#pragma unroll
  for (int c = 0; c < kAttnResMaxCandidates; ++c) {
    prob[c] = 0.0f;
    if (c < n) {
      prob[c] = sums[2 * c + 1] * rsqrtf(sums[2 * c] / float(width) + eps_mix);
      max_score = fmaxf(max_score, prob[c]);
    }
  }
  float prob_total = 0.0f;
#pragma unroll
  for (int c = 0; c < kAttnResMaxCandidates; ++c) {
    if (c < n) {
      prob[c] = expf(prob[c] - max_score);
      prob_total += prob[c];
    }
  }
  return 1.0f / prob_total;
}

__global__ void attnres_mix_block_per_token(AttnResCandidates candidates, const __nv_bfloat16* query,
                                            const __nv_bfloat16* key_norm, float eps_mix,
                                            const __nv_bfloat16* norm_weight, float eps_norm, __nv_bfloat16* mix,
                                            int64_t mix_stride, __nv_bfloat16* normed, int64_t normed_stride,
                                            int64_t width) {
  const int64_t token = blockIdx.x;
  const int n = candidates.count;
  const __nv_bfloat16* v[kAttnResMaxCandidates];
#pragma unroll
  for (int c = 0; c < kAttnResMaxCandidates; ++c) {
    v[c] = c < n ? candidates.rows[c] + token * candidates.row_stride[c] : nullptr;
  }

  // Pass 1: sums[2c] = Σ v_c², sums[2c + 1] = Σ v_c · γ · w.
  float sums[kMaxSums];
#pragma unroll
  for (int k = 0; k < kMaxSums; ++k) sums[k] = 0.0f;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) {
    const float score_weight = __bfloat162float(key_norm[i]) * __bfloat162float(query[i]);
#pragma unroll
    for (int c = 0; c < kAttnResMaxCandidates; ++c) {
      if (c < n) {
        const float x = __bfloat162float(v[c][i]);
        sums[2 * c] += x * x;
        sums[2 * c + 1] += x * score_weight;
      }
    }
  }
  block_sums(sums, 2 * n);

  float prob[kAttnResMaxCandidates];
  const float inv_total = softmax_weights(sums, n, width, eps_mix, prob);

  // Pass 2: the mix over the raw candidates, stored bf16; Σ mix² of the stored values.
  __nv_bfloat16* mix_row = mix + token * mix_stride;
  float mix_sq[1] = {0.0f};
  for (int64_t i = threadIdx.x; i < width; i += kThreads) {
    float m = 0.0f;
#pragma unroll
    for (int c = 0; c < kAttnResMaxCandidates; ++c) {
      if (c < n) m += prob[c] * __bfloat162float(v[c][i]);
    }
    const __nv_bfloat16 stored = __float2bfloat16_rn(m * inv_total);
    mix_row[i] = stored;
    const float r = __bfloat162float(stored);
    mix_sq[0] += r * r;
  }
  block_sums(mix_sq, 1);

  // Pass 3: RMSNorm of the stored mix. Each thread re-reads only the elements it wrote in pass 2.
  const float inv_rms = rsqrtf(mix_sq[0] / float(width) + eps_norm);
  __nv_bfloat16* normed_row = normed + token * normed_stride;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) {
    normed_row[i] = __float2bfloat16_rn(__bfloat162float(mix_row[i]) * inv_rms * __bfloat162float(norm_weight[i]));
  }
}

// One thread per 8 consecutive elements (16-byte loads), the whole row in one block of up to 1024
// threads: the same three passes with a third of the memory instructions and every SM-level load in
// flight at once — the decode case, where one block per token leaves the GPU nearly idle.
__device__ void unpack8(const uint4& raw, float (&out)[8]) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(pairs[j]);
    out[2 * j] = f.x;
    out[2 * j + 1] = f.y;
  }
}

// The vec8 versions' 8 elements from element i of the mixer's weights: γ · w for the scores, and the norm weight as
// loaded (with the other loads, not after the reductions).
__device__ void load_weights8(const __nv_bfloat16* query, const __nv_bfloat16* key_norm,
                              const __nv_bfloat16* norm_weight, int64_t i, float (&score_weight)[8],
                              uint4& norm_weight_raw) {
  norm_weight_raw = *reinterpret_cast<const uint4*>(norm_weight + i);
  float q[8], k[8];
  unpack8(*reinterpret_cast<const uint4*>(query + i), q);
  unpack8(*reinterpret_cast<const uint4*>(key_norm + i), k);
#pragma unroll
  for (int j = 0; j < 8; ++j) score_weight[j] = q[j] * k[j];
}

// The vec8 versions' 8 elements x of one candidate into its sums: Σ x² and Σ x · (γ · w).
__device__ __forceinline__ void add_candidate8(const float (&x)[8], const float (&score_weight)[8], float& squares,
                                               float& score) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    squares += x[j] * x[j];
    score += x[j] * score_weight[j];
  }
}

// The vec8 versions' 8 elements: the mix m · inv_total rounded to bf16 and stored at dst (16 bytes), the rounded
// values left in m; returns their sum of squares.
__device__ float store_mix8(float (&m)[8], float inv_total, __nv_bfloat16* dst) {
  uint4 packed;
  __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(&packed);
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    out[j] = __floats2bfloat162_rn(m[2 * j] * inv_total, m[2 * j + 1] * inv_total);
    const float2 r = __bfloat1622float2(out[j]);
    m[2 * j] = r.x;
    m[2 * j + 1] = r.y;
    sum_sq += r.x * r.x + r.y * r.y;
  }
  *reinterpret_cast<uint4*>(dst) = packed;
  return sum_sq;
}

// m · inv_rms · the 8 norm weights (as loaded) stored as bf16 at dst.
__device__ void store_normed8(const float (&m)[8], float inv_rms, const uint4& weight_raw, __nv_bfloat16* dst) {
  float w[8];
  unpack8(weight_raw, w);
  uint4 packed;
  __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    out[j] = __floats2bfloat162_rn(m[2 * j] * inv_rms * w[2 * j], m[2 * j + 1] * inv_rms * w[2 * j + 1]);
  }
  *reinterpret_cast<uint4*>(dst) = packed;
}

__global__ void attnres_mix_vec8_block_per_token(AttnResCandidates candidates, const __nv_bfloat16* query,
                                                 const __nv_bfloat16* key_norm, float eps_mix,
                                                 const __nv_bfloat16* norm_weight, float eps_norm, __nv_bfloat16* mix,
                                                 int64_t mix_stride, __nv_bfloat16* normed, int64_t normed_stride,
                                                 int64_t width) {
  const int64_t token = blockIdx.x;
  const int n = candidates.count;
  const int64_t i = int64_t(threadIdx.x) * 8;  // this thread's 8 elements
  const bool active = i < width;
  float score_weight[8] = {};
  uint4 norm_weight_raw = make_uint4(0, 0, 0, 0);
  if (active) load_weights8(query, key_norm, norm_weight, i, score_weight, norm_weight_raw);
  float sums[kMaxSums];
#pragma unroll
  for (int k = 0; k < kMaxSums; ++k) sums[k] = 0.0f;
#pragma unroll
  for (int c = 0; c < kAttnResMaxCandidates; ++c) {
    if (c < n && active) {
      float x[8];
      unpack8(*reinterpret_cast<const uint4*>(candidates.rows[c] + token * candidates.row_stride[c] + i), x);
      add_candidate8(x, score_weight, sums[2 * c], sums[2 * c + 1]);
    }
  }
  block_sums(sums, 2 * n);

  float prob[kAttnResMaxCandidates];
  const float inv_total = softmax_weights(sums, n, width, eps_mix, prob);

  // The mix, rounded to bf16 as stored, kept in registers for the norm.
  float m[8] = {};
  float mix_sq[1] = {0.0f};
  if (active) {
#pragma unroll
    for (int c = 0; c < kAttnResMaxCandidates; ++c) {
      if (c < n) {
        float x[8];
        unpack8(*reinterpret_cast<const uint4*>(candidates.rows[c] + token * candidates.row_stride[c] + i), x);
#pragma unroll
        for (int j = 0; j < 8; ++j) m[j] += prob[c] * x[j];
      }
    }
    mix_sq[0] = store_mix8(m, inv_total, mix + token * mix_stride + i);
  }
  block_sums(mix_sq, 1);
  if (active) {
    store_normed8(m, rsqrtf(mix_sq[0] / float(width) + eps_norm), norm_weight_raw, normed + token * normed_stride + i);
  }
}

// v[0, count) — block sums, the same in every thread — replaced by their sums over the cluster's blocks, added in rank
// order so that every block gets the same floats: thread 0 posts them to `post`, and after the cluster barrier thread
// k < count adds the blocks' k-th posts through distributed shared memory into `total`. `post` must not be written
// again before the kernel's last cluster barrier (another block may still be reading it).
template <int N>
__device__ void cluster_sums(float (&v)[N], int count, float (&post)[N], float (&total)[N]) {
#if __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (k < count) post[k] = v[k];
    }
  }
  cluster.sync();
  if (int(threadIdx.x) < count) {
    float sum = 0.0f;
    for (int rank = 0; rank < kAttnResClusterBlocks; ++rank) sum += *cluster.map_shared_rank(&post[threadIdx.x], rank);
    total[threadIdx.x] = sum;
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (k < count) v[k] = total[k];
  }
#endif
}

// grid (kAttnResClusterBlocks, tokens) in clusters of kAttnResClusterBlocks: cluster rank r takes the r-th of as many
// contiguous parts of the row's 16-byte units, a thread per unit, its candidates' values kept in registers from the
// scores to the mix.
// vec8's rows (width / 8 ≤ 1024 units) give at most 128 units, so 128 threads, per block.
__global__ void __launch_bounds__(128)
    attnres_mix_vec8_cluster_per_token(AttnResCandidates candidates, const __nv_bfloat16* query,
                                       const __nv_bfloat16* key_norm, float eps_mix, const __nv_bfloat16* norm_weight,
                                       float eps_norm, __nv_bfloat16* mix, int64_t mix_stride, __nv_bfloat16* normed,
                                       int64_t normed_stride, int64_t width) {
#if __CUDA_ARCH__ >= 900
  __shared__ float score_post[kMaxSums], score_total[kMaxSums], norm_post[1], norm_total[1];
  const int64_t token = blockIdx.y;
  const int n = candidates.count;
  const int64_t units = width / 8, units_per_block = (units + kAttnResClusterBlocks - 1) / kAttnResClusterBlocks;
  const int64_t unit = int64_t(cooperative_groups::this_cluster().block_rank()) * units_per_block + threadIdx.x;
  const bool active = threadIdx.x < units_per_block && unit < units;
  const int64_t i = unit * 8;  // this thread's 8 elements
  float score_weight[8] = {};
  uint4 norm_weight_raw = make_uint4(0, 0, 0, 0);
  if (active) load_weights8(query, key_norm, norm_weight, i, score_weight, norm_weight_raw);
  float x[kAttnResMaxCandidates][8];
  float sums[kMaxSums];
#pragma unroll
  for (int c = 0; c < kAttnResMaxCandidates; ++c) {
    sums[2 * c] = sums[2 * c + 1] = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) x[c][j] = 0.0f;
    if (c < n && active) {
      unpack8(*reinterpret_cast<const uint4*>(candidates.rows[c] + token * candidates.row_stride[c] + i), x[c]);
      add_candidate8(x[c], score_weight, sums[2 * c], sums[2 * c + 1]);
    }
  }
  block_sums(sums, 2 * n);
  cluster_sums(sums, 2 * n, score_post, score_total);

  float prob[kAttnResMaxCandidates];
  const float inv_total = softmax_weights(sums, n, width, eps_mix, prob);
  float m[8] = {};
  float mix_sq[1] = {0.0f};
  if (active) {
#pragma unroll
    for (int c = 0; c < kAttnResMaxCandidates; ++c) {
      if (c < n) {
#pragma unroll
        for (int j = 0; j < 8; ++j) m[j] += prob[c] * x[c][j];
      }
    }
    mix_sq[0] = store_mix8(m, inv_total, mix + token * mix_stride + i);
  }
  block_sums(mix_sq, 1);
  cluster_sums(mix_sq, 1, norm_post, norm_total);
  if (active) {
    store_normed8(m, rsqrtf(mix_sq[0] / float(width) + eps_norm), norm_weight_raw, normed + token * normed_stride + i);
  }
  cooperative_groups::this_cluster().sync();  // no block exits while another may still read its posts
#else
  __trap();  // the launcher takes this version only where clusters launch (compute capability ≥ 9.0)
#endif
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t attnres_mix_rmsnorm_bf16(const AttnResCandidates& candidates, const __nv_bfloat16* query,
                                     const __nv_bfloat16* key_norm, float eps_mix, const __nv_bfloat16* norm_weight,
                                     float eps_norm, __nv_bfloat16* mix, int64_t mix_row_stride, __nv_bfloat16* normed,
                                     int64_t normed_row_stride, int64_t tokens, int64_t width, cudaStream_t stream,
                                     AttnResAlgorithm algorithm) {
  if (tokens == 0) return cudaSuccess;
  if (tokens < 0 || tokens > INT32_MAX || width <= 0 || candidates.count < 1 ||
      candidates.count > kAttnResMaxCandidates || query == nullptr || key_norm == nullptr || norm_weight == nullptr ||
      mix == nullptr || normed == nullptr || mix_row_stride < width || normed_row_stride < width) {
    return cudaErrorInvalidValue;
  }
  for (int c = 0; c < candidates.count; ++c) {
    if (candidates.rows[c] == nullptr || candidates.row_stride[c] < width) return cudaErrorInvalidValue;
  }
  bool vec8 = width % 8 == 0 && width / 8 <= 1024 && mix_row_stride % 8 == 0 && normed_row_stride % 8 == 0 &&
              aligned16(query) && aligned16(key_norm) && aligned16(norm_weight) && aligned16(mix) && aligned16(normed);
  for (int c = 0; c < candidates.count; ++c) {
    vec8 = vec8 && candidates.row_stride[c] % 8 == 0 && aligned16(candidates.rows[c]);
  }
  const bool cluster_ok = vec8 && tokens <= 65535 && current_device_launches_clusters();  // tokens: the grid's y
  if (algorithm == AttnResAlgorithm::automatic) {
    algorithm = cluster_ok && tokens <= kAttnResClusterMaxTokens ? AttnResAlgorithm::vec8_cluster_per_token
                : vec8                                           ? AttnResAlgorithm::vec8_block_per_token
                                                                 : AttnResAlgorithm::block_per_token;
  }
  if ((algorithm == AttnResAlgorithm::vec8_block_per_token && !vec8) ||
      (algorithm == AttnResAlgorithm::vec8_cluster_per_token && !cluster_ok)) {
    return cudaErrorInvalidValue;
  }
  if (algorithm == AttnResAlgorithm::vec8_cluster_per_token) {
    const int64_t units_per_block = (width / 8 + kAttnResClusterBlocks - 1) / kAttnResClusterBlocks;
    const ClusterLaunch launch(dim3(kAttnResClusterBlocks, static_cast<unsigned>(tokens), 1),
                               dim3(static_cast<unsigned>((units_per_block + 31) / 32 * 32), 1, 1),
                               kAttnResClusterBlocks, stream);
    return cudaLaunchKernelEx(&launch.config, attnres_mix_vec8_cluster_per_token, candidates, query, key_norm, eps_mix,
                              norm_weight, eps_norm, mix, mix_row_stride, normed, normed_row_stride, width);
  }
  if (algorithm == AttnResAlgorithm::vec8_block_per_token) {
    const int threads = int((width / 8 + 31) / 32 * 32);
    attnres_mix_vec8_block_per_token<<<static_cast<unsigned>(tokens), threads, 0, stream>>>(
        candidates, query, key_norm, eps_mix, norm_weight, eps_norm, mix, mix_row_stride, normed, normed_row_stride,
        width);
    return cudaGetLastError();
  }
  attnres_mix_block_per_token<<<static_cast<unsigned>(tokens), kThreads, 0, stream>>>(
      candidates, query, key_norm, eps_mix, norm_weight, eps_norm, mix, mix_row_stride, normed, normed_row_stride,
      width);
  return cudaGetLastError();
}

}  // namespace k3::kernels
