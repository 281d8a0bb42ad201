#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_rows.h"
#include "kernels/ptx_mma.h"
#include "kernels/shared_memory_config.h"
#include "kernels/sm90a_device.h"
#include "kernels/wgmma_sm90.h"

#include "core/error.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

constexpr int kLatent = kMlaDecodeLatentDim;
constexpr int kWidth = kMlaDecodeCacheWidth;
constexpr int kRowChunks = kWidth * 2 / 16;  // 72 chunks of 16 bytes per token row (or head of Q)
constexpr int kHeadsPerBlock = 64;           // the wgmma M tile
constexpr int kTileTokens = 64;
constexpr int kThreads = 256;                // two warpgroups
constexpr int kColumnsPerGroup = kLatent / 2;
constexpr int kScoreKSteps = kWidth / 16;    // 36
constexpr int kTargetBlocks = 132;           // one block on each of an H200's SMs

// Shared memory (bytes from a 1024-aligned base): Q [64 heads × 576] and two token tiles [64 tokens × 576], each in
// SW128 blocks (9 blocks of 64 rows × 128 bytes) | P: warpgroup 0's A fragments, [4 k steps][128 threads] uint4 |
// alpha [64] | l [64].
struct Smem {
  static constexpr int kOperandBytes = 64 * kWidth * 2;  // 73728
  static constexpr int kBlockBytes = 64 * 128;           // one SW128 block of 64 rows
  static constexpr int kQ = 0;
  static constexpr int kKv = kQ + kOperandBytes;
  static constexpr int kP = kKv + 2 * kOperandBytes;
  static constexpr int kAlpha = kP + 4 * 128 * 16;
  static constexpr int kSum = kAlpha + kHeadsPerBlock * 4;
  static constexpr int kBytes = kSum + kHeadsPerBlock * 4;
  static constexpr int kAllocBytes = kBytes + 1024;  // slack to align the base
};
static_assert(Smem::kAllocBytes <= 232448, "an H200 block gets at most 227 KiB of shared memory");
static_assert(kTileTokens == kHeadsPerBlock && kThreads == 4 * kTileTokens, "the loader: 4 threads per 64-row operand row");

using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait_all;

