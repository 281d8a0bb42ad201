#include "kernels/mla_decode_wgmma_specialized.h"
#include "kernels/mla_decode_wgmma.h"
#include "kernels/ptx_mma.h"
#include "kernels/wgmma_sm90.h"

#include "core/error.h"

#include <atomic>
#include <cmath>
#include <cstdint>

namespace k3::kernels {

namespace {

constexpr int kLatent = kMlaDecodeLatentDim;
constexpr int kWidth = kMlaDecodeCacheWidth;
constexpr int kRowChunks = kWidth * 2 / 16;  // 72 chunks of 16 bytes per token row
constexpr int kHeadsPerBlock = 64;           // the wgmma M tile
constexpr int kTileTokens = 64;
constexpr int kStages = 3;
constexpr int kThreads = 384;  // warpgroup 0: scores and loads; warpgroups 1, 2: output columns 0–255, 256–511
constexpr int kColumnsPerGroup = kLatent / 2;
constexpr int kScoreKSteps = kWidth / 16;  // 36
// Per-thread register limits after setmaxnreg; they sum to 3 × 168, what 384 threads get at launch.
constexpr int kScoreRegisters = 184;
constexpr int kOutputRegisters = 160;
static_assert(kScoreRegisters + 2 * kOutputRegisters == 3 * 168, "setmaxnreg moves registers within the block");
// Named barrier ids (0 is __syncthreads) and their thread counts.
constexpr int kTileLanded = 1;  // warpgroup 0: every loader's part of tile j has landed
constexpr int kPFull = 2;       // warpgroup 0 arrives, 1 and 2 sync: P_j, alpha_j and tile j are ready
constexpr int kPEmpty = 3;      // warpgroups 1, 2 arrive, 0 syncs: tile j's output product is done
constexpr int kSumsReady = 4;   // all: warpgroup 0 has written the row sums (one split)
constexpr int kLoaderThreads = 128;

// Shared memory (bytes from a 1024-aligned base): three token tiles [64 tokens × 576] in SW128 blocks (9 blocks of
// 64 rows × 128 bytes) | P [64 heads × 64 tokens] bf16, one K-major SW128 block | alpha [64] | l [64].
struct Smem {
  static constexpr int kOperandBytes = 64 * kWidth * 2;  // 73728
  static constexpr int kBlockBytes = 64 * 128;           // one SW128 block of 64 rows
  static constexpr int kKv = 0;
  static constexpr int kP = kKv + kStages * kOperandBytes;
  static constexpr int kAlpha = kP + kBlockBytes;
  static constexpr int kSum = kAlpha + kHeadsPerBlock * 4;
  static constexpr int kBytes = kSum + kHeadsPerBlock * 4;
  static constexpr int kAllocBytes = kBytes + 1024;  // slack to align the base
};
static_assert(Smem::kAllocBytes <= 232448, "an H200 block gets at most 227 KiB of shared memory");
static_assert(Smem::kP % 1024 == 0, "P is an SW128 block: 1024-byte aligned");
static_assert(kRowChunks * kTileTokens % kLoaderThreads == 0, "the loader: equal chunks per thread");

using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait_all;

// Waits until at most one of this thread's cp.async groups is in flight.
__device__ __forceinline__ void cp_async_wait_one_pending() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

// Grid: x = split · head_groups + head group, y = sequence (as mla_decode_wgmma). Warpgroup wg = threadIdx.x / 128;
// its warp w = warp % 4, lane = 4g + t owns accumulator rows (heads) 16w + g and 16w + g + 8 (wgmma_sm90.h).
__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_wgmma_specialized_split_kv(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ pages,
                                          const int32_t* __restrict__ page_table,
                                          const int32_t* __restrict__ context_tokens, float scale_log2, int heads,
                                          int page_tokens, int max_pages, int max_context, int head_groups,
                                          int splits, float* __restrict__ partial_out,
                                          float2* __restrict__ partial_stats, float* __restrict__ out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  float* alpha_s = reinterpret_cast<float*>(smem + Smem::kAlpha);
  float* sum_s = reinterpret_cast<float*>(smem + Smem::kSum);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wg = warp >> 2;
  const int g = lane >> 2, t4 = lane & 3;
  const int row_lo = 16 * (warp & 3) + g;  // this thread's accumulator rows: row_lo, row_lo + 8
  const int group = blockIdx.x % head_groups, split = blockIdx.x / head_groups, b = blockIdx.y;
  const int head0 = group * kHeadsPerBlock;

  const int context = min(max(context_tokens[b], 0), max_context);
  const int tiles = (context + kTileTokens - 1) / kTileTokens;
  const int tiles_per_split = (tiles + splits - 1) / splits;
  const int tile_begin = min(split * tiles_per_split, tiles);
  const int tile_end = min(tile_begin + tiles_per_split, tiles);

  if (wg == 0) {
    wgmma::set_max_registers<kScoreRegisters, true>();
    // Loader role: thread i fills row i / 2 of a tile, chunks i % 2, i % 2 + 2, … (36 of 72).
    const int load_row = threadIdx.x >> 1, load_chunk0 = threadIdx.x & 1;
    const auto load_tile = [&](int tile, int stage) {
      const int token = tile * kTileTokens + load_row;
      const bool valid = token < context;
      const __nv_bfloat16* src = pages;
      if (valid) {
        const int64_t page = page_table[int64_t(b) * max_pages + token / page_tokens];
        src = pages + (page * page_tokens + token % page_tokens) * kWidth;
      }
      const uint32_t dst = base + Smem::kKv + stage * Smem::kOperandBytes;
#pragma unroll 4
      for (int chunk = load_chunk0; chunk < kRowChunks; chunk += 2)
        cp_async_16(dst + wgmma::sw128_offset(kTileTokens, load_row, chunk), src + (valid ? chunk * 8 : 0), valid);
    };
    // Tiles begin and begin + 1, one cp.async group each (empty groups keep the count: group n is tile begin + n).
    if (tile_begin < tile_end) load_tile(tile_begin, 0);
    cp_async_commit();
    if (tile_begin + 1 < tile_end) load_tile(tile_begin + 1, 1);
    cp_async_commit();

    // Q's A fragments for k steps 0 … 35 (wgmma_sm90.h): qa[ks][r] holds row row_lo + 8·(r % 2), columns
    // 16ks + 8·(r / 2) + 2t (+1); rows past the last head are zeros.
    uint32_t qa[kScoreKSteps][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int head = head0 + row_lo + 8 * (r & 1);
      const uint32_t* src =
          reinterpret_cast<const uint32_t*>(q + (int64_t(b) * heads + min(head, heads - 1)) * kWidth);
#pragma unroll
      for (int ks = 0; ks < kScoreKSteps; ++ks)
        qa[ks][r] = head < heads ? __ldg(src + (16 * ks + 8 * (r >> 1) + 2 * t4) / 2) : 0u;
    }

    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
    int stage = 0;
    for (int tile = tile_begin; tile < tile_end; ++tile) {
      cp_async_wait_one_pending();         // this thread's part of tile `tile` (group tile − begin) has landed
      wgmma::fence_proxy_async_shared();   // written by cp.async, read next by wgmma (here and in warpgroups 1, 2)
      wgmma::named_barrier_sync(kTileLanded, kLoaderThreads);  // every loader's part
      const uint32_t kv_smem = base + Smem::kKv + stage * Smem::kOperandBytes;

      float s[kTileTokens / 2];
#pragma unroll
      for (int i = 0; i < kTileTokens / 2; ++i) s[i] = 0.0f;
      wgmma::fence_registers(s);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < kScoreKSteps; ++ks)
        wgmma::wgmma_m64n64k16_rs<0>(
            s, qa[ks], wgmma::sw128_descriptor(kv_smem + (ks >> 2) * Smem::kBlockBytes + (ks & 3) * 32, 16, 1024));
      wgmma::commit_group();

      // While the score product runs: wait until warpgroups 1 and 2 are done with tile − 1 (its stage and P are
      // free), then load tile + 2 into that stage.
      if (tile > tile_begin) wgmma::named_barrier_sync(kPEmpty, kThreads);
      if (tile + 2 < tile_end) load_tile(tile + 2, stage == 0 ? 2 : stage - 1);
      cp_async_commit();

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
      float m_new[2], alpha[2], tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        m_new[h] = fmaxf(m_run[h], tile_max[h]);  // finite: the tile's first token is in the context
        alpha[h] = exp2f(m_run[h] - m_new[h]);    // 0 on the first tile (m_run = −∞)
      }
      // P row row_lo + 8h, tokens 8j + 2t, +1: 4 bytes at byte 4t of chunk j of that row (K-major SW128 block).
#pragma unroll
      for (int j = 0; j < kTileTokens / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const __nv_bfloat162 p =
              __floats2bfloat162_rn(exp2f(s[4 * j + 2 * h] - m_new[h]), exp2f(s[4 * j + 2 * h + 1] - m_new[h]));
          const float2 rounded = __bfloat1622float2(p);  // the sum of exactly what the output product uses
          tile_sum[h] += rounded.x + rounded.y;
          *reinterpret_cast<__nv_bfloat162*>(smem + Smem::kP + wgmma::sw128_offset(64, row_lo + 8 * h, j) +
                                             4 * t4) = p;
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 1);
        tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 2);
        l_run[h] = l_run[h] * alpha[h] + tile_sum[h];
        m_run[h] = m_new[h];
      }
      if (t4 == 0) {
        alpha_s[row_lo] = alpha[0];
        alpha_s[row_lo + 8] = alpha[1];
      }
      wgmma::fence_proxy_async_shared();  // P, written by st.shared, is read by wgmma
      wgmma::named_barrier_arrive(kPFull, kThreads);
      stage = stage == kStages - 1 ? 0 : stage + 1;
    }
    cp_async_wait_all();

    // Epilogue, this warpgroup's part: the row sums (one split) or this split's (max, sum); an empty split writes
    // only (−∞, 0), which the combine skips.
    if (t4 == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row_lo + 8 * h, head = head0 + row;
        if (splits == 1)
          sum_s[row] = l_run[h];
        else if (head < heads)
          partial_stats[(int64_t(b) * splits + split) * heads + head] = make_float2(m_run[h], l_run[h]);
      }
    }
    if (splits == 1) wgmma::named_barrier_sync(kSumsReady, kThreads);  // the sums are in shared memory
    return;
  }

  // Output warpgroups: columns 256·half + 8j + 2t (+1) of rows row_lo (o[4j], o[4j+1]) and row_lo + 8 (o[4j+2],
  // o[4j+3]).
  wgmma::set_max_registers<kOutputRegisters, false>();
  const int half = wg - 1;
  float o[kColumnsPerGroup / 2];
