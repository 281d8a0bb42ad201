#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_alternating.h"
#include "kernels/mla_decode_wgmma_rows.h"
#include "kernels/ptx/ptx_mma.h"
#include "kernels/ptx/shared_memory_config.h"
#include "kernels/ptx/wgmma_sm90.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <utility>

namespace k3::kernels {

namespace {

constexpr int kLatent = kMlaDecodeLatentDim;
constexpr int kWidth = kMlaDecodeCacheWidth;
constexpr int kRowChunks = kWidth * 2 / 16;  // 72 chunks of 16 bytes per token row (or head of Q)
constexpr int kHeadsPerBlock = 64;           // the wgmma M tile
constexpr int kTileTokens = 32;              // the score product's N, the output product's K
constexpr int kStages = 4;                   // tile slots: local tile i lives in slot i % 4
constexpr int kThreads = 256;                // two warpgroups
constexpr int kColumnsPerGroup = kLatent / 2;
constexpr int kScoreKSteps = kWidth / 16;         // 36
constexpr int kOutputKSteps = kTileTokens / 16;   // 2
constexpr int kChunksPerLoader = kRowChunks / 4;  // 18: a tile's owner loads it, 4 threads per token row

// Shared memory (bytes from a 1024-aligned base): Q [64 heads × 576] in SW128 blocks of 64 rows | 4 tile slots
// [32 tokens × 576] in SW128 blocks of 32 rows | P buffer w (warpgroup w's tiles): [2 k steps][128 threads] uint4 |
// softmax state w: alpha [64], running max [64], running sum [64].
struct Smem {
  static constexpr int kQBlockBytes = kHeadsPerBlock * 128;    // 8192
  static constexpr int kTileBlockBytes = kTileTokens * 128;    // 4096
  static constexpr int kQBytes = kHeadsPerBlock * kWidth * 2;  // 73728
  static constexpr int kTileBytes = kTileTokens * kWidth * 2;  // 36864
  static constexpr int kPBytes = kOutputKSteps * 128 * 16;     // 4096
  static constexpr int kStateBytes = 3 * kHeadsPerBlock * 4;   // 768
  static constexpr int kQ = 0;
  static constexpr int kTiles = kQ + kQBytes;
  static constexpr int kP = kTiles + kStages * kTileBytes;
  static constexpr int kState = kP + 2 * kPBytes;
  static constexpr int kBytes = kState + 2 * kStateBytes;  // 230912
  static constexpr int kAllocBytes = kBytes + 1024;        // slack to align the base
};
static_assert(Smem::kAllocBytes <= 232448, "an H200 block gets at most 227 KiB of shared memory");
static_assert(Smem::kTiles % 1024 == 0 && Smem::kTileBytes % 1024 == 0, "SW128 blocks must be 1024-byte aligned");
static_assert(kThreads / 2 == 4 * kTileTokens && kThreads == 4 * kHeadsPerBlock,
              "the loaders: 4 threads per token row in each warpgroup, 4 threads per head row of Q");

// Named barriers (id 0 is __syncthreads). Between the warpgroups, each met by one's bar.arrive and the other's
// bar.sync (256 threads):
//   kReady + w   warpgroup w has written P, alpha, max and sum of its tile i and retired its output product of tile
//                i − 1 (whose slot the other may then refill);
//   kFree + w    the other warpgroup has read warpgroup w's P buffer and softmax state.
// Inside warpgroup w (bar.sync by its 128 threads): kLanded + w, a tile it loaded has landed (all its threads have
// waited for their cp.async groups), before its score product reads it.
constexpr int kReadyBarrier = 1;
constexpr int kFreeBarrier = 3;
constexpr int kLandedBarrier = 5;

template <int kCount>
__device__ __forceinline__ void barrier_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kCount) : "memory");
}
__device__ __forceinline__ void barrier_arrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(kThreads) : "memory");
}
// Waits until at most kPending of this thread's committed cp.async groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Score k16 step kStep: d[16] = A · B + (kStep > 0 ? d : 0), m64n32k16, A = Q and B = the tile, both K-major from
// shared memory (wgmma_sm90.h's layouts: d[4j + e] holds row 16w + g + 8·(e/2), column 8j + 2t + e%2). The step's
// descriptors are the base descriptors plus constants (block kStep / 4, 32 bytes per step inside it; the start address
// is a descriptor's low 14 bits in 16-byte units and every shared address here is below 2^18, so the add never
// carries), added inside the asm so that the compiler cannot precompute all 72 of them into registers. Step 0 starts
// from zero instead of zeroing d: a non-wgmma write of accumulators between a wgmma and its wait makes ptxas
// serialise every wgmma of the kernel.
template <int kStep>
__device__ __forceinline__ void score_step(float (&d)[16], uint64_t q_desc, uint64_t tile_desc) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr uint64_t kInBlock = (kStep & 3) * 32;
  constexpr uint64_t kQOffset = ((kStep >> 2) * Smem::kQBlockBytes + kInBlock) >> 4;
  constexpr uint64_t kTileOffset = ((kStep >> 2) * Smem::kTileBlockBytes + kInBlock) >> 4;
  asm volatile(
      "{\n.reg .pred p;\n.reg .b64 qd, td;\nsetp.ne.b32 p, %18, 0;\nadd.s64 qd, %16, %19;\nadd.s64 td, %17, %20;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, qd, td, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(q_desc), "l"(tile_desc), "n"(kStep > 0 ? 1 : 0), "n"(kQOffset), "n"(kTileOffset));
#endif
}
template <int... kSteps>
__device__ __forceinline__ void score_steps(float (&d)[16], uint64_t q_desc, uint64_t tile_desc,
                                            std::integer_sequence<int, kSteps...>) {
  (score_step<kSteps>(d, q_desc, tile_desc), ...);
}