// Grid: x = split · head_groups + head group, y = sequence (as mla_decode_paged's kernels). Warpgroup wg = threadIdx.x /
// 128; its warp w = warp % 4, lane = 4g + t owns accumulator rows (heads) 16w + g and 16w + g + 8 (wgmma_sm90.h).
__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_wgmma_split_kv(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ pages,
                              const int32_t* __restrict__ page_table, const int32_t* __restrict__ context_tokens,
                              float scale_log2, int heads, int page_tokens, int max_pages, int max_context,
                              int head_groups, int splits, float* __restrict__ partial_out,
                              float2* __restrict__ partial_stats, float* __restrict__ out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  uint4* p_smem = reinterpret_cast<uint4*>(smem + Smem::kP);
  float* alpha_s = reinterpret_cast<float*>(smem + Smem::kAlpha);
  float* sum_s = reinterpret_cast<float*>(smem + Smem::kSum);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wg = warp >> 2, wg_thread = threadIdx.x & 127;
  const int g = lane >> 2, t4 = lane & 3;
  const int row_lo = 16 * (warp & 3) + g;  // this thread's accumulator rows: row_lo, row_lo + 8
  const int group = blockIdx.x % head_groups, split = blockIdx.x / head_groups, b = blockIdx.y;
  const int head0 = group * kHeadsPerBlock;

  const mla_wgmma::SplitTiles range =
      mla_wgmma::split_tiles<kTileTokens>(context_tokens, b, max_context, splits, split);
  const int context = range.context, tile_begin = range.begin, tile_end = range.end;

  // Loader role: thread i fills row i / 4 of a 64-row operand, chunks i % 4, i % 4 + 4, … (18 of 72).
  const int load_row = threadIdx.x >> 2, load_chunk0 = threadIdx.x & 3;
  const auto load_tile = [&](int tile, int stage) {
    const int token = tile * kTileTokens + load_row;
    const bool valid = token < context;
    const __nv_bfloat16* src =
        valid ? mla_wgmma::token_row(pages, page_table, b, max_pages, page_tokens, token) : pages;
    const uint32_t dst = base + Smem::kKv + stage * Smem::kOperandBytes;
    for (int chunk = load_chunk0; chunk < kRowChunks; chunk += 4)
      cp_async_16(dst + wgmma::sw128_offset(kTileTokens, load_row, chunk), src + (valid ? chunk * 8 : 0), valid);
  };
  if (tile_begin < tile_end) {
    const int head = head0 + load_row;
    const bool valid = head < heads;  // rows past the last head are zeros
    const __nv_bfloat16* src = valid ? q + (int64_t(b) * heads + head) * kWidth : q;
    for (int chunk = load_chunk0; chunk < kRowChunks; chunk += 4)
      cp_async_16(base + Smem::kQ + wgmma::sw128_offset(kHeadsPerBlock, load_row, chunk),
                  src + (valid ? chunk * 8 : 0), valid);
    load_tile(tile_begin, 0);
  }
  cp_async_commit();

  // Output accumulators: columns 256·wg + 8j + 2t (+1) of rows row_lo (o[4j], o[4j+1]) and row_lo + 8 (o[4j+2],
  // o[4j+3]). The running max and sum (warpgroup 0 only) are kept identically by the 4 threads of a row.
  float o[kColumnsPerGroup / 2];
#pragma unroll
  for (int i = 0; i < kColumnsPerGroup / 2; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};

  int stage = 0;
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    cp_async_wait_all();
    wgmma::fence_proxy_async_shared();  // the tile (and Q) written by cp.async, read next by wgmma
    __syncthreads();  // this tile has landed; both warpgroups are done with the previous tile's P and stage
    if (tile + 1 < tile_end) load_tile(tile + 1, stage ^ 1);
    cp_async_commit();
    const uint32_t kv_smem = base + Smem::kKv + stage * Smem::kOperandBytes;

    uint32_t pa[kTileTokens / 16][4];  // P as the A fragments of the output product's 4 k16 steps
    float alpha_lo, alpha_hi;
    if (wg == 0) {
      float s[kTileTokens / 2];
#pragma unroll
      for (int i = 0; i < kTileTokens / 2; ++i) s[i] = 0.0f;
      wgmma::fence_registers(s);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < kScoreKSteps; ++ks) {
        const uint32_t offset = (ks >> 2) * Smem::kBlockBytes + (ks & 3) * 32;
        wgmma::wgmma_m64n64k16_ss<0>(s, wgmma::sw128_descriptor(base + Smem::kQ + offset, 16, 1024),
                                     wgmma::sw128_descriptor(kv_smem + offset, 16, 1024));
      }
      wgmma::commit_group();
      wgmma::wait_group<0>();
      wgmma::fence_registers(s);

      // s[4j + e]: token 64·tile + 8j + 2t + e % 2 of row row_lo + 8·(e / 2). Scale, mask past the context.
      const int token0 = tile * kTileTokens + 2 * t4;
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int i = 0; i < kTileTokens / 2; ++i) {
        const int token = token0 + 8 * (i >> 2) + (i & 1);
        s[i] = token < context ? s[i] * scale_log2 : -INFINITY;
        tile_max[(i & 3) >> 1] = fmaxf(tile_max[(i & 3) >> 1], s[i]);
      }
      float m_new[2], alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        m_new[h] = fmaxf(m_run[h], tile_max[h]);  // finite: the tile's first token is in the context
        alpha[h] = exp2f(m_run[h] - m_new[h]);    // 0 on the first tile (m_run = −∞)
      }
      // A fragment r of k step kk: s[8kk + 2r], s[8kk + 2r + 1] (row half r % 2; tokens 16kk + 2t (+8 for r ≥ 2)).
      mla_wgmma::p_fragments(s, m_new, alpha, pa, l_run, m_run);
#pragma unroll
      for (int kk = 0; kk < kTileTokens / 16; ++kk)
        p_smem[kk * 128 + wg_thread] = make_uint4(pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3]);
      if (t4 == 0) {
        alpha_s[row_lo] = alpha[0];
        alpha_s[row_lo + 8] = alpha[1];
      }
      alpha_lo = alpha[0];
      alpha_hi = alpha[1];
    }
    __syncthreads();  // P and alpha are in shared memory
    if (wg == 1) {  // the same rows and fragment positions as warpgroup 0's thread wg_thread
#pragma unroll
      for (int kk = 0; kk < kTileTokens / 16; ++kk) {
        const uint4 v = p_smem[kk * 128 + wg_thread];
        pa[kk][0] = v.x, pa[kk][1] = v.y, pa[kk][2] = v.z, pa[kk][3] = v.w;
      }
      alpha_lo = alpha_s[row_lo];
      alpha_hi = alpha_s[row_lo + 8];
    }

    // o = alpha · o + P · C over the tile: C rows 16kk … 16kk+15 (two 8-row groups, SBO 1024), columns 256·wg …
    // +255 (4 SW128 blocks from block 4·wg, LBO one block).
