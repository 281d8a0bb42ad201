#include "kernels/mla_decode_paged.h"
#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_alternating.h"
#include "kernels/mla_decode_wgmma_cluster.h"
#include "kernels/ptx/ptx_mma.h"
#include "kernels/ptx/shared_memory_config.h"
#include "kernels/ptx/sm90a_device.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

constexpr int kLatent = kMlaDecodeLatentDim;
constexpr int kWidth = kMlaDecodeCacheWidth;
constexpr int kRowBytes = kWidth * 2;       // 1152: one token row (or one head's query) in bf16
constexpr int kRowChunks = kRowBytes / 16;  // 72 chunks of 16 bytes
constexpr int kHeadsPerBlock = 32;          // two m16 tiles
constexpr int kTileTokens = 32;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kColumnsPerWarp = kLatent / kWarps;  // 128 output columns per warp
constexpr int kScoreStride = 36;                   // floats per score row: 144 bytes, so the bf16 P rows aliased at
                                                   // the same stride are conflict-free for ldmatrix
constexpr int kMaxSplits = 128;
constexpr int kBlocksPerSm = 2;  // register_q's resident blocks per SM: the splits fill two per SM
// Without a device the splits are sized for an H200's SMs (the reference GPU), so that a workspace can be planned and
// the arguments checked on a machine without one.
constexpr int kReferenceMultiprocessors = 132;
constexpr int kMinTokensPerSplit = 128;  // below this a split's partial output costs more than its tokens
constexpr float kLog2e = 1.4426950408889634f;
constexpr int64_t kMaxContextTokens = int64_t(1) << 30;  // token and tile arithmetic stays in int32

// register_q: warp w's score columns are k-steps 9w … 9w+8 (of 36), for both m tiles and all 4 n tiles of a tile.
constexpr int kScoreKSteps = kWidth / 16;              // 36
constexpr int kKStepsPerWarp = kScoreKSteps / kWarps;  // 9
constexpr int kCombineThreads = 256;                   // the combine pass: 8 warps per (head, column chunk)
constexpr int kCombineChunks = kLatent / 128;          // column chunks of 128 per head (32 lanes × 4)

static_assert(kRowChunks % 8 == 0, "the XOR swizzle permutes chunks within groups of 8");
static_assert(kThreads == kHeadsPerBlock * 4 && kThreads == kTileTokens * 4, "4 threads per head row / token row");
static_assert(kScoreKSteps % kWarps == 0, "register_q: the score columns divide evenly over the warps");
static_assert(kMaxSplits <= kCombineThreads && kMaxSplits % (kCombineThreads / 32) == 0,
              "the combine: one thread per split's statistics, the splits evenly over its warps");

// Shared memory (bytes): KV 2 × [32][576] | partial scores 4 × [32][36] fp32 (one per warp's columns; P bf16 aliased
// on the first) | alpha [32] | l [32].
struct SmemLayout {
  static constexpr int kTileBytes = kTileTokens * kRowBytes;
  static constexpr int kScoreBytes = kHeadsPerBlock * kScoreStride * 4;  // one [32][36] fp32 score tile
  static constexpr int kKv = 0;
  static constexpr int kScores = kKv + 2 * kTileBytes;
  static constexpr int kAlpha = kScores + kWarps * kScoreBytes;
  static constexpr int kSum = kAlpha + kHeadsPerBlock * 4;
  static constexpr int kBytes = kSum + kHeadsPerBlock * 4;
};
constexpr int kTileBytes = SmemLayout::kTileBytes;
static_assert(SmemLayout::kBytes == 92416, "two blocks fit in an SM's 228 KiB");

// Byte offset of 16-byte chunk `chunk` of row `row` in a [rows][576] bf16 tile: chunks XOR-swizzled by row % 8, so
// the 8 rows an ldmatrix reads at one logical chunk hit 8 different bank groups (the row stride is 9 × 128 bytes).
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return uint32_t(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
}

using namespace ptx;  // cp.async, ldmatrix, mma (kernels/ptx/ptx_mma.h)