#pragma unroll
  for (int i = 0; i < kColumnsPerGroup / 2; ++i) o[i] = 0.0f;
  int stage = 0;
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    wgmma::named_barrier_sync(kPFull, kThreads);
    const uint32_t kv_smem = base + Smem::kKv + stage * Smem::kOperandBytes;
    const float alpha_lo = alpha_s[row_lo], alpha_hi = alpha_s[row_lo + 8];
#pragma unroll
    for (int j = 0; j < kColumnsPerGroup / 8; ++j) {
      o[4 * j] *= alpha_lo;
      o[4 * j + 1] *= alpha_lo;
      o[4 * j + 2] *= alpha_hi;
      o[4 * j + 3] *= alpha_hi;
    }
    wgmma::fence_registers(o);
    wgmma::fence();
    // o += P · C over the tile: P k step kk at byte 32·kk of its block (K-major); C rows 16kk … 16kk+15 (two 8-row
    // groups, SBO 1024), columns 256·half … +255 (4 SW128 blocks from block 4·half, LBO one block).
#pragma unroll
    for (int kk = 0; kk < kTileTokens / 16; ++kk)
      wgmma::wgmma_m64n256k16_ss<1>(
          o, wgmma::sw128_descriptor(base + Smem::kP + kk * 32, 16, 1024),
          wgmma::sw128_descriptor(kv_smem + 4 * half * Smem::kBlockBytes + kk * 2048, Smem::kBlockBytes, 1024));
    wgmma::commit_group();
    wgmma::wait_group<0>();
    wgmma::fence_registers(o);
    if (tile + 1 < tile_end) wgmma::named_barrier_arrive(kPEmpty, kThreads);  // warpgroup 0 syncs before tile + 1
    stage = stage == kStages - 1 ? 0 : stage + 1;
  }

  if (splits == 1) wgmma::named_barrier_sync(kSumsReady, kThreads);  // warpgroup 0 has written the row sums
  if (splits > 1 && tile_begin == tile_end) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_lo + 8 * h, head = head0 + row;
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
    for (int j = 0; j < kColumnsPerGroup / 8; ++j) {
      const int column = half * kColumnsPerGroup + 8 * j + 2 * t4;
      *reinterpret_cast<float2*>(dst + column) = make_float2(o[4 * j + 2 * h] * factor, o[4 * j + 2 * h + 1] * factor);
    }
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a: the host side refuses before launching
#endif
}

