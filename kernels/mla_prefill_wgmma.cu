#include "kernels/mla_prefill_wgmma.h"

#include "kernels/mla_prefill.h"
#include "kernels/ptx/ptx_mma.h"
#include "kernels/ptx/shared_memory_config.h"
#include "kernels/ptx/sm90a_device.h"
#include "kernels/ptx/wgmma_sm90.h"

#include <atomic>
#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

constexpr int kQk = kMlaPrefillQkDim;    // 192
constexpr int kV = kMlaPrefillValueDim;  // 128
constexpr int kQkChunks = kQk * 2 / 16;  // 24 chunks of 16 bytes per q/k row
constexpr int kVChunks = kV * 2 / 16;    // 16 per v row
constexpr int kRows = 64;                // queries per warpgroup = keys per tile = the wgmma M
constexpr int kKeys = 64;
constexpr int kWarpGroups = 3;
constexpr int kBlockQueries = kWarpGroups * kRows;   // 192
constexpr int kThreads = kWarpGroups * 128;          // 384
constexpr int kScoreKSteps = kQk / 16;               // 12
constexpr int kBlockBytes = kRows * 128;             // one SW128 block: 64 rows of 64 bf16
constexpr int kKvLoaders = kThreads / kKeys;         // 6 threads per K or V row
constexpr int kQLoaders = kThreads / kBlockQueries;  // 2 per Q row

// Shared memory (bytes from a 1024-aligned base): Q of each warpgroup [64 × 192] | K stages 0, 1 [64 × 192] | V stages
// 0, 1 [64 × 128], each in SW128 blocks of 64 rows (wgmma_sm90.h).
struct Smem {
  static constexpr int kQOperand = kRows * kQk * 2;  // 24576
  static constexpr int kKTile = kKeys * kQk * 2;     // 24576
  static constexpr int kVTile = kKeys * kV * 2;      // 16384
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kWarpGroups * kQOperand;
  static constexpr int kVStages = kK + 2 * kKTile;
  static constexpr int kBytes = kVStages + 2 * kVTile;  // 155648
  static constexpr int kAllocBytes = kBytes + 1024;     // slack to align the base
};
static_assert(Smem::kAllocBytes <= 232448, "an H200 block gets at most 227 KiB of shared memory");
static_assert(kThreads % kKeys == 0 && kThreads % kBlockQueries == 0, "whole loader groups per row");

using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait_all;