// Grid: x = split · head_groups + head group (the head groups of one split are neighbours, so their reads of the
// same token rows meet in L2), y = sequence. The register_q algorithm (header).
// Fragment layouts (PTX ISA, mma.m16n8k16): lane = 4g + t; a holds rows g, g+8 × columns 2t, 2t+1 (+8) as registers
// {(g, 2t), (g+8, 2t), (g, 2t+8), (g+8, 2t+8)}, the lower column in the low 16 bits; b holds k = 2t, 2t+1 (+8) ×
// column g; c holds rows g, g+8 × columns 2t, 2t+1.
__global__ void __launch_bounds__(kThreads, 2)
    mla_decode_split_kv(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ pages,
                        const int32_t* __restrict__ page_table, const int32_t* __restrict__ context_tokens,
                        float scale_log2, int heads, int page_tokens, int max_pages, int max_context, int head_groups,
                        int splits, float* __restrict__ partial_out, float2* __restrict__ partial_stats,
                        float* __restrict__ out) {
  using L = SmemLayout;
  constexpr int kSmemKv = L::kKv, kSmemScores = L::kScores, kSmemAlpha = L::kAlpha, kSmemSum = L::kSum;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem_base = uint32_t(__cvta_generic_to_shared(smem));
  float* scores = reinterpret_cast<float*>(smem + kSmemScores);
  float* alpha_s = reinterpret_cast<float*>(smem + kSmemAlpha);
  float* sum_s = reinterpret_cast<float*>(smem + kSmemSum);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int group = blockIdx.x % head_groups, split = blockIdx.x / head_groups, b = blockIdx.y;
  const int head0 = group * kHeadsPerBlock;

  const int context = min(max(context_tokens[b], 0), max_context);
  const int tiles = (context + kTileTokens - 1) / kTileTokens;
  const int tiles_per_split = (tiles + splits - 1) / splits;
  const int tile_begin = min(split * tiles_per_split, tiles);
  const int tile_end = min(tile_begin + tiles_per_split, tiles);

  // Loader role: thread i fills row i / 4 (a token of a KV tile), chunks i % 4, i % 4 + 4, ….
  const int load_row = threadIdx.x >> 2, load_chunk0 = threadIdx.x & 3;
  const auto load_tile = [&](int tile, int stage) {
    const int token = tile * kTileTokens + load_row;
    const bool valid = token < context;
    const __nv_bfloat16* src = pages;
    if (valid) {
      const int64_t page = page_table[int64_t(b) * max_pages + token / page_tokens];
      src = pages + (page * page_tokens + token % page_tokens) * kWidth;
    }
    const uint32_t dst = smem_base + kSmemKv + stage * kTileBytes;
    for (int chunk = load_chunk0; chunk < kRowChunks; chunk += 4)
      cp_async_16(dst + swizzled(load_row, chunk), src + (valid ? chunk * 8 : 0), valid);
  };

  if (tile_begin < tile_end) load_tile(tile_begin, 0);
  cp_async_commit();

  // This warp's A fragments of Q, [m tile][k step][register], for k steps 9w … 9w+8; rows past the last head are
  // zeros. Read once from global memory (4 bytes per register: two neighbouring bf16 columns).
  uint32_t qa[2][kKStepsPerWarp][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int head = head0 + mt * 16 + g + 8 * (r & 1);
      const uint32_t* src = reinterpret_cast<const uint32_t*>(q + (int64_t(b) * heads + min(head, heads - 1)) * kWidth);
#pragma unroll
      for (int ks = 0; ks < kKStepsPerWarp; ++ks) {
        const int column = (warp * kKStepsPerWarp + ks) * 16 + 2 * t4 + 8 * (r >> 1);
        qa[mt][ks][r] = head < heads ? __ldg(src + column / 2) : 0u;
      }
    }

  // Softmax role: thread i owns head row i / 4, token columns 8·(i % 4) … +7; m and l are kept identically by the
  // row's 4 threads.
  const int soft_row = threadIdx.x >> 2, soft_quarter = threadIdx.x & 3;
  float m_run = -INFINITY, l_run = 0.0f;
  // Output role: warp w owns columns 128w … 128w+127 of all 32 heads: [m tile][n tile of 8 columns][fragment].
  float o[2][16][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int n = 0; n < 16; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][n][e] = 0.0f;

  int stage = 0;
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    cp_async_wait_all();
    __syncthreads();  // this tile has landed; every warp is done with the previous tile's P and stage
    if (tile + 1 < tile_end) load_tile(tile + 1, stage ^ 1);
    cp_async_commit();
    const uint32_t kv_smem = smem_base + kSmemKv + stage * kTileBytes;
    const int tile_token0 = tile * kTileTokens;

    // Partial scores: warp w computes all 32 heads × 32 tokens over columns 144w … 144w+143 into score tile w
    // (unscaled, unmasked: rows past the context are zero-filled, so every partial is finite), 16 tokens at a time
    // (fewer live accumulators); each B fragment loaded feeds 4 MMAs, the A fragments come from registers.
    float* partial = scores + warp * (kHeadsPerBlock * kScoreStride);
#pragma unroll
    for (int token0 = 0; token0 < kTileTokens; token0 += 16) {
      float s[2][2][4] = {};
      const int b_row = token0 + (lane & 7) + ((lane >> 4) << 3);
#pragma unroll
      for (int ks = 0; ks < kKStepsPerWarp; ++ks) {
        uint32_t bb[4];  // {n tile 0: b0, b1, n tile 1: b0, b1}: tokens token0 … +7, token0 + 8 … +15
        ldmatrix_x4(bb, kv_smem + swizzled(b_row, 2 * (warp * kKStepsPerWarp + ks) + ((lane >> 3) & 1)));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_bf16(s[mt][0], qa[mt][ks], bb[0], bb[1]);
          mma_bf16(s[mt][1], qa[mt][ks], bb[2], bb[3]);
        }
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int half = 0; half < 2; ++half)
            *reinterpret_cast<float2*>(partial + (mt * 16 + g + 8 * half) * kScoreStride + token0 + 8 * j + 2 * t4) =
                make_float2(s[mt][j][2 * half], s[mt][j][2 * half + 1]);
    }
    __syncthreads();

    // Online softmax of one head row over the tile; P (bf16) overwrites the front of the row's scores.
    {
      const float* srow = scores + soft_row * kScoreStride + 8 * soft_quarter;
      const float4 x0 = *reinterpret_cast<const float4*>(srow);
      const float4 x1 = *reinterpret_cast<const float4*>(srow + 4);
      float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      // Sum the warps' partial tiles in a fixed order, then scale and mask.
#pragma unroll
      for (int w = 1; w < kWarps; ++w) {
        const float4 y0 = *reinterpret_cast<const float4*>(srow + w * (kHeadsPerBlock * kScoreStride));
        const float4 y1 = *reinterpret_cast<const float4*>(srow + w * (kHeadsPerBlock * kScoreStride) + 4);
        x[0] += y0.x, x[1] += y0.y, x[2] += y0.z, x[3] += y0.w;
        x[4] += y1.x, x[5] += y1.y, x[6] += y1.z, x[7] += y1.w;
      }
      const int token0 = tile_token0 + 8 * soft_quarter;
#pragma unroll
      for (int i = 0; i < 8; ++i) x[i] = token0 + i < context ? x[i] * scale_log2 : -INFINITY;
      float tile_max = x[0];
#pragma unroll
      for (int i = 1; i < 8; ++i) tile_max = fmaxf(tile_max, x[i]);
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float m_new = fmaxf(m_run, tile_max);  // finite: the tile's first token is in the context
      const float alpha = exp2f(m_run - m_new);    // 0 on the first tile (m_run = −∞)
      __align__(16) __nv_bfloat162 p[4];
      float tile_sum = 0.0f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        p[i] = __floats2bfloat162_rn(exp2f(x[2 * i] - m_new), exp2f(x[2 * i + 1] - m_new));
        const float2 rounded = __bfloat1622float2(p[i]);  // the sum of exactly what the output product uses
        tile_sum += rounded.x + rounded.y;
      }
      tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
      tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 2);
      l_run = l_run * alpha + tile_sum;
      m_run = m_new;
      __syncwarp();  // the row's 4 threads have read their scores before any of them overwrites the row's front
      *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(scores) + soft_row * kScoreStride * 4 +
                                16 * soft_quarter) = *reinterpret_cast<const uint4*>(p);
      if (soft_quarter == 0) alpha_s[soft_row] = alpha;
    }
    __syncthreads();

    // Output: o = alpha · o + P · C over the tile, warp w on columns 128w … 128w+127.
    {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const float a_lo = alpha_s[mt * 16 + g], a_hi = alpha_s[mt * 16 + g + 8];
#pragma unroll
        for (int n = 0; n < 16; ++n) {
          o[mt][n][0] *= a_lo;
          o[mt][n][1] *= a_lo;
          o[mt][n][2] *= a_hi;
          o[mt][n][3] *= a_hi;
        }
      }
      const uint32_t p_smem = smem_base + kSmemScores;
