#include "kernels/mla_decode_wgmma_narrow.h"

#include "kernels/mla_cache_tensor_map.h"
#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_rows.h"
#include "kernels/ptx/mbarrier_sm90.h"
#include "kernels/ptx/ptx_mma.h"
#include "kernels/ptx/shared_memory_config.h"
#include "kernels/ptx/sm90a_device.h"
#include "kernels/ptx/wgmma_sm90.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

constexpr int kLatent = kMlaDecodeLatentDim;
constexpr int kWidth = kMlaDecodeCacheWidth;
constexpr int kTileTokens = 64;                  // M of the score product, K of the output product
constexpr int kColumnBlocks = kWidth / 64;       // 9 SW128 blocks of 64 columns per tile and Q row
constexpr int kOutputBlocks = kLatent / 64;      // 8: the output product's m-tiles, column blocks 0-7
constexpr int kBlockBytes = kTileTokens * 128;   // 8192: one column block of a tile
constexpr int kConsumerThreads = 128;            // warpgroup 0
constexpr int kThreads = kConsumerThreads + 32;  // and the loader warp
constexpr int kScoreChains = 3;                  // independent score accumulators (column blocks c % 3)
constexpr int kMaxDynamicSharedBytes = 232448;   // an H200 block's 227 KiB
constexpr int kReferenceMultiprocessors = 132;   // an H200's, for the split count without a device
constexpr int kConsumerBarrier = 1;              // named barrier of warpgroup 0

// Shared memory from a 1024-byte aligned base: Q^T (9 blocks of kN head rows) | P (kN head rows of 64 tokens) | the
// ring of column blocks | the warps' column reductions [4][kN] fp32 | the ring's full and empty mbarriers.
template <int kN>
struct Smem {
  static constexpr int kQBlockBytes = kN * 128;
  static constexpr int kQ = 0;
  static constexpr int kP = kQ + kColumnBlocks * kQBlockBytes;
  static constexpr int kRing = kP + kQBlockBytes;
  static constexpr int kSmallBytesMax = 4 * kN * 4 + 2 * 32 * 8;  // the reductions and up to 32 ring slots' barriers
  static constexpr int kRingBlocks = (kMaxDynamicSharedBytes - 1024 - kRing - kSmallBytesMax) / kBlockBytes;
  static constexpr int kReduce = kRing + kRingBlocks * kBlockBytes;
  static constexpr int kBarriers = kReduce + 4 * kN * 4;
  static constexpr int kBytes = kBarriers + 2 * kRingBlocks * 8;
  static constexpr int kAllocBytes = kBytes + 1024;  // slack to align the base
};
static_assert(Smem<8>::kRingBlocks == 26 && Smem<16>::kRingBlocks == 25, "about three tiles in the ring");
static_assert(Smem<8>::kAllocBytes <= kMaxDynamicSharedBytes && Smem<16>::kAllocBytes <= kMaxDynamicSharedBytes,
              "one block per SM");
static_assert(Smem<8>::kRing % 1024 == 0 && Smem<16>::kRing % 1024 == 0, "SW128 blocks must be 1024-byte aligned");

using ptx::cp_async_16;

__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// Asks the L2 for `bytes` (a multiple of 16) from `src` (no completion to wait for).
__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
#endif
}

// One piece of a column block (box_rows cached rows x 64 columns, inside one page) by TMA, counted on `barrier`.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap& map, int column, int row, uint32_t barrier) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(column), "r"(row), "r"(barrier)
      : "memory");
#endif
}

// The ring: column block c of the split's tile t is use u = 9t + c, in slot u % R, its (u / R)-th fill.
template <int kN>
struct Ring {
  static constexpr int kR = Smem<kN>::kRingBlocks;
  uint32_t base;  // the aligned shared-memory base
  __device__ uint32_t block(int u) const { return base + Smem<kN>::kRing + uint32_t(u % kR) * kBlockBytes; }
  __device__ uint32_t full(int u) const { return base + Smem<kN>::kBarriers + 8u * uint32_t(u % kR); }
  __device__ uint32_t empty(int u) const { return base + Smem<kN>::kBarriers + 8u * uint32_t(kR + u % kR); }
  __device__ static uint32_t parity(int u) { return uint32_t((u / kR) & 1); }
};