// Grid: x = block of 192 queries (reversed: the last blocks, with the most key tiles, start first), y = head.
// Warpgroup wg = threadIdx.x / 128 owns queries 192·block + 64·wg …; its warp w = warp % 4, lane = 4g + t holds
// accumulator rows 16w + g and 16w + g + 8 (wgmma_sm90.h's fragment layout).
// Per warpgroup the products run one tile apart: in the step of tile i it issues the scores of tile i + 1 and then
// the output product of tile i (P of tile i from registers), takes the softmax of tile i + 1 while the output
// product runs, and rescales the output once that is done. K tiles are loaded two tiles ahead and V tiles one, each
// into the stage its tile two (one) steps before has left: one barrier per step.
__global__ void __launch_bounds__(kThreads, 1)
    mla_prefill_wgmma_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                             const __nv_bfloat16* __restrict__ v, int q_tokens, int kv_tokens, int heads,
                             float scale_log2, __nv_bfloat16* __restrict__ out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wg = warp >> 2;
  const int g = lane >> 2, t4 = lane & 3;
  const int row_lo = 16 * (warp & 3) + g;  // this thread's rows of the warpgroup: row_lo, row_lo + 8
  const int query0 = (int(gridDim.x) - 1 - int(blockIdx.x)) * kBlockQueries;
  const int h = blockIdx.y;
  const int offset = kv_tokens - q_tokens;  // position of query i is offset + i
  const int64_t qk_stride = int64_t(heads) * kQk, v_stride = int64_t(heads) * kV;

  // Key tiles of the block (up to its last query's position) and of this warpgroup (none if it holds no query).
  const int key_tiles = (offset + min(query0 + kBlockQueries, q_tokens) - 1) / kKeys + 1;
  const int wg_query0 = query0 + kRows * wg;
  const int wg_first = offset + wg_query0;  // position of the warpgroup's row 0
  const int wg_tiles = wg_query0 < q_tokens ? (offset + min(wg_query0 + kRows, q_tokens) - 1) / kKeys + 1 : 0;

  // Loader roles: K and V row threadIdx.x / 6 of a tile, chunks threadIdx.x % 6 + 6i; Q row threadIdx.x / 2 of the
  // block (in warpgroup row / 64's operand), chunks threadIdx.x % 2 + 2i. Rows past the keys or queries are zeros.
  const int kv_row = threadIdx.x / kKvLoaders, kv_chunk0 = threadIdx.x % kKvLoaders;
  // Row kv_row of a tile of `chunks` 16-byte chunks per row from `rows` (row stride `stride`, this head at h · width).
  const auto load_tile = [&](const __nv_bfloat16* rows, int64_t stride, int width, int chunks, int tile, uint32_t dst) {
    const int key = tile * kKeys + kv_row;
    const bool valid = key < kv_tokens;
    const __nv_bfloat16* src = valid ? rows + key * stride + h * width : rows;
    for (int chunk = kv_chunk0; chunk < chunks; chunk += kKvLoaders)
      cp_async_16(dst + wgmma::sw128_offset(kKeys, kv_row, chunk), src + (valid ? chunk * 8 : 0), valid);
  };
  const auto load_k = [&](int tile, int stage) {
    load_tile(k, qk_stride, kQk, kQkChunks, tile, base + Smem::kK + stage * Smem::kKTile);
  };
  const auto load_v = [&](int tile, int stage) {
    load_tile(v, v_stride, kV, kVChunks, tile, base + Smem::kVStages + stage * Smem::kVTile);
  };
  {
    const int row = threadIdx.x / kQLoaders, chunk0 = threadIdx.x % kQLoaders;
    const int query = query0 + row;
    const bool valid = query < q_tokens;
    const __nv_bfloat16* src = valid ? q + query * qk_stride + h * kQk : q;
    const uint32_t dst = base + Smem::kQ + (row / kRows) * Smem::kQOperand;
    for (int chunk = chunk0; chunk < kQkChunks; chunk += kQLoaders)
      cp_async_16(dst + wgmma::sw128_offset(kRows, row % kRows, chunk), src + (valid ? chunk * 8 : 0), valid);
  }
  load_k(0, 0);
  load_v(0, 0);
  if (key_tiles > 1) load_k(1, 1);
  cp_async_commit();

  // Output accumulators: o[4j + e] is row row_lo + 8·(e / 2), value column 8j + 2t + e % 2. The running max is the
  // same in the 4 threads of a row; the running sum is this thread's part, added over the 4 at the end.
  float o[kV / 2];