#pragma unroll
      for (int kk = 0; kk < kTileTokens / 16; ++kk) {
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
          ldmatrix_x4(a[mt], p_smem + (mt * 16 + (lane & 15)) * kScoreStride * 4 + (2 * kk + (lane >> 4)) * 16);
        const int v_row = kk * 16 + (lane & 15);
#pragma unroll
        for (int np = 0; np < 8; ++np) {
          uint32_t bb[4];
          ldmatrix_x4_trans(bb, kv_smem + swizzled(v_row, warp * (kColumnsPerWarp / 8) + 2 * np + (lane >> 4)));
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma_bf16(o[mt][2 * np], a[mt], bb[0], bb[1]);
            mma_bf16(o[mt][2 * np + 1], a[mt], bb[2], bb[3]);
          }
        }
      }
    }
    stage ^= 1;
  }
  cp_async_wait_all();

  // Epilogue. One split: normalise and write out. Several: this split's unnormalised output and (max, sum); an
  // empty split writes only (−∞, 0), which the combine skips.
  if (splits == 1) {
    if (soft_quarter == 0) sum_s[soft_row] = l_run;
    __syncthreads();
  } else if (soft_quarter == 0 && head0 + soft_row < heads) {
    partial_stats[(int64_t(b) * splits + split) * heads + head0 + soft_row] = make_float2(m_run, l_run);
  }
  if (splits > 1 && tile_begin == tile_end) return;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = mt * 16 + g + 8 * half, head = head0 + row;
      if (head >= heads) continue;
      float* dst;
      float factor = 1.0f;
      if (splits == 1) {
        dst = out + (int64_t(b) * heads + head) * kLatent;
        factor = sum_s[row] > 0.0f ? 1.0f / sum_s[row] : 0.0f;  // a sequence with no tokens gets zeros
      } else {
        dst = partial_out + ((int64_t(b) * splits + split) * heads + head) * kLatent;
      }