// Grid: x = split, y = sequence. Threads 0-127 compute (warp w, lane 4g + t: accumulator rows 16w + g and
// 16w + g + 8 — tokens of S^T, latent columns of O^T — and columns 8j + 2t (+1), the heads); 128-159 load.
template <int kN>
__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_wgmma_narrow_split_kv(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ pages,
                                     const int32_t* __restrict__ page_table, const int32_t* __restrict__ context_tokens,
                                     float scale_log2, int heads, int page_tokens, int max_pages, int max_context,
                                     int splits, float* __restrict__ partial_out, float2* __restrict__ partial_stats,
                                     float* __restrict__ out, const __grid_constant__ CUtensorMap cache_map,
                                     int tma_box_rows) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = Smem<kN>;
  constexpr int kCols = kN / 4;  // accumulator columns per thread: (j, e) at 2j + e
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  const Ring<kN> ring{base};

  const int split = blockIdx.x, b = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const mla_wgmma::SplitTiles range =
      mla_wgmma::split_tiles<kTileTokens>(context_tokens, b, max_context, splits, split);
  const int context = range.context, tile_begin = range.begin;
  const int n = range.end - tile_begin;

  if (n == 0) {  // an empty split: (−∞, 0), which the combine skips; alone, zeros
    if (threadIdx.x < heads) {
      if (splits > 1) {
        partial_stats[(int64_t(b) * splits + split) * heads + threadIdx.x] = make_float2(-INFINITY, 0.0f);
      } else {
        float* dst = out + (int64_t(b) * heads + threadIdx.x) * kLatent;
        for (int c = 0; c < kLatent; ++c) dst[c] = 0.0f;
      }
    }
    return;
  }

  if (threadIdx.x == 0) {
    for (int s = 0; s < Ring<kN>::kR; ++s) {
      mbarrier::init(ring.full(s), 1);
      mbarrier::init(ring.empty(s), 1);
    }
    mbarrier::fence_init();
  }
  __syncthreads();

  if (warp == kConsumerThreads / 32) {  // the loader warp
    const int pieces = tma_box_rows > 0 ? kTileTokens / tma_box_rows : 0;
    for (int t = 0; t < n; ++t) {
      const int tile = tile_begin + t;
      const bool by_tma = pieces > 0 && (tile + 1) * kTileTokens <= context;
      int cache_rows[kTileTokens / 16];  // the pieces' first cache rows
#pragma unroll
      for (int p = 0; p < kTileTokens / 16; ++p) {
        const int token = tile * kTileTokens + p * tma_box_rows;
        cache_rows[p] = by_tma && p < pieces ? page_table[int64_t(b) * max_pages + token / page_tokens] * page_tokens +
                                                   token % page_tokens
                                             : 0;
      }
      // The tile asked of the L2 before the waits for its slots, so that its DRAM reads overlap them (as
      // wgmma_cluster's loader does) and the copies into the ring read the L2.
      if (by_tma && lane == 0)
#pragma unroll
        for (int p = 0; p < kTileTokens / 16; ++p)
          if (p < pieces) prefetch_l2(pages + int64_t(cache_rows[p]) * kWidth, uint32_t(tma_box_rows) * kWidth * 2);
      // Block 8 first: the scores read it first and release it first.
      for (int k = 0; k < kColumnBlocks; ++k) {
        const int c = k == 0 ? kColumnBlocks - 1 : k - 1;
        const int u = kColumnBlocks * t + c;
        if (u >= Ring<kN>::kR) mbarrier::wait(ring.empty(u), Ring<kN>::parity(u) ^ 1u);
        if (by_tma) {
          if (lane == 0) {
            mbarrier::arrive_expect_bytes(ring.full(u), kBlockBytes);
#pragma unroll
            for (int p = 0; p < kTileTokens / 16; ++p)
              if (p < pieces)
                tma_load(ring.block(u) + p * tma_box_rows * 128, cache_map, 64 * c, cache_rows[p], ring.full(u));
          }
        } else {  // 64 rows x 8 chunks of 16 bytes, rows past the context zero-filled
          for (int i = lane; i < kTileTokens * 8; i += 32) {
            const int row = i >> 3, chunk = i & 7, token = tile * kTileTokens + row;
            const bool valid = token < context;
            const __nv_bfloat16* src =
                valid ? mla_wgmma::token_row(pages, page_table, b, max_pages, page_tokens, token) + 64 * c + 8 * chunk
                      : pages;
            cp_async_16(ring.block(u) + row * 128 + ((chunk ^ (row & 7)) << 4), src, valid);
          }
          ptx::cp_async_commit();
          ptx::cp_async_wait_all();
          wgmma::fence_proxy_async_shared();  // the generic-proxy copies, for the products
          __syncwarp();
          if (lane == 0) mbarrier::arrive(ring.full(u));
        }
      }
    }
    return;
  }

  const int w4 = warp, g = lane >> 2, t4 = lane & 3;
  float* reduce = reinterpret_cast<float*>(smem + S::kReduce);  // [4 warps][kN]
  const uint32_t q_smem = base + S::kQ, p_smem = base + S::kP;
  unsigned char* p_bytes = smem + S::kP;
  const auto group_sync = [&] { named_barrier_sync(kConsumerBarrier, kConsumerThreads); };

  // Q^T: the head rows, 72 chunks of 16 bytes each, heads past the last zero-filled.
  for (int i = threadIdx.x; i < kN * 72; i += kConsumerThreads) {
    const int row = i / 72, chunk = i % 72;
    const bool valid = row < heads;
    const __nv_bfloat16* src = q + (int64_t(b) * heads + (valid ? row : 0)) * kWidth + (valid ? 8 * chunk : 0);
    cp_async_16(q_smem + wgmma::sw128_offset(kN, row, chunk), src, valid);
  }
  ptx::cp_async_commit();
  ptx::cp_async_wait_all();
  wgmma::fence_proxy_async_shared();
  group_sync();

  float s[kScoreChains][kN / 2];
  float o[kOutputBlocks][kN / 2];