// Issues (and commits as one group) the score product s = Q · tileᵀ over the 576 columns.
__device__ __forceinline__ void issue_scores(float (&s)[kTileTokens / 2], uint32_t q_smem, uint32_t tile_smem) {
  wgmma::fence();
  score_steps(s, wgmma::sw128_descriptor(q_smem, 16, 1024), wgmma::sw128_descriptor(tile_smem, 16, 1024),
              std::make_integer_sequence<int, kScoreKSteps>());
  wgmma::commit_group();
}

// o = alpha · o + P · C over one tile, issued and committed as one group: C rows 16kk … 16kk+15 (two 8-row groups,
// SBO 1024), this warpgroup's 256 columns (4 SW128 blocks from `columns_smem`, LBO one block). The caller has waited
// for the previous output product. A warp whose rows all keep their scale (alpha = 1, exactly) skips the rescale.
__device__ __forceinline__ void issue_output(float (&o)[kColumnsPerGroup / 2], const uint32_t (&pa)[kOutputKSteps][4],
                                             float alpha_lo, float alpha_hi, uint32_t columns_smem) {
  if (__any_sync(0xffffffffu, alpha_lo != 1.0f || alpha_hi != 1.0f)) {
#pragma unroll
    for (int j = 0; j < kColumnsPerGroup / 8; ++j) {
      o[4 * j] *= alpha_lo;
      o[4 * j + 1] *= alpha_lo;
      o[4 * j + 2] *= alpha_hi;
      o[4 * j + 3] *= alpha_hi;
    }
  }
  wgmma::fence_registers(o);
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kOutputKSteps; ++kk)
    wgmma::wgmma_m64n256k16_rs<1>(o, pa[kk],
                                  wgmma::sw128_descriptor(columns_smem + kk * 2048, Smem::kTileBlockBytes, 1024));
  wgmma::commit_group();
}

using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait_all;