#pragma unroll
      for (int n = 0; n < 16; ++n) {
        const int column = warp * kColumnsPerWarp + 8 * n + 2 * t4;
        *reinterpret_cast<float2*>(dst + column) =
            make_float2(o[mt][n][2 * half] * factor, o[mt][n][2 * half + 1] * factor);
      }
    }
  }
}

// The combine pass (every algorithm's): out = Σ_s 2^(m_s − M) o_s / Σ_s 2^(m_s − M) l_s, M = max_s m_s, over the
// splits that saw tokens. One block of 256 threads per (head, 128 output columns, sequence): lane l of warp w holds
// columns 4l … 4l + 3 of the chunk for splits w, w + 8, … (≤ 16 each, splits ≤ 128), and issues all of those loads
// before anything waits on them, so the pass costs about one round trip to the L2 where the split pass just wrote
// the rows. Meanwhile thread s reads split s's (max, sum) and the block reduces them to M and Σ w_s l_s; an empty
// split's weight is 0 and its row (never written) is selected away, not multiplied. The 8 warps' sums meet in shared
// memory.
__global__ void __launch_bounds__(kCombineThreads)
    mla_decode_combine_splits_batched(const float* __restrict__ partial_out, const float2* __restrict__ partial_stats,
                                      int heads, int splits, float* __restrict__ out) {
  constexpr int kWarps = kCombineThreads / 32, kRowsPerWarp = kMaxSplits / kWarps;
  __shared__ float weight[kMaxSplits];
  __shared__ float warp_max[kWarps], warp_sum[kWarps];
  __shared__ float4 warp_acc[kWarps - 1][32];
  const int h = blockIdx.x / kCombineChunks, b = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int column = (blockIdx.x % kCombineChunks) * 128 + 4 * lane;
  const int64_t first = int64_t(b) * splits * heads + h;  // (b, split 0, h); split s at first + s · heads

  float4 part[kRowsPerWarp];
#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const int s = warp + kWarps * k;
    const float* row = partial_out + (first + int64_t(s) * heads) * kLatent;
    part[k] = s < splits ? *reinterpret_cast<const float4*>(row + column) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }

  const int own = threadIdx.x;
  const float2 stats = own < splits ? partial_stats[first + int64_t(own) * heads] : make_float2(-INFINITY, 0.0f);
  const bool seen = stats.y > 0.0f;  // a split that saw tokens
  float m = seen ? stats.x : -INFINITY;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  float m_max = warp_max[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) m_max = fmaxf(m_max, warp_max[w]);
  const float w_own = seen ? exp2f(stats.x - m_max) : 0.0f;  // m_max is finite whenever some split is seen
  if (own < kMaxSplits) weight[own] = w_own;
  float l = w_own * stats.y;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) l += __shfl_xor_sync(0xffffffffu, l, offset);
  if (lane == 0) warp_sum[warp] = l;
  __syncthreads();  // weight[] and warp_sum[] are complete

  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const int s = warp + kWarps * k;
    const float w = s < splits ? weight[s] : 0.0f;
    if (w > 0.0f) {
      acc.x += w * part[k].x;
      acc.y += w * part[k].y;
      acc.z += w * part[k].z;
      acc.w += w * part[k].w;
    }
  }
  if (warp > 0) warp_acc[warp - 1][lane] = acc;
  __syncthreads();
  if (warp != 0) return;
  float sum = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) sum += warp_sum[w];