#pragma unroll
  for (int mt = 0; mt < kOutputBlocks; ++mt)
#pragma unroll
    for (int k = 0; k < kN / 2; ++k) o[mt][k] = 0.0f;
  float m_run[kCols], l_part[kCols];  // per column: running max (base 2), the thread's share of the sum
#pragma unroll
  for (int k = 0; k < kCols; ++k) m_run[k] = -INFINITY, l_part[k] = 0.0f;

  // S^T(t) into s: block 8, then 0-7, each once it landed, into kScoreChains accumulators taking the products in
  // turn (so that consecutive products do not wait for each other's accumulators); one group.
  const auto issue_scores = [&](int t) {
#pragma unroll
    for (int chain = 0; chain < kScoreChains; ++chain) {
#pragma unroll
      for (int k = 0; k < kN / 2; ++k) s[chain][k] = 0.0f;
      wgmma::fence_registers(s[chain]);
    }
#pragma unroll
    for (int k = 0; k < kColumnBlocks; ++k) {
      const int c = k == 0 ? kColumnBlocks - 1 : k - 1;
      const int u = kColumnBlocks * t + c;
      mbarrier::wait(ring.full(u), Ring<kN>::parity(u));
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma::mma_ss<0, 0>(s[(4 * k + kk) % kScoreChains], wgmma::sw128_descriptor(ring.block(u) + 32 * kk, 16, 1024),
                            wgmma::sw128_descriptor(q_smem + c * S::kQBlockBytes + 32 * kk, 16, 1024));
    }
    wgmma::commit_group();
  };
  const auto release = [&](int u) {
    if (threadIdx.x == 0) mbarrier::arrive(ring.empty(u));
  };

  issue_scores(0);
  wgmma::wait_group<0>();
  for (int t = 0; t < n; ++t) {
#pragma unroll
    for (int chain = 0; chain < kScoreChains; ++chain) wgmma::fence_registers(s[chain]);
    release(kColumnBlocks * t + kColumnBlocks - 1);  // block 8: only the scores read it

    // Softmax of tile t: y = scale · s in base 2, rows past the context masked (only a sequence's last tile).
    const int token_lo = (tile_begin + t) * kTileTokens + 16 * w4 + g;
    const bool valid_lo = token_lo < context, valid_hi = token_lo + 8 < context;
    float y[kN / 2];
#pragma unroll
    for (int k = 0; k < kN / 2; ++k)
      y[k] = ((k & 2) ? valid_hi : valid_lo) ? (s[0][k] + s[1][k] + s[2][k]) * scale_log2 : -INFINITY;
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float m = fmaxf(y[4 * j + e], y[4 * j + 2 + e]);
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
        if (g == 0) reduce[w4 * kN + 8 * j + 2 * t4 + e] = m;
      }
    group_sync();
    float alpha[kCols], m_new[kCols];
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = 8 * j + 2 * t4 + e, k = 2 * j + e;
        const float tile_max = fmaxf(fmaxf(reduce[c], reduce[kN + c]), fmaxf(reduce[2 * kN + c], reduce[3 * kN + c]));
        m_new[k] = fmaxf(m_run[k], tile_max);  // finite: every tile has a token in the context
        alpha[k] = exp2f(m_run[k] - m_new[k]);
      }
      // P in bf16 into [head][token] (K-major, one SW128 block), the sums of exactly the rounded values.
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = 8 * j + 2 * t4 + e, k = 2 * j + e;
        float sum = 0.0f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = 16 * w4 + g + 8 * h;
          const __nv_bfloat16 p = __float2bfloat16_rn(exp2f(y[4 * j + 2 * h + e] - m_new[k]));
          sum += __bfloat162float(p);
          *reinterpret_cast<__nv_bfloat16*>(p_bytes + wgmma::sw128_offset(kN, c, row >> 3) + (row & 7) * 2) = p;
        }
        l_part[k] = l_part[k] * alpha[k] + sum;
        m_run[k] = m_new[k];
      }