#pragma unroll
    for (int j = 0; j < kColumnsPerGroup / 8; ++j) {
      o[4 * j] *= alpha_lo;
      o[4 * j + 1] *= alpha_lo;
      o[4 * j + 2] *= alpha_hi;
      o[4 * j + 3] *= alpha_hi;
    }
    wgmma::fence_registers(o);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kTileTokens / 16; ++kk)
      wgmma::wgmma_m64n256k16_rs<1>(
          o, pa[kk],
          wgmma::sw128_descriptor(kv_smem + 4 * wg * Smem::kBlockBytes + kk * 2048, Smem::kBlockBytes, 1024));
    wgmma::commit_group();
    wgmma::wait_group<0>();
    wgmma::fence_registers(o);
    stage ^= 1;
  }
  cp_async_wait_all();

  // Epilogue. One split: normalise and write out. Several: this split's unnormalised output and (max, sum); an
  // empty split writes only (−∞, 0), which the combine skips.
  if (splits == 1) {
    if (wg == 0 && t4 == 0) {
      sum_s[row_lo] = l_run[0];
      sum_s[row_lo + 8] = l_run[1];
    }
    __syncthreads();
  } else if (wg == 0 && t4 == 0) {
    mla_wgmma::store_split_stats(partial_stats, b, splits, split, heads, head0, row_lo, m_run, l_run);
  }
  if (splits > 1 && tile_begin == tile_end) return;
  mla_wgmma::store_rows<kColumnsPerGroup>(o, out, partial_out, b, splits, split, heads, head0, row_lo, wg, t4,
                                          [&](int h) { return sum_s[row_lo + 8 * h]; });
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a: the host side refuses before launching
#endif
}

// Sets the kernel's shared-memory attributes once per device.
cudaError_t configure_kernel(int device) {
  static std::atomic<uint64_t> configured{0};
  return allow_dynamic_shared_memory_once(mla_decode_wgmma_split_kv, Smem::kAllocBytes, device, configured);
}

int head_groups(int heads) { return (heads + kHeadsPerBlock - 1) / kHeadsPerBlock; }

}  // namespace

int mla_decode_wgmma_num_splits(const MlaDecodeShape& shape) {
  const int common = mla_decode_num_splits(shape);  // 1 for an invalid or empty shape
  if (common == 1) return 1;
  const int64_t blocks_per_split = int64_t(shape.batch) * head_groups(shape.heads);
  return int(std::clamp<int64_t>(kTargetBlocks / blocks_per_split, 1, common));
}

bool mla_decode_wgmma_supported(int device) { return sm90a_device(device); }

cudaError_t mla_decode_wgmma_device(const char* algorithm, int& device) {
  const cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  K3_CHECK(mla_decode_wgmma_supported(device),
           "mla_decode {}: device {} is not compute capability 9.0; it is built for sm_90a only", algorithm, device);
  return cudaSuccess;
}

cudaError_t mla_decode_wgmma_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                        const int32_t* page_table, const int32_t* context_tokens, float scale_log2,
                                        const MlaDecodeShape& shape, int splits, float* partial_out,
                                        float2* partial_stats, float* out, cudaStream_t stream) {
  int device = 0;
  cudaError_t status = mla_decode_wgmma_device("wgmma", device);
  if (status != cudaSuccess) return status;
  status = configure_kernel(device);
  if (status != cudaSuccess) return status;
  const int groups = head_groups(shape.heads);
  const dim3 grid(unsigned(groups * splits), unsigned(shape.batch));
  mla_decode_wgmma_split_kv<<<grid, kThreads, Smem::kAllocBytes, stream>>>(
      q, cache_pages, page_table, context_tokens, scale_log2, shape.heads, shape.page_tokens,
      shape.max_pages_per_sequence, int(shape.max_context_tokens), groups, splits, partial_out, partial_stats, out);
  return cudaGetLastError();
}

}  // namespace k3::kernels