#pragma unroll
  for (int w = 0; w < kWarps - 1; ++w) {
    const float4 other = warp_acc[w][lane];
    acc.x += other.x, acc.y += other.y, acc.z += other.z, acc.w += other.w;
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  *reinterpret_cast<float4*>(out + (int64_t(b) * heads + h) * kLatent + column) =
      make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
}

bool valid_shape(const MlaDecodeShape& s) {
  return s.batch >= 0 && s.batch <= 65535 && s.heads > 0 && s.heads <= 65535 && s.page_tokens > 0 &&
         s.max_pages_per_sequence > 0 && s.max_context_tokens >= 0 && s.max_context_tokens <= kMaxContextTokens &&
         s.max_context_tokens <= int64_t(s.max_pages_per_sequence) * s.page_tokens;
}

int head_groups(int heads) { return (heads + kHeadsPerBlock - 1) / kHeadsPerBlock; }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Sets the split kernel's shared-memory attributes once per device, so the launch path does no attribute calls
// after the first.
cudaError_t configure_split_kernel() {
  static std::atomic<uint64_t> configured{0};
  int device = 0;
  const cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  return allow_dynamic_shared_memory_once(mla_decode_split_kv, SmemLayout::kBytes, device, configured);
}

cudaError_t launch_split_kernel(const dim3& grid, cudaStream_t stream, const __nv_bfloat16* q,
                                const __nv_bfloat16* cache_pages, const int32_t* page_table,
                                const int32_t* context_tokens, float scale_log2, const MlaDecodeShape& shape,
                                int groups, int splits, float* partial_out, float2* partial_stats, float* out) {
  const cudaError_t status = configure_split_kernel();
  if (status != cudaSuccess) return status;
  mla_decode_split_kv<<<grid, kThreads, SmemLayout::kBytes, stream>>>(
      q, cache_pages, page_table, context_tokens, scale_log2, shape.heads, shape.page_tokens,
      shape.max_pages_per_sequence, int(shape.max_context_tokens), groups, splits, partial_out, partial_stats, out);
  return cudaSuccess;
}

}  // namespace

namespace {

// The SMs a wave of split blocks fills: the current device's.
int split_multiprocessors() {
  const int sms = current_device_multiprocessors();
  return sms > 0 ? sms : kReferenceMultiprocessors;
}

}  // namespace

int mla_decode_num_splits(const MlaDecodeShape& shape) {
  if (!valid_shape(shape) || shape.batch == 0) return 1;
  const int blocks_per_split = shape.batch * head_groups(shape.heads);
  const int target_blocks = kBlocksPerSm * split_multiprocessors();
  int splits = (target_blocks + blocks_per_split - 1) / blocks_per_split;
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, shape.max_context_tokens / kMinTokensPerSplit));
  return std::clamp(splits, 1, kMaxSplits);
}

size_t mla_decode_workspace_bytes(const MlaDecodeShape& shape) {
  const int splits = mla_decode_num_splits(shape);
  if (!valid_shape(shape) || splits == 1) return 0;
  const size_t rows = size_t(shape.batch) * splits * shape.heads;
  return rows * kLatent * sizeof(float) + rows * sizeof(float2);
}

// wgmma_alternating's blocks: 64 heads (the wgmma M), one block per SM.
int mla_decode_wgmma_num_splits(const MlaDecodeShape& shape) {
  const int common = mla_decode_num_splits(shape);  // 1 for an invalid or empty shape
  if (common == 1) return 1;
  constexpr int kWgmmaHeadsPerBlock = 64;
  const int64_t blocks_per_split =
      int64_t(shape.batch) * ((shape.heads + kWgmmaHeadsPerBlock - 1) / kWgmmaHeadsPerBlock);
  return int(std::clamp<int64_t>(split_multiprocessors() / blocks_per_split, 1, common));
}