// Grid: x = split · head_groups + head group, y = sequence (as wgmma). Warpgroup wg = threadIdx.x / 128; its warp
// w = warp % 4, lane = 4g + t owns accumulator rows (heads) 16w + g and 16w + g + 8 (wgmma_sm90.h). Local tile i
// (tile_begin + i, slot i % 4) is owned by warpgroup i % 2, which loads all of it and computes its scores S(i).
//
// The steps of warpgroup w (n local tiles; the other warpgroup runs the mirror image):
//   other step i:  if i + 1 < n: wait for its cp.async of tile i + 1, landed barrier, issue S(i + 1) (it runs while
//                  the owner of tile i does the softmax); sync ready(owner); wait_group 0 (S(i + 1) and O(i − 1));
//                  read P(i), alpha, max, sum; arrive free(owner) if i + 2 < n; load tile i + 3 if i + 3 < n;
//                  rescale, issue O(i).
//   owned step i:  softmax of S(i) (retired at the step before, or in the prologue for i = 0) while O(i − 1) may run;
//                  sync free(w) if i ≥ 2; write P(i), alpha, max, sum; wait_group 0 (O(i − 1)); arrive ready(w);
//                  rescale, issue O(i).
// Every wait is wait_group 0: ptxas keeps the products asynchronous only while no accumulator of a wgmma in flight,
// or of one issued after it before the wait, is touched by other instructions, and it tells groups apart only at a
// wait_group 0 (a wait_group 1 that lets the rescale run beside S(i + 1) made it serialise every wgmma).
// Buffers:
//   slot (i + 3) % 4 = (i − 1) % 4, refilled at the other step i by the owner of tile i + 3 (= of i − 1): its own
//     products of tile i − 1 (S at step i − 2, O at step i − 1) retired at its waits since; the other warpgroup's O(i −
//     1) retired before its ready(i) arrival, which was synced at this step. Tile i + 3 is first read by S(i + 3) at
//     the other step i + 2, after the owner's cp.async wait and landed barrier there (its only cp.async group committed
//     since is this one, so wait_group 0 waits for nothing later), and by the other warpgroup's O(i + 3) after
//     ready(i + 3), which the owner arrives at after that wait and its proxy fence.
//   P buffer and softmax state w: written at w's owned step i after free(w) from the other's step i − 2 (which read
//     them before arriving), read at the other's step i after ready(w).
// Barrier pairing: ready(w) is arrived at by w at each owned step and synced by the other at the same step; free(w) is
// arrived at by the other at step i when i + 2 < n and synced by w at its owned step i + 2 (so both sides count the
// same phases, whatever n). No phase can start before the previous one of the same barrier completed: w's ready
// arrival at step i + 2 follows its free sync there, which needs the other's free arrival at step i, made after its
// ready sync at step i; the other's free arrival at step i + 2 follows its ready sync there, which needs w's ready
// arrival at step i + 2, made after w's free sync there.
__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_wgmma_alternating_split_kv(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ pages,
                                          const int32_t* __restrict__ page_table,
                                          const int32_t* __restrict__ context_tokens, float scale_log2, int heads,
                                          int page_tokens, int max_pages, int max_context, int head_groups, int splits,
                                          float* __restrict__ partial_out, float2* __restrict__ partial_stats,
                                          float* __restrict__ out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wg = __shfl_sync(0xffffffffu, warp >> 2, 0), wg_thread = threadIdx.x & 127;
  const int g = lane >> 2, t4 = lane & 3;
  const int row_lo = 16 * (warp & 3) + g;  // this thread's accumulator rows: row_lo, row_lo + 8
  const int group = blockIdx.x % head_groups, split = blockIdx.x / head_groups, b = blockIdx.y;
  const int head0 = group * kHeadsPerBlock;

  const mla_wgmma::SplitTiles range =
      mla_wgmma::split_tiles<kTileTokens>(context_tokens, b, max_context, splits, split);
  const int context = range.context, tile_begin = range.begin;
  const int n = range.end - tile_begin;  // local tiles of this split

  // Loader role (in the tile's owner): thread wg_thread fills token row wg_thread / 4, chunks l, l + 4, …, l + 68,
  // l = wg_thread % 4.
  const int load_row = wg_thread >> 2, load_lane = wg_thread & 3;
  const auto load_tile = [&](int i) {
    const int token = (tile_begin + i) * kTileTokens + load_row;
    const bool valid = token < context;
    const __nv_bfloat16* src =
        valid ? mla_wgmma::token_row(pages, page_table, b, max_pages, page_tokens, token) : pages;
    // Chunk l + 4c sits in block c / 2 at swizzled position (l + 4·(c % 2)) ^ (row % 8) (wgmma::sw128_offset), so the
    // 18 addresses are two registers plus constants.
    const uint32_t dst = base + Smem::kTiles + (i % kStages) * Smem::kTileBytes + load_row * 128;
    const uint32_t dst_even = dst + ((load_lane ^ (load_row & 7)) << 4);
    const uint32_t dst_odd = dst + (((load_lane + 4) ^ (load_row & 7)) << 4);
#pragma unroll
    for (int c = 0; c < kChunksPerLoader; ++c) {
      const int chunk = load_lane + 4 * c;
      cp_async_16((c & 1 ? dst_odd : dst_even) + (c >> 1) * Smem::kTileBlockBytes, src + (valid ? chunk * 8 : 0),
                  valid);
    }
  };

  // Output accumulators: columns 256·wg + 8j + 2t (+1) of rows row_lo (o[4j], o[4j+1]) and row_lo + 8 (o[4j+2],
  // o[4j+3]). Both warpgroups keep the running max and sum after the latest tile (the 4 threads of a row alike).
  float o[kColumnsPerGroup / 2];
#pragma unroll
  for (int i = 0; i < kColumnsPerGroup / 2; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  float s[kTileTokens / 2];  // scores of this warpgroup's next tile
  const uint32_t q_smem = base + Smem::kQ;
  const auto tile_smem = [&](int i) { return base + Smem::kTiles + uint32_t(i % kStages) * Smem::kTileBytes; };
  const uint32_t columns_offset = 4 * wg * Smem::kTileBlockBytes;  // this warpgroup's 4 column blocks in a slot

  if (n > 0) {
    {  // Q (all 256 threads, 4 per head row, rows past the last head zero-filled), in the first cp.async group.
      const int head_row = threadIdx.x >> 2, chunk0 = threadIdx.x & 3, head = head0 + head_row;
      const bool valid = head < heads;
      const __nv_bfloat16* src = valid ? q + (int64_t(b) * heads + head) * kWidth : q;
      for (int chunk = chunk0; chunk < kRowChunks; chunk += 4)
        cp_async_16(q_smem + wgmma::sw128_offset(kHeadsPerBlock, head_row, chunk), src + (valid ? chunk * 8 : 0),
                    valid);
    }
    if (wg < n) load_tile(wg);  // warpgroup 1 with n = 1 loads only its part of Q
    cp_async_commit();
    if (wg == 0 && n > 2) load_tile(2);
    cp_async_commit();         // empty in warpgroup 1, whose next tile (3) is loaded at step 0
    cp_async_wait_group<1>();  // Q and tile 0 (tile 1 in warpgroup 1)
    wgmma::fence_proxy_async_shared();
    __syncthreads();
  }

  // One step per tile, as its owner or as the other warpgroup (the roles above).
  const auto p_buffer_of = [&](int i) { return reinterpret_cast<uint4*>(smem + Smem::kP + (i & 1) * Smem::kPBytes); };
  const auto state_of = [&](int i) {  // alpha | max | sum
    return reinterpret_cast<float*>(smem + Smem::kState + (i & 1) * Smem::kStateBytes);
  };
  const auto owned_step = [&](int i) {
    uint4* p_buffer = p_buffer_of(i);
    float* state = state_of(i);
    // S(i) has retired (at the step before, or in the prologue); O(i − 1) may still run.

    // s[4j + e]: token 32·tile + 8j + 2t + e % 2 of row row_lo + 8·(e / 2). Scale, mask past the context.
    const int token0 = (tile_begin + i) * kTileTokens + 2 * t4;
    float scaled[kTileTokens / 2], tile_max[2] = {-INFINITY, -INFINITY};  // (s itself stays an accumulator)
#pragma unroll
    for (int k = 0; k < kTileTokens / 2; ++k) {
      const int token = token0 + 8 * (k >> 2) + (k & 1);
      scaled[k] = token < context ? s[k] * scale_log2 : -INFINITY;
      tile_max[(k & 3) >> 1] = fmaxf(tile_max[(k & 3) >> 1], scaled[k]);
    }
    float m_new[2], alpha[2];
    uint32_t pa[kOutputKSteps][4];  // P as the A fragments of the output product's 2 k16 steps
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      m_new[h] = fmaxf(m_run[h], tile_max[h]);  // finite: the tile's first token is in the context
      alpha[h] = exp2f(m_run[h] - m_new[h]);    // 0 on the split's first tile (m_run = −∞)
    }
    // A fragment r of k step kk: from s[8kk + 2r], s[8kk + 2r + 1] (row half r % 2; tokens 16kk + 2t (+8 for r ≥ 2)).
    mla_wgmma::p_fragments(scaled, m_new, alpha, pa, l_run, m_run);

    if (i >= 2) barrier_sync<kThreads>(kFreeBarrier + wg);  // the other warpgroup has read this buffer's tile i − 2
#pragma unroll
    for (int kk = 0; kk < kOutputKSteps; ++kk)
      p_buffer[kk * 128 + wg_thread] = make_uint4(pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3]);
    if (t4 == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        state[row_lo + 8 * h] = alpha[h];
        state[kHeadsPerBlock + row_lo + 8 * h] = m_run[h];
        state[2 * kHeadsPerBlock + row_lo + 8 * h] = l_run[h];
      }
    }
    wgmma::wait_group<0>();  // O(i − 1)
    wgmma::fence_registers(o);
    barrier_arrive(kReadyBarrier + wg);
    issue_output(o, pa, alpha[0], alpha[1], tile_smem(i) + columns_offset);
  };
  const auto other_step = [&](int i) {
    const int owner = i & 1;
    uint4* p_buffer = p_buffer_of(i);
    float* state = state_of(i);
    if (i + 1 < n) {             // S(i + 1), its own next tile, runs while the owner of tile i does its softmax
      cp_async_wait_group<0>();  // tile i + 1, loaded at step i − 2 (in the prologue for i < 2)
      wgmma::fence_proxy_async_shared();
      barrier_sync<kThreads / 2>(kLandedBarrier + wg);
      issue_scores(s, q_smem, tile_smem(i + 1));
    }
    barrier_sync<kThreads>(kReadyBarrier + owner);
    wgmma::wait_group<0>();  // S(i + 1) and O(i − 1), whose P registers the P read next may then take
    wgmma::fence_registers(s);
    wgmma::fence_registers(o);
    // The same rows and fragment positions as the owner's thread wg_thread.
    uint32_t pa[kOutputKSteps][4];
#pragma unroll
    for (int kk = 0; kk < kOutputKSteps; ++kk) {
      const uint4 v = p_buffer[kk * 128 + wg_thread];
      pa[kk][0] = v.x, pa[kk][1] = v.y, pa[kk][2] = v.z, pa[kk][3] = v.w;
    }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      alpha[h] = state[row_lo + 8 * h];
      m_run[h] = state[kHeadsPerBlock + row_lo + 8 * h];
      l_run[h] = state[2 * kHeadsPerBlock + row_lo + 8 * h];
    }
    if (i + 2 < n) barrier_arrive(kFreeBarrier + owner);  // the owner rewrites this buffer at step i + 2
    // Tile i + 3 (its own) into the slot of tile i − 1: this warpgroup's products of it have retired, and the other's
    // output product retired before the ready barrier just passed.
    if (i + 3 < n) load_tile(i + 3);
    cp_async_commit();
    issue_output(o, pa, alpha[0], alpha[1], tile_smem(i) + columns_offset);
  };
  // Each warpgroup's steps in pairs, so that its role at each step is fixed in the code (and the wgmma groups in flight
  // at every wait are the same on every path, which ptxas needs to keep the products asynchronous).
  if (n > 0) {
    wgmma::fence_registers(o);  // the zeros set here, not sunk past the first wgmma (ptxas would serialise them all)
    if (wg == 0) {
      issue_scores(s, q_smem, tile_smem(0));
      wgmma::wait_group<0>();
      wgmma::fence_registers(s);
      int i = 0;
      do {
        owned_step(i);
        if (i + 1 < n) other_step(i + 1);
        i += 2;
      } while (i < n);
    } else {
      int i = 0;
      do {
        other_step(i);
        if (i + 1 < n) owned_step(i + 1);
        i += 2;
      } while (i < n);
    }
    wgmma::wait_group<0>();
    wgmma::fence_registers(o);
  }
  cp_async_wait_all();

  // Epilogue. One split: normalise and write out. Several: this split's unnormalised output and (max, sum); an
  // empty split writes only (−∞, 0), which the combine skips.
  if (splits > 1) {
    if (wg == 0 && t4 == 0)
      mla_wgmma::store_split_stats(partial_stats, b, splits, split, heads, head0, row_lo, m_run, l_run);
    if (n == 0) return;
  }
  mla_wgmma::store_rows<kColumnsPerGroup>(o, out, partial_out, b, splits, split, heads, head0, row_lo, wg, t4,
                                          [&](int h) { return l_run[h]; });
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a: the host side refuses before launching
#endif
}