#pragma unroll
  for (int i = 0; i < kV / 2; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  float s[kKeys / 2];
  uint32_t p_current[kKeys / 16][4], p_next[kKeys / 16][4];  // P as the A fragments of the output product's k steps
  // Descriptors of the operands' first k step; a step's start address (bits 0-13, in 16-byte units, below 2^14 for
  // any shared-memory address) is the first one's plus its offset / 16.
  const uint64_t q_desc = wgmma::sw128_descriptor(base + Smem::kQ + wg * Smem::kQOperand, 16, 1024);
  const uint64_t k_desc0 = wgmma::sw128_descriptor(base + Smem::kK, 16, 1024);
  const uint64_t v_desc0 = wgmma::sw128_descriptor(base + Smem::kVStages, kBlockBytes, 1024);

  // The scores of tile `tile` into s (issued and committed; the caller waits).
  const auto issue_scores = [&](int tile) {
    const uint64_t k_desc = k_desc0 + uint64_t(((tile & 1) * Smem::kKTile) >> 4);
#pragma unroll
    for (int i = 0; i < kKeys / 2; ++i) s[i] = 0.0f;
    wgmma::fence_registers(s);
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < kScoreKSteps; ++ks) {
      const uint64_t step = ((ks >> 2) * kBlockBytes + (ks & 3) * 32) >> 4;
      wgmma::wgmma_m64n64k16_ss<0>(s, q_desc + step, k_desc + step);
    }
    wgmma::commit_group();
  };
  // The online softmax of tile `tile` from the finished s: P into p (bf16 A fragments), the running max and sum
  // updated; returns the factors the output must be rescaled by before P · V of this tile.
  const auto softmax = [&](int tile, uint32_t(&p)[kKeys / 16][4], float(&alpha)[2]) {
    wgmma::fence_registers(s);
    // s[4j + e]: key 64·tile + 8j + 2t + e % 2 of row row_lo + 8·(e / 2). Scale; mask keys past the row's position
    // or the keys' end on the tiles where either can happen.
    const int key0 = tile * kKeys;
    const bool masked = key0 + kKeys - 1 > wg_first || key0 + kKeys > kv_tokens;
    const int position_lo = wg_first + row_lo, position_hi = position_lo + 8;
    // s stays unscaled (scale_log2 > 0 keeps the maximum's place); the scaled maximum m is subtracted in one fma.
    float tile_max[2] = {-INFINITY, -INFINITY};
    if (masked) {  // uniform over the warpgroup
#pragma unroll
      for (int i = 0; i < kKeys / 2; ++i) {
        const int key = key0 + 8 * (i >> 2) + 2 * t4 + (i & 1);
        const int position = (i & 2) ? position_hi : position_lo;
        if (key > position || key >= kv_tokens) s[i] = -INFINITY;
      }
    }
#pragma unroll
    for (int i = 0; i < kKeys / 2; ++i) tile_max[(i >> 1) & 1] = fmaxf(tile_max[(i >> 1) & 1], s[i]);
    float m_new[2], neg_m[2], tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      // Finite: key 0 is visible to every row (positions ≥ 0) and tile 0 comes first.
      m_new[r] = fmaxf(m_run[r], tile_max[r] * scale_log2);
      alpha[r] = exp2f(m_run[r] - m_new[r]);  // 0 on the first tile (m_run = −∞)
      neg_m[r] = -m_new[r];
    }
    // A fragment r of k step kk: s[8kk + 2r], s[8kk + 2r + 1] (row half r % 2; keys 16kk + 2t, +8 for r ≥ 2).
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int half = r & 1;
        const __nv_bfloat162 pair = __floats2bfloat162_rn(exp2f(fmaf(s[8 * kk + 2 * r], scale_log2, neg_m[half])),
                                                          exp2f(fmaf(s[8 * kk + 2 * r + 1], scale_log2, neg_m[half])));
        const float2 rounded = __bfloat1622float2(pair);  // the sum of exactly what the output product uses
        tile_sum[half] += rounded.x + rounded.y;
        p[kk][r] = *reinterpret_cast<const uint32_t*>(&pair);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_run[r] = l_run[r] * alpha[r] + tile_sum[r];
      m_run[r] = m_new[r];
    }
  };

  cp_async_wait_all();
  wgmma::fence_proxy_async_shared();  // Q and the first tiles written by cp.async, read next by wgmma
  __syncthreads();
  float alpha[2];
  if (wg_tiles > 0) {  // uniform over the warpgroup
    issue_scores(0);
    wgmma::wait_group<0>();
    softmax(0, p_current, alpha);  // o is still 0: no rescale
  }

  for (int tile = 0; tile < key_tiles; ++tile) {
    // K of tile + 1 and V of tile have landed; every warpgroup is done with the scores of tile and the output of
    // tile − 1, so K stage tile % 2 and V stage (tile + 1) % 2 are free.
    cp_async_wait_all();
    wgmma::fence_proxy_async_shared();
    __syncthreads();
    if (tile + 2 < key_tiles) load_k(tile + 2, tile & 1);
    if (tile + 1 < key_tiles) load_v(tile + 1, (tile + 1) & 1);
    cp_async_commit();
    // Uniform over the warpgroup; next implies current.
    const bool current = tile < wg_tiles, next = tile + 1 < wg_tiles;
    if (next) issue_scores(tile + 1);
    if (current) {
      // o += P · V over the tile: V rows 16kk … 16kk + 15 (two 8-row groups, SBO 1024), its 128 columns as two
      // SW128 blocks (LBO one block), MN-major.
      const uint64_t v_desc = v_desc0 + uint64_t(((tile & 1) * Smem::kVTile) >> 4);
      wgmma::fence_registers(o);
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) wgmma::mma_rs<1>(o, p_current[kk], v_desc + uint64_t(kk * 2048 >> 4));
      wgmma::commit_group();
    }
    if (next) {
      wgmma::wait_group<1>();  // the scores (committed first) are done; the output product may still run
      softmax(tile + 1, p_next, alpha);
    }
    if (current) {
      wgmma::wait_group<0>();
      wgmma::fence_registers(o);
    }
    if (next) {
      // A warp none of whose rows has a new maximum (alpha 1 throughout) skips the rescale.
      if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (int j = 0; j < kV / 8; ++j) {
          o[4 * j] *= alpha[0];
          o[4 * j + 1] *= alpha[0];
          o[4 * j + 2] *= alpha[1];
          o[4 * j + 3] *= alpha[1];
        }
      }
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) p_current[kk][r] = p_next[kk][r];
    }
  }
  cp_async_wait_all();

  if (wg_query0 >= q_tokens) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  const float inv_lo = 1.0f / l_run[0], inv_hi = 1.0f / l_run[1];  // l ≥ 1: the row's maximum contributes 2^0
  const int query_lo = wg_query0 + row_lo, query_hi = query_lo + 8;