bool mla_decode_wgmma_supported(int device) { return sm90a_device(device); }

cudaError_t mla_decode_wgmma_device(int& device) {
  const cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  return mla_decode_wgmma_supported(device) ? cudaSuccess : cudaErrorNotSupported;
}

namespace {

// What `algorithm` runs: automatic resolved for the current device (without one: register_q, whose checks and launch
// then report what is wrong).
MlaDecodeAlgorithm resolved(MlaDecodeAlgorithm algorithm, const MlaDecodeShape& shape) {
  if (algorithm != MlaDecodeAlgorithm::automatic) return algorithm;
  int device = 0;
  const bool hopper = cudaGetDevice(&device) == cudaSuccess && mla_decode_wgmma_supported(device);
  const bool cluster = hopper && shape.heads > kMlaDecodeAlternatingMaxHeads &&
                       shape.heads <= kMlaDecodeClusterMaxHeads && mla_decode_wgmma_cluster_runs(device);
  return cluster  ? MlaDecodeAlgorithm::wgmma_cluster
         : hopper ? MlaDecodeAlgorithm::wgmma_alternating
                  : MlaDecodeAlgorithm::register_q;
}

}  // namespace

int mla_decode_algorithm_splits(const MlaDecodeShape& shape, MlaDecodeAlgorithm algorithm) {
  algorithm = resolved(algorithm, shape);
  if (algorithm == MlaDecodeAlgorithm::wgmma_cluster) return mla_decode_wgmma_cluster_num_splits(shape);
  if (algorithm == MlaDecodeAlgorithm::wgmma_alternating) return mla_decode_wgmma_num_splits(shape);
  return mla_decode_num_splits(shape);
}

cudaError_t mla_decode_paged_bf16(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages, const int32_t* page_table,
                                  const int32_t* context_tokens, float scale, const MlaDecodeShape& shape, float* out,
                                  void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                  MlaDecodeAlgorithm algorithm) {
  if (!valid_shape(shape) || !std::isfinite(scale)) return cudaErrorInvalidValue;
  algorithm = resolved(algorithm, shape);
  // wgmma_alternating and wgmma_cluster: their own split passes and split counts, the same workspace and combine pass.
  const bool wgmma_alternating = algorithm == MlaDecodeAlgorithm::wgmma_alternating;
  const bool wgmma_cluster = algorithm == MlaDecodeAlgorithm::wgmma_cluster;
  if (!wgmma_alternating && !wgmma_cluster && algorithm != MlaDecodeAlgorithm::register_q) return cudaErrorInvalidValue;
  if (shape.batch == 0) return cudaSuccess;
  if (!aligned16(q) || !aligned16(cache_pages) || !aligned16(out)) return cudaErrorInvalidValue;
  const int splits = mla_decode_algorithm_splits(shape, algorithm);
  const size_t needed = mla_decode_workspace_bytes(shape);
  if (needed > 0 && (workspace == nullptr || workspace_bytes < needed || !aligned16(workspace)))
    return cudaErrorInvalidValue;
  const int groups = head_groups(shape.heads);
  float* partial_out = static_cast<float*>(workspace);
  float2* partial_stats =
      splits > 1 ? reinterpret_cast<float2*>(partial_out + size_t(shape.batch) * splits * shape.heads * kLatent)
                 : nullptr;

  const dim3 grid(unsigned(groups * splits), unsigned(shape.batch));
  const cudaError_t status =
      wgmma_cluster ? mla_decode_wgmma_cluster_split_pass(q, cache_pages, page_table, context_tokens, scale * kLog2e,
                                                          shape, splits, partial_out, partial_stats, out, stream)
      : wgmma_alternating
          ? mla_decode_wgmma_alternating_split_pass(q, cache_pages, page_table, context_tokens, scale * kLog2e, shape,
                                                    splits, partial_out, partial_stats, out, stream)
          : launch_split_kernel(grid, stream, q, cache_pages, page_table, context_tokens, scale * kLog2e, shape, groups,
                                splits, partial_out, partial_stats, out);
  if (status != cudaSuccess) return status;
  if (splits > 1) {
    const dim3 combine_grid(unsigned(shape.heads * kCombineChunks), unsigned(shape.batch));
    mla_decode_combine_splits_batched<<<combine_grid, kCombineThreads, 0, stream>>>(partial_out, partial_stats,
                                                                                    shape.heads, splits, out);
  }
  return cudaGetLastError();
}

}  // namespace k3::kernels