// Sets the kernel's shared-memory attributes once per device.
cudaError_t configure_kernel(int device) {
  static std::atomic<uint64_t> configured{0};
  return allow_dynamic_shared_memory_once(mla_decode_wgmma_alternating_split_kv, Smem::kAllocBytes, device, configured);
}

}  // namespace

cudaError_t mla_decode_wgmma_alternating_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                                    const int32_t* page_table, const int32_t* context_tokens,
                                                    float scale_log2, const MlaDecodeShape& shape, int splits,
                                                    float* partial_out, float2* partial_stats, float* out,
                                                    cudaStream_t stream) {
  int device = 0;
  cudaError_t status = mla_decode_wgmma_device(device);
  if (status != cudaSuccess) return status;
  status = configure_kernel(device);
  if (status != cudaSuccess) return status;
  const int groups = (shape.heads + kHeadsPerBlock - 1) / kHeadsPerBlock;
  const dim3 grid(unsigned(groups * splits), unsigned(shape.batch));
  mla_decode_wgmma_alternating_split_kv<<<grid, kThreads, Smem::kAllocBytes, stream>>>(
      q, cache_pages, page_table, context_tokens, scale_log2, shape.heads, shape.page_tokens,
      shape.max_pages_per_sequence, int(shape.max_context_tokens), groups, splits, partial_out, partial_stats, out);
  return cudaGetLastError();
}

}  // namespace k3::kernels