#pragma unroll
  for (int j = 0; j < kV / 8; ++j) {
    const int column = h * kV + 8 * j + 2 * t4;
    if (query_lo < q_tokens)
      *reinterpret_cast<__nv_bfloat162*>(out + query_lo * v_stride + column) =
          __floats2bfloat162_rn(o[4 * j] * inv_lo, o[4 * j + 1] * inv_lo);
    if (query_hi < q_tokens)
      *reinterpret_cast<__nv_bfloat162*>(out + query_hi * v_stride + column) =
          __floats2bfloat162_rn(o[4 * j + 2] * inv_hi, o[4 * j + 3] * inv_hi);
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a: the host side refuses before launching
#endif
}

}  // namespace

bool mla_prefill_wgmma_supported(int device) { return sm90a_device(device); }

cudaError_t mla_prefill_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, int q_tokens,
                              int kv_tokens, int heads, float scale_log2, __nv_bfloat16* out, cudaStream_t stream) {
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  if (!mla_prefill_wgmma_supported(device)) return cudaErrorNotSupported;
  static std::atomic<uint64_t> configured{0};
  status = allow_dynamic_shared_memory_once(mla_prefill_wgmma_kernel, Smem::kAllocBytes, device, configured);
  if (status != cudaSuccess) return status;
  const dim3 grid{static_cast<unsigned>((q_tokens + kBlockQueries - 1) / kBlockQueries), static_cast<unsigned>(heads)};
  mla_prefill_wgmma_kernel<<<grid, kThreads, Smem::kAllocBytes, stream>>>(q, k, v, q_tokens, kv_tokens, heads,
                                                                          scale_log2, out);
  return cudaGetLastError();
}

}  // namespace k3::kernels