#pragma unroll
    for (int mt = 0; mt < kOutputBlocks; ++mt)
#pragma unroll
      for (int j = 0; j < kN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][4 * j + e] *= alpha[2 * j + (e & 1)];
    wgmma::fence_proxy_async_shared();
    group_sync();  // P written, the maxima read

    // O^T += C^T · P^T: the k16 steps outer, so that consecutive products go to different m-tiles; one group. Then
    // S^T(t + 1), so that the tensor pipe runs both back to back (its blocks are in: the ring holds tiles t, t + 1
    // and most of t + 2).
#pragma unroll
    for (int mt = 0; mt < kOutputBlocks; ++mt) wgmma::fence_registers(o[mt]);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int mt = 0; mt < kOutputBlocks; ++mt)
        wgmma::mma_ss<1, 0>(o[mt],
                            wgmma::sw128_descriptor(ring.block(kColumnBlocks * t + mt) + 2048 * kk, kBlockBytes, 1024),
                            wgmma::sw128_descriptor(p_smem + 32 * kk, 16, 1024));
    wgmma::commit_group();
    if (t + 1 < n) {
      issue_scores(t + 1);
      wgmma::wait_group<1>();
    } else {
      wgmma::wait_group<0>();
    }
#pragma unroll
    for (int mt = 0; mt < kOutputBlocks; ++mt) release(kColumnBlocks * t + mt);
    wgmma::wait_group<0>();
#pragma unroll
    for (int mt = 0; mt < kOutputBlocks; ++mt) wgmma::fence_registers(o[mt]);
  }

  // The sums per head: 8 lanes, then the 4 warps through `reduce` (its last maxima read before the last P barrier).
  float l_run[kCols];
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float sum = l_part[2 * j + e];
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      if (g == 0) reduce[w4 * kN + 8 * j + 2 * t4 + e] = sum;
    }
  group_sync();
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = 8 * j + 2 * t4 + e;
      l_run[2 * j + e] = reduce[c] + reduce[kN + c] + reduce[2 * kN + c] + reduce[3 * kN + c];
    }