// Sets the kernel's shared-memory attributes once per device (bit d of `configured` for device d < 64).
cudaError_t configure_kernel(int device) {
  static std::atomic<uint64_t> configured{0};
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (configured.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  cudaError_t status = cudaFuncSetAttribute(mla_decode_wgmma_specialized_split_kv,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, Smem::kAllocBytes);
  if (status != cudaSuccess) return status;
  status = cudaFuncSetAttribute(mla_decode_wgmma_specialized_split_kv, cudaFuncAttributePreferredSharedMemoryCarveout,
                                cudaSharedmemCarveoutMaxShared);
  if (status != cudaSuccess) return status;
  configured.fetch_or(bit, std::memory_order_release);
  return cudaSuccess;
}

}  // namespace

cudaError_t mla_decode_wgmma_specialized_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                                    const int32_t* page_table, const int32_t* context_tokens,
                                                    float scale_log2, const MlaDecodeShape& shape, int splits,
                                                    float* partial_out, float2* partial_stats, float* out,
                                                    cudaStream_t stream) {
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  K3_CHECK(mla_decode_wgmma_supported(device),
           "mla_decode wgmma_specialized: device {} is not compute capability 9.0; the algorithm is built for sm_90a "
           "only",
           device);
  status = configure_kernel(device);
  if (status != cudaSuccess) return status;
  const int groups = (shape.heads + kHeadsPerBlock - 1) / kHeadsPerBlock;
  const dim3 grid(unsigned(groups * splits), unsigned(shape.batch));
  mla_decode_wgmma_specialized_split_kv<<<grid, kThreads, Smem::kAllocBytes, stream>>>(
      q, cache_pages, page_table, context_tokens, scale_log2, shape.heads, shape.page_tokens,
      shape.max_pages_per_sequence, int(shape.max_context_tokens), groups, splits, partial_out, partial_stats, out);
  return cudaGetLastError();
}

}  // namespace k3::kernels