#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = 8 * j + 2 * t4 + e, k = 2 * j + e;
      if (c >= heads) continue;
      const float sum = l_run[k];
      float factor = 1.0f;
      float* dst;
      if (splits == 1) {
        factor = sum > 0.0f ? 1.0f / sum : 0.0f;
        dst = out + (int64_t(b) * heads + c) * kLatent;
      } else {
        dst = partial_out + ((int64_t(b) * splits + split) * heads + c) * kLatent;
        if (w4 == 0 && g == 0) partial_stats[(int64_t(b) * splits + split) * heads + c] = make_float2(m_run[k], sum);
      }
#pragma unroll
      for (int mt = 0; mt < kOutputBlocks; ++mt) {
        const int column = 64 * mt + 16 * w4 + g;
        dst[column] = o[mt][4 * j + e] * factor;
        dst[column + 8] = o[mt][4 * j + 2 + e] * factor;
      }
    }
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a: the host side refuses before launching
#endif
}

template <int kN>
cudaError_t configure_kernel(int device) {
  static std::atomic<uint64_t> configured{0};
  return allow_dynamic_shared_memory_once(mla_decode_wgmma_narrow_split_kv<kN>, Smem<kN>::kAllocBytes, device,
                                          configured);
}

template <int kN>
cudaError_t launch(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages, const int32_t* page_table,
                   const int32_t* context_tokens, float scale_log2, const MlaDecodeShape& shape, int splits,
                   float* partial_out, float2* partial_stats, float* out, cudaStream_t stream, int device) {
  const cudaError_t status = configure_kernel<kN>(device);
  if (status != cudaSuccess) return status;
  CUtensorMap cache_map{};
  const int box_rows = mla_cache_tensor_map(cache_map, cache_pages, shape.page_tokens, kTileTokens, 4);
  const dim3 grid(unsigned(splits), unsigned(shape.batch));
  mla_decode_wgmma_narrow_split_kv<kN><<<grid, kThreads, Smem<kN>::kAllocBytes, stream>>>(
      q, cache_pages, page_table, context_tokens, scale_log2, shape.heads, shape.page_tokens,
      shape.max_pages_per_sequence, int(shape.max_context_tokens), splits, partial_out, partial_stats, out, cache_map,
      box_rows);
  return cudaGetLastError();
}

}  // namespace

int mla_decode_wgmma_narrow_num_splits(const MlaDecodeShape& shape) {
  const int common = mla_decode_num_splits(shape);  // 1 for an invalid or empty shape
  if (common == 1) return 1;
  const int found = current_device_multiprocessors();
  const int64_t sms = found > 0 ? found : kReferenceMultiprocessors;
  const int64_t tiles = (shape.max_context_tokens + kTileTokens - 1) / kTileTokens;
  int best = 1;
  int64_t best_cost = INT64_MAX;
  for (int s = 1; s <= common; ++s) {
    const int64_t waves = (int64_t(shape.batch) * s + sms - 1) / sms;
    const int64_t cost = waves * ((tiles + s - 1) / s + 1);  // tiles a block's SM spends, one of them filling
    if (cost < best_cost) best = s, best_cost = cost;
  }
  return best;
}

cudaError_t mla_decode_wgmma_narrow_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                               const int32_t* page_table, const int32_t* context_tokens,
                                               float scale_log2, const MlaDecodeShape& shape, int splits,
                                               float* partial_out, float2* partial_stats, float* out,
                                               cudaStream_t stream) {
  int device = 0;
  const cudaError_t status = mla_decode_wgmma_device(device);
  if (status != cudaSuccess) return status;
  if (shape.heads > kMlaDecodeNarrowMaxHeads) return cudaErrorInvalidValue;
  return shape.heads <= 8 ? launch<8>(q, cache_pages, page_table, context_tokens, scale_log2, shape, splits,
                                      partial_out, partial_stats, out, stream, device)
                          : launch<16>(q, cache_pages, page_table, context_tokens, scale_log2, shape, splits,
                                       partial_out, partial_stats, out, stream, device);
}

}  // namespace k3::kernels
