#include "kernels/mla_cache_tensor_map.h"
#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_cluster.h"
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
#include <utility>

namespace k3::kernels {

namespace {

constexpr int kLatent = kMlaDecodeLatentDim;
constexpr int kWidth = kMlaDecodeCacheWidth;
constexpr int kBlockHeads = kMlaDecodeClusterMaxHeads / 2;  // 48: N of both products, per block
constexpr int kTileTokens = 64;                             // M of the score product, K of the output product
constexpr int kColumnBlocks = kWidth / 64;                  // 9 SW128 blocks of 64 columns per tile and Q row
constexpr int kRankZeroBlocks = 5;                          // blocks 0–4 copied by rank 0's TMA, 5–8 by rank 1's
constexpr int kSlots = 2;
constexpr int kConsumerThreads = 256;
constexpr int kThreads = kConsumerThreads + 128;  // and the loader warpgroup
constexpr int kLoaderRegisters = 40;              // setmaxnreg: the loader gives registers to the consumers
constexpr int kConsumerRegisters = 232;           // 128 · 40 + 256 · 232 ≤ 65536
constexpr int kOutputBlocks0 = 2;                 // latent m-tiles of the output product in warpgroup 0; 6 in 1
constexpr int kDeferred = 4;  // warpgroup 1's m-tiles of O(i) issued after S(i + 1), beside the softmax of tile i + 1
static_assert(kDeferred > 0 && kDeferred <= 8 - kOutputBlocks0, "warpgroup 1 defers some of its 6 m-tiles");
constexpr float kMaxSlack = 8.0f;  // log2 units a score may pass the running max before it moves

struct Smem {
  static constexpr int kQBlockBytes = kBlockHeads * 128;              // 6144: 48 head rows of 64 bf16
  static constexpr int kSlotBlockBytes = kTileTokens * 128;           // 8192: 64 token rows of 64 bf16
  static constexpr int kSlotBytes = kColumnBlocks * kSlotBlockBytes;  // 73728
  static constexpr int kPBytes = kTileTokens * 128;  // P MN-major: 64 token rows, 48 heads in the first 96 bytes
  static constexpr int kQ = 0;
  static constexpr int kSlots_ = kQ + kColumnBlocks * kQBlockBytes;
  static constexpr int kP = kSlots_ + kSlots * kSlotBytes;      // [2] P of tile i at i % 2
  static constexpr int kAlpha = kP + kSlots * kPBytes;          // [2][48] fp32: O's rescale for tile i at i % 2
  static constexpr int kFlags = kAlpha + 2 * kBlockHeads * 4;   // [2] int: tile i moved the running max
  static constexpr int kReduce = kFlags + 16;                   // [4 warps][48] fp32: column maxima, then sums
  static constexpr int kStats = kReduce + 4 * kBlockHeads * 4;  // [2][48] fp32: final max and sum per head
  static constexpr int kBarriers = kStats + 2 * kBlockHeads * 4;
  static constexpr int kBarrierCount = 2 * kSlots * kColumnBlocks;
  static constexpr int kBytes = kBarriers + kBarrierCount * 8;
  static constexpr int kAllocBytes = kBytes + 1024;  // slack to align the base
};
static_assert(Smem::kAllocBytes <= 232448, "an H200 block gets at most 227 KiB of shared memory");
static_assert(Smem::kSlots_ % 1024 == 0 && Smem::kP % 1024 == 0 && Smem::kQBlockBytes % 1024 == 0,
              "SW128 blocks must be 1024-byte aligned");
static_assert(Smem::kBarriers % 8 == 0, "mbarriers are 8-byte aligned");

// mbarrier indices (8 bytes each from Smem::kBarriers), one pair per column block of each slot.
constexpr int kBlockFull = 0;  // [2][9] the block of the slot's tile landed: the loader's arrival, and the bulk-tensor
                               // bytes expected when the tile comes by TMA (from whichever block copied it)
constexpr int kBlockEmpty = kSlots * kColumnBlocks;  // [2][9] both blocks' last reader of the column block is done
                                                     // (2 arrivals)

// Named barriers.
constexpr int kPFullBarrier = 1;         // + i % 2: P(i) and alpha(i) written (warpgroup 0 arrives, 1 waits)
constexpr int kScoresIssuedBarrier = 3;  // warpgroup 0 issued S(i + 1) (it arrives, 1 waits to issue O(i)'s rest)
constexpr int kLoaderBarrier = 4;        // the loader's 128 threads (tiles copied by cp.async)
constexpr int kGroup0Barrier = 5;        // warpgroup 0's 128 threads
constexpr int kConsumerBarrier = 6;      // both warpgroups: the per-head sums written (warpgroup 0 arrives, 1 waits)
constexpr int kOutputIssuedBarrier = 7;  // warpgroup 1 issued O(i)'s first m-tiles (0 waits before issuing S(i + 1))

__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// Barrier over `count` threads returning whether any of them passed `value` true.
__device__ __forceinline__ bool named_barrier_any(int id, int count, bool value) {
  uint32_t result = 0;
  asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, %2, %3, p;\nselp.u32 %0, 1, 0, q;\n}\n"
               : "=r"(result)
               : "r"(uint32_t(value)), "r"(id), "r"(count)
               : "memory");
  return result != 0;
}

// 2^x by the hardware's approximation (MUFU.EX2, flushing denormals; 2^-∞ = 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Asks the L2 for `bytes` (a multiple of 16) from `src` (the bulk-copy unit; no completion to wait for).
__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
#endif
}

// One piece of a tile (box_rows cached rows × 64 columns, inside one page) by TMA into the same shared-memory offset
// of both blocks of the cluster, counted on the barrier at the same offset in each.
__device__ __forceinline__ void tma_multicast(uint32_t dst, const CUtensorMap& map, int column, int row,
                                              uint32_t barrier) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
      "{%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(column), "r"(row), "r"(barrier), "h"(uint16_t(3))
      : "memory");
#endif
}

// Descriptors as two 32-bit halves: the low word start address >> 4 | (leading byte offset >> 4) << 16, the high
// word the stride byte offset 1024 >> 4 and the 128-byte swizzle (wgmma_sm90.h's sw128_descriptor). A step's offset is
// added to the low word inside the asm (start addresses stay below 2^14 units, so it never carries), so each product
// costs two adds rather than 64-bit descriptor arithmetic.
constexpr uint32_t kDescriptorHigh = (1024u >> 4) | (1u << 30);
__device__ __forceinline__ uint32_t descriptor_low(uint32_t smem_address, uint32_t leading_bytes) {
  return (smem_address >> 4) | ((leading_bytes >> 4) << 16);
}

// d (+)= A · B, m64n48k16, both operands from shared memory: A and B at descriptor low words a_low + kAOffset and
// b_low + kBOffset (16-byte units); kAccumulate false writes d without reading it.
#define K3_M64N48_WGMMA(D, SCALE_D)                                                                                  \
  asm volatile("{\n.reg .pred p;\n.reg .b32 la, lb;\n.reg .b64 da, db;\nsetp.ne.b32 p, " SCALE_D                     \
               ", 0;\n"                                                                                              \
               "add.u32 la, %24, %26;\nadd.u32 lb, %25, %27;\nmov.b64 da, {la, %28};\nmov.b64 db, {lb, %28};\n"      \
               "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {"                                              \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                              \
               "%16, %17, %18, %19, %20, %21, %22, %23}, da, db, p, 1, 1, %29, %30;\n}\n"                            \
               : D(d[0]), D(d[1]), D(d[2]), D(d[3]), D(d[4]), D(d[5]), D(d[6]), D(d[7]), D(d[8]), D(d[9]), D(d[10]), \
                 D(d[11]), D(d[12]), D(d[13]), D(d[14]), D(d[15]), D(d[16]), D(d[17]), D(d[18]), D(d[19]), D(d[20]), \
                 D(d[21]), D(d[22]), D(d[23])                                                                        \
               : "r"(a_low), "r"(b_low), "n"(kAOffset), "n"(kBOffset), "n"(kDescriptorHigh), "n"(kTransA),           \
                 "n"(kTransB))
#define K3_WRITE_ONLY(x) "=f"(x)
#define K3_READ_WRITE(x) "+f"(x)
template <bool kAccumulate, uint32_t kAOffset, uint32_t kBOffset, int kTransA, int kTransB>
__device__ __forceinline__ void mma_m64n48(float (&d)[24], uint32_t a_low, uint32_t b_low) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kAccumulate) {
    K3_M64N48_WGMMA(K3_READ_WRITE, "1");
  } else {
    K3_M64N48_WGMMA(K3_WRITE_ONLY, "0");
  }
#endif
}
#undef K3_M64N48_WGMMA
#undef K3_WRITE_ONLY
#undef K3_READ_WRITE

// Sᵀ = tile · Qᵀ over the 576 columns (both K-major SW128: block k / 4, 32 bytes per step inside it), issued column
// block by column block as each lands (`wait(block)`), 8 first (the block its slot frees first), and committed as one
// group.
template <int kStep, bool kAccumulate>
__device__ __forceinline__ void score_step(float (&s)[24], uint32_t tile_low, uint32_t q_low) {
  constexpr uint32_t kTile = uint32_t((kStep / 4) * Smem::kSlotBlockBytes + (kStep % 4) * 32) / 16;
  constexpr uint32_t kQ = uint32_t((kStep / 4) * Smem::kQBlockBytes + (kStep % 4) * 32) / 16;
  mma_m64n48<kAccumulate, kTile, kQ, 0, 0>(s, tile_low, q_low);
}
template <int kBlock, bool kFirst>
__device__ __forceinline__ void score_block(float (&s)[24], uint32_t tile_low, uint32_t q_low) {
  score_step<4 * kBlock, !kFirst>(s, tile_low, q_low);
  score_step<4 * kBlock + 1, true>(s, tile_low, q_low);
  score_step<4 * kBlock + 2, true>(s, tile_low, q_low);
  score_step<4 * kBlock + 3, true>(s, tile_low, q_low);
}
template <typename Wait, int... kBlocks>
__device__ __forceinline__ void score_blocks(float (&s)[24], uint32_t tile_low, uint32_t q_low, const Wait& wait,
                                             std::integer_sequence<int, kBlocks...>) {
  ((wait(kBlocks), score_block<kBlocks, false>(s, tile_low, q_low)), ...);
}
template <typename Wait>
__device__ __forceinline__ void issue_scores(float (&s)[24], uint32_t slot_smem, uint32_t q_smem, const Wait& wait) {
  const uint32_t tile_low = descriptor_low(slot_smem, 16), q_low = descriptor_low(q_smem, 16);
  wait(kColumnBlocks - 1);
  score_block<kColumnBlocks - 1, true>(s, tile_low, q_low);
  score_blocks(s, tile_low, q_low, wait, std::make_integer_sequence<int, kColumnBlocks - 1>());
  wgmma::commit_group();
}

// Oᵀ += Cᵀ · P for m-tile kMt of the slot's latent columns (MN-major through trans-a: 2048 bytes per k16 step,
// 64-column blocks 8 KiB apart) and P (MN-major through trans-b: 64 token rows, 48 heads).
template <int kMt>
__device__ __forceinline__ void output_tile(float (&o)[24], uint32_t slot_low, uint32_t p_low) {
  constexpr uint32_t kColumns = uint32_t(kMt * Smem::kSlotBlockBytes) / 16;
  mma_m64n48<true, kColumns, 0, 1, 1>(o, slot_low, p_low);
  mma_m64n48<true, kColumns + 2048 / 16, 2048 / 16, 1, 1>(o, slot_low, p_low);
  mma_m64n48<true, kColumns + 4096 / 16, 4096 / 16, 1, 1>(o, slot_low, p_low);
  mma_m64n48<true, kColumns + 6144 / 16, 6144 / 16, 1, 1>(o, slot_low, p_low);
}
// M-tiles kFirst … kFirst + kCount − 1 (accumulators o[kIndex0 …]) as one group, or one group each (kGroupEach).
template <int kFirst, int kIndex0, bool kGroupEach, int kN, int... kMt>
__device__ __forceinline__ void issue_output(float (&o)[kN][24], uint32_t slot_smem, uint32_t p_smem,
                                             std::integer_sequence<int, kMt...>) {
  if constexpr (sizeof...(kMt) > 0) {
    (wgmma::fence_registers(o[kIndex0 + kMt]), ...);
    wgmma::fence();
    const uint32_t slot_low = descriptor_low(slot_smem, Smem::kSlotBlockBytes);
    const uint32_t p_low = descriptor_low(p_smem, Smem::kPBytes);
    if constexpr (kGroupEach) {
      ((output_tile<kFirst + kMt>(o[kIndex0 + kMt], slot_low, p_low), wgmma::commit_group()), ...);
    } else {
      (output_tile<kFirst + kMt>(o[kIndex0 + kMt], slot_low, p_low), ...);
      wgmma::commit_group();
    }
  }
}

// wgmma.wait_group with its count known only after unrolling.
__device__ __forceinline__ void wait_group_unrolled(int pending) {
  switch (pending) {
    case 0: wgmma::wait_group<0>(); break;
    case 1: wgmma::wait_group<1>(); break;
    case 2: wgmma::wait_group<2>(); break;
    case 3: wgmma::wait_group<3>(); break;
    case 4: wgmma::wait_group<4>(); break;
    default: wgmma::wait_group<5>(); break;
  }
}

// The thread's accumulator columns (heads) 8j + 2t + e, j = 0 … 5, scaled by alpha[8j + 2t + e].
template <int kCount>
__device__ __forceinline__ void rescale(float (&o)[kCount][24], const float* alpha, int t4) {
#pragma unroll
  for (int j = 0; j < 6; ++j) {
    const float2 a = *reinterpret_cast<const float2*>(alpha + 8 * j + 2 * t4);
#pragma unroll
    for (int mt = 0; mt < kCount; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][4 * j + e] *= (e & 1) ? a.y : a.x;
  }
}

// The thread's output rows (m-tiles kFirst … of Oᵀ: latent columns 64·m + row_lo (+8), heads head0 + 8j + 2t + e):
// with one split normalised by the head's sum into out; else unnormalised into partial_out [batch, splits, heads, 512].
template <int kFirst, int kCount>
__device__ __forceinline__ void store_output(const float (&o)[kCount][24], const float* sums, float* out,
                                             float* partial_out, int b, int splits, int split, int heads, int head0,
                                             int row_lo, int t4) {
#pragma unroll
  for (int j = 0; j < 6; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = 8 * j + 2 * t4 + e, head = head0 + c;
      if (head >= heads) continue;
      float factor = 1.0f;
      float* dst;
      if (splits == 1) {
        factor = sums[c] > 0.0f ? 1.0f / sums[c] : 0.0f;  // a sequence with no tokens gets zeros
        dst = out + (int64_t(b) * heads + head) * kLatent;
      } else {
        dst = partial_out + ((int64_t(b) * splits + split) * heads + head) * kLatent;
      }
#pragma unroll
      for (int mt = 0; mt < kCount; ++mt) {
        const int column = 64 * (kFirst + mt) + row_lo;
        dst[column] = o[mt][4 * j + e] * factor;
        dst[column + 8] = o[mt][4 * j + 2 + e] * factor;
      }
    }
}

using ptx::cp_async_16;

// Grid: x = 2 · split + rank in the cluster, y = sequence; clusters of 2 along x. Block `rank` owns heads 48·rank …
// 48·rank + 47 of the split. Threads 0–127: warpgroup 0 (scores, softmax, output m-tiles 0–1); 128–255: warpgroup 1
// (output m-tiles 2–7); 256–383: the loader. In warpgroup w, warp w4 = warp % 4, lane 4g + t holds accumulator rows
// 16·w4 + g and 16·w4 + g + 8 (tokens of Sᵀ, latent columns of Oᵀ) and columns 8j + 2t (+1), j = 0 … 5 (heads).
//
// Warpgroup 0, tile i (S(i) complete in registers): release column block 8 of tile i (only S reads it);
//   softmax: y = scale·s − m (m the running max of the thread's columns, base 2); where any y of the warpgroup
//   exceeds kMaxSlack (always on the first tile), the column maxima over the 64 tokens (8 lanes, then 4 warps through
//   `reduce`) move m, and alpha = exp2(m_old − m_new) rescales its O and sums and goes to warpgroup 1; P = exp2(y) as
//   bf16 into P(i % 2); arrive P-full;
//   O(i) issued (its 2 m-tiles); once warpgroup 1 issued its first 2, S(i + 1) issued column block by column block as
//   each lands (8, 0, …, 7); arrive S-issued; wait for O(i): blocks 0 and 1 of tile i released (this block's and the
//   other's barriers); wait for S(i + 1).
//   P(i % 2) is free to write: warpgroup 1 retired all of O(i − 2) before it waited for P(i − 1), which warpgroup 0's
//   wait for O-issued in step i − 1 followed.
// Warpgroup 1, tile i: wait P-full; rescale by alpha where the max moved; m-tiles 2 and 3 of O(i) issued (arrive
// O-issued); once S(i + 1) is issued, m-tiles 4 … 7 (kDeferred), which the tensor cores then run while warpgroup 0
// computes the softmax of tile i + 1; each m-tile its own group, its column block released as it retires.
// The loader: tile t into slot t % 2 column block by column block, each once both blocks released it from tile t − 2
// (in the order they free: 8, 0, …, 7): whole tiles by TMA, each block copying its share of the 9 column blocks into
// both blocks' shared memory; the last, part-filled tile of a sequence (and every tile where the pages do not split
// into whole TMA pieces) by cp.async in each block with rows past the context zero-filled. Rank 0 asks the L2 for
// tile t before the waits for its blocks.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads, 1)
    mla_decode_wgmma_cluster_split_kv(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ pages,
                                      const int32_t* __restrict__ page_table,
                                      const int32_t* __restrict__ context_tokens, float scale_log2, int heads,
                                      int page_tokens, int max_pages, int max_context, int splits,
                                      float* __restrict__ partial_out, float2* __restrict__ partial_stats,
                                      float* __restrict__ out, const __grid_constant__ CUtensorMap cache_map,
                                      int tma_box_rows) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);

  const uint32_t rank = mbarrier::cluster_rank(), peer = rank ^ 1u;
  const int head0 = kBlockHeads * int(rank);
  const int split = blockIdx.x >> 1, b = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const mla_wgmma::SplitTiles range =
      mla_wgmma::split_tiles<kTileTokens>(context_tokens, b, max_context, splits, split);
  const int context = range.context, tile_begin = range.begin;
  const int n = range.end - tile_begin;

  if (n == 0) {  // both blocks of the cluster alike: no hand-offs
    const int head = head0 + int(threadIdx.x);
    if (threadIdx.x < kBlockHeads && head < heads) {
      if (splits > 1) {
        partial_stats[(int64_t(b) * splits + split) * heads + head] = make_float2(-INFINITY, 0.0f);
      } else {
        float* dst = out + (int64_t(b) * heads + head) * kLatent;
        for (int c = 0; c < kLatent; ++c) dst[c] = 0.0f;
      }
    }
    return;
  }

  const uint32_t barriers = base + Smem::kBarriers;
  const auto full = [&](int slot, int block) {
    return barriers + 8u * uint32_t(kBlockFull + kColumnBlocks * slot + block);
  };
  const auto empty = [&](int slot, int block) {
    return barriers + 8u * uint32_t(kBlockEmpty + kColumnBlocks * slot + block);
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s)
      for (int kb = 0; kb < kColumnBlocks; ++kb) {
        mbarrier::init(full(s, kb), 1);
        mbarrier::init(empty(s, kb), 2);
      }
    mbarrier::fence_init();
  }
  mbarrier::cluster_sync();  // barriers initialised in both blocks: the loader may start

  const auto slot_smem = [&](int i) { return base + Smem::kSlots_ + uint32_t(i % kSlots) * Smem::kSlotBytes; };

  if (warp >= kConsumerThreads / 32) {  // the loader: 2 threads per token row
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kLoaderRegisters));
    const int row = (threadIdx.x - kConsumerThreads) >> 1, half = threadIdx.x & 1;
    const bool elected = threadIdx.x == kConsumerThreads;
    const int pieces = tma_box_rows > 0 ? kTileTokens / tma_box_rows : 0;
    const auto piece_row = [&](int t, int p) {  // first cache row of piece p of tile t (its first token in context)
      const int token = (tile_begin + t) * kTileTokens + p * tma_box_rows;
      return page_table[int64_t(b) * max_pages + token / page_tokens] * page_tokens + token % page_tokens;
    };
    for (int t = 0; t < n; ++t) {
      const int s = t % kSlots;
      const uint32_t empty_parity = uint32_t((t / kSlots - 1) & 1);
      const bool by_tma = pieces > 0 && (tile_begin + t + 1) * kTileTokens <= context;
      if (by_tma) {
        if (!elected) continue;
        int cache_rows[kTileTokens / 16];  // the pieces' first rows, looked up before the waits for the slot
#pragma unroll
        for (int p = 0; p < kTileTokens / 16; ++p) cache_rows[p] = p < pieces ? piece_row(t, p) : 0;
        // The tile asked of the L2 before the waits for its slot, so that its DRAM reads overlap them and the copies
        // into the slot read the L2 (one tile ahead: further ahead was slower).
        if (rank == 0)
#pragma unroll
          for (int p = 0; p < kTileTokens / 16; ++p)
            if (p < pieces) prefetch_l2(pages + int64_t(cache_rows[p]) * kWidth, uint32_t(tma_box_rows) * kWidth * 2);
        // Column blocks in the order the slot frees them and the scores read them: 8, then 0 … 7. Each block waits
        // for both blocks' readers of tile t − 2 (the copies write both), then arms this block's barrier; the copies
        // of this block's share go to both.
        for (int k = 0; k < kColumnBlocks; ++k) {
          const int kb = k == 0 ? kColumnBlocks - 1 : k - 1;
          if (t >= kSlots) mbarrier::wait(empty(s, kb), empty_parity);
          mbarrier::arrive_expect_bytes(full(s, kb), Smem::kSlotBlockBytes);
          if ((kb < kRankZeroBlocks) == (rank == 0))
#pragma unroll
            for (int p = 0; p < kTileTokens / 16; ++p)
              if (p < pieces)
                tma_multicast(slot_smem(t) + kb * Smem::kSlotBlockBytes + p * tma_box_rows * 128, cache_map, 64 * kb,
                              cache_rows[p], full(s, kb));
        }
      } else {  // this block's copy of the tile by cp.async, rows past the context zero-filled
        if (elected && t >= kSlots)
          for (int kb = 0; kb < kColumnBlocks; ++kb) mbarrier::wait(empty(s, kb), empty_parity);
        named_barrier_sync(kLoaderBarrier, 128);
        const int token = (tile_begin + t) * kTileTokens + row;
        const bool valid = token < context;
        const __nv_bfloat16* src =
            valid ? mla_wgmma::token_row(pages, page_table, b, max_pages, page_tokens, token) : pages;
        const uint32_t dst = slot_smem(t) + row * 128;
#pragma unroll 4
        for (int k = 0; k < kWidth / 16; ++k) {  // chunks c = 2k + half of the row's 72
          const int c = 2 * k + half;
          cp_async_16(dst + (c >> 3) * Smem::kSlotBlockBytes + (((c & 7) ^ (row & 7)) << 4), src + (valid ? 8 * c : 0),
                      valid);
        }
        ptx::cp_async_commit();
        ptx::cp_async_wait_all();
        wgmma::fence_proxy_async_shared();  // the generic-proxy copies, for the products
        named_barrier_sync(kLoaderBarrier, 128);
        if (elected)
          for (int kb = 0; kb < kColumnBlocks; ++kb) mbarrier::arrive(full(s, kb));
      }
    }
    mbarrier::cluster_sync();  // the consumers' final cluster barrier
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegisters));

  const int wg = warp >> 2, w4 = warp & 3;
  const int g = lane >> 2, t4 = lane & 3;
  const int row_lo = 16 * w4 + g;
  const uint32_t p_base = base + Smem::kP, slots_base = base + Smem::kSlots_;
  float* alpha_smem = reinterpret_cast<float*>(smem + Smem::kAlpha);
  int* flags = reinterpret_cast<int*>(smem + Smem::kFlags);
  float* reduce = reinterpret_cast<float*>(smem + Smem::kReduce);
  float* stats = reinterpret_cast<float*>(smem + Smem::kStats);  // [0][48] max, [1][48] sum
  // This warpgroup read column block `block` of slot `slot` for the last time: both blocks' barriers.
  const auto release_block = [&](int slot, int block) {
    if ((threadIdx.x & 127) == 0) {
      const uint32_t local = empty(slot, block);
      mbarrier::arrive(local);
      mbarrier::arrive_remote(mbarrier::peer_address(local, peer));
    }
  };

  if (wg == 1) {
    float o[6][24];
#pragma unroll
    for (int mt = 0; mt < 6; ++mt)
#pragma unroll
      for (int k = 0; k < 24; ++k) o[mt][k] = 0.0f;
    // Tile i of parity kP (compile-time, so that the slot and P addresses are the base plus constants): m-tiles
    // 2 … 7 − kDeferred issued at once, the last kDeferred after S(i + 1), so that they run beside the softmax of
    // tile i + 1; each m-tile its own group, its column block released as it retires.
    const auto step = [&](int i, auto parity) {
      constexpr int kP = decltype(parity)::value;
      constexpr int kEarly = 6 - kDeferred;
      named_barrier_sync(kPFullBarrier + kP, kConsumerThreads);
      if (flags[kP] != 0) rescale(o, alpha_smem + kP * kBlockHeads, t4);
#pragma unroll
      for (int kb = kOutputBlocks0; kb < 8; ++kb) mbarrier::wait(full(kP, kb), uint32_t((i / kSlots) & 1));
      const uint32_t slot = slots_base + kP * Smem::kSlotBytes, p = p_base + kP * Smem::kPBytes;
      issue_output<kOutputBlocks0, 0, true>(o, slot, p, std::make_integer_sequence<int, kEarly>());
      named_barrier_arrive(kOutputIssuedBarrier, kConsumerThreads);
      if (i + 1 < n) named_barrier_sync(kScoresIssuedBarrier, kConsumerThreads);
      issue_output<kOutputBlocks0 + kEarly, kEarly, true>(o, slot, p, std::make_integer_sequence<int, kDeferred>());
#pragma unroll
      for (int mt = 0; mt < 6; ++mt) {
        wait_group_unrolled(5 - mt);
        release_block(kP, kOutputBlocks0 + mt);
      }
#pragma unroll
      for (int mt = 0; mt < 6; ++mt) wgmma::fence_registers(o[mt]);
    };
    for (int i = 0; i < n; i += 2) {
      step(i, std::integral_constant<int, 0>{});
      if (i + 1 < n) step(i + 1, std::integral_constant<int, 1>{});
    }
    named_barrier_sync(kConsumerBarrier, kConsumerThreads);  // stats in place
    store_output<kOutputBlocks0, 6>(o, stats + kBlockHeads, out, partial_out, b, splits, split, heads, head0, row_lo,
                                    t4);
    mbarrier::cluster_sync();
    return;
  }

  // Warpgroup 0.
  {  // Qᵀ, while the loader fetches the first tiles: this block's head rows, 72 chunks of 16 bytes each; heads past
     // the last zero-filled.
    for (int i = threadIdx.x; i < kBlockHeads * 72; i += 128) {
      const int row = i / 72, chunk = i % 72, head = head0 + row;
      const bool valid = head < heads;
      const __nv_bfloat16* src = q + (int64_t(b) * heads + (valid ? head : 0)) * kWidth + (valid ? 8 * chunk : 0);
      cp_async_16(base + Smem::kQ + wgmma::sw128_offset(kBlockHeads, row, chunk), src, valid);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait_all();
    wgmma::fence_proxy_async_shared();
    named_barrier_sync(kGroup0Barrier, 128);
  }
  float o[kOutputBlocks0][24];
#pragma unroll
  for (int mt = 0; mt < kOutputBlocks0; ++mt)
#pragma unroll
    for (int k = 0; k < 24; ++k) o[mt][k] = 0.0f;
  float m_run[12], l_part[12];  // per column (j, e) at 2j + e: running max (base 2), the thread's share of the sum
#pragma unroll
  for (int k = 0; k < 12; ++k) m_run[k] = -INFINITY, l_part[k] = 0.0f;
  float s[24];
  // S(i) into s, each column block once it landed.
  const auto issue_scores_of = [&](int i, auto parity) {
    constexpr int kP = decltype(parity)::value;
    const uint32_t full_parity = uint32_t((i / kSlots) & 1);
    issue_scores(s, slots_base + kP * Smem::kSlotBytes, base + Smem::kQ, [&](int kb) {
      mbarrier::wait(full(kP, kb), full_parity);
      wgmma::fence();  // after the wait's branch (else ptxas adds it, saying so)
    });
  };
  issue_scores_of(0, std::integral_constant<int, 0>{});
  wgmma::wait_group<0>();
  wgmma::fence_registers(s);

  // The softmax of tile i (S(i) in s) into P(i % 2); kMasked: the tile runs past the context (only a sequence's last).
  const auto softmax = [&](int i, auto parity, auto masked_tag) {
    constexpr int kP = decltype(parity)::value;
    constexpr bool kMasked = decltype(masked_tag)::value;
    bool valid[2] = {true, true};
    if (kMasked) {
      const int token_lo = (tile_begin + i) * kTileTokens + row_lo;
      valid[0] = token_lo < context, valid[1] = token_lo + 8 < context;
    }
    float y[24];
    float y_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 6; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = 4 * j + e;
        y[k] = fmaf(s[k], scale_log2, -m_run[2 * j + (e & 1)]);
        if (kMasked && !valid[e >> 1]) y[k] = -INFINITY;
        y_max = fmaxf(y_max, y[k]);
      }
    const bool moved = named_barrier_any(kGroup0Barrier, 128, y_max > kMaxSlack);
    if (threadIdx.x == 0) flags[kP] = moved;
    if (moved) {  // column maxima of the tile: the thread's 2 tokens, 8 lanes, then 4 warps
      float column_max[12];
#pragma unroll
      for (int j = 0; j < 6; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          column_max[2 * j + e] = fmaxf(valid[0] ? s[4 * j + e] * scale_log2 : -INFINITY,
                                        valid[1] ? s[4 * j + 2 + e] * scale_log2 : -INFINITY);
#pragma unroll
      for (int lanes = 4; lanes < 32; lanes *= 2)
#pragma unroll
        for (int k = 0; k < 12; ++k)
          column_max[k] = fmaxf(column_max[k], __shfl_xor_sync(0xffffffffu, column_max[k], lanes));
      if (g == 0)
#pragma unroll
        for (int j = 0; j < 6; ++j)
          *reinterpret_cast<float2*>(reduce + w4 * kBlockHeads + 8 * j + 2 * t4) =
              make_float2(column_max[2 * j], column_max[2 * j + 1]);
      named_barrier_sync(kGroup0Barrier, 128);
      float alpha[12];
#pragma unroll
      for (int j = 0; j < 6; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 8 * j + 2 * t4 + e, k = 2 * j + e;
          const float tile_max = fmaxf(fmaxf(reduce[c], reduce[kBlockHeads + c]),
                                       fmaxf(reduce[2 * kBlockHeads + c], reduce[3 * kBlockHeads + c]));
          const float m_new = fmaxf(m_run[k], tile_max);  // finite: the tile's first token is in the context
          alpha[k] = exp2f(m_run[k] - m_new);             // 0 on the split's first tile
          m_run[k] = m_new;
          l_part[k] *= alpha[k];
#pragma unroll
          for (int mt = 0; mt < kOutputBlocks0; ++mt) {
            o[mt][4 * j + e] *= alpha[k];
            o[mt][4 * j + 2 + e] *= alpha[k];
          }
#pragma unroll
          for (int h = 0; h < 2; ++h)
            y[4 * j + 2 * h + e] = valid[h] ? fmaf(s[4 * j + 2 * h + e], scale_log2, -m_new) : -INFINITY;
        }
      if (w4 == 0 && g == 0)
#pragma unroll
        for (int j = 0; j < 6; ++j)
          *reinterpret_cast<float2*>(alpha_smem + kP * kBlockHeads + 8 * j + 2 * t4) =
              make_float2(alpha[2 * j], alpha[2 * j + 1]);
    }
    // P = exp2(y) as bf16 into P(i % 2) (row = token, the pair of heads in one 4-byte store); the sums take the
    // unrounded values (within bf16's rounding of the products they weigh).
    unsigned char* p = smem + Smem::kP + kP * Smem::kPBytes + row_lo * 128 + 4 * t4;
#pragma unroll
    for (int j = 0; j < 6; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float lo = fast_exp2(y[4 * j + 2 * h]), hi = fast_exp2(y[4 * j + 2 * h + 1]);
        l_part[2 * j] += lo;
        l_part[2 * j + 1] += hi;
        *reinterpret_cast<__nv_bfloat162*>(p + h * 1024 + ((j ^ g) << 4)) = __floats2bfloat162_rn(lo, hi);
      }
  };

  const auto step = [&](int i, auto parity) {
    constexpr int kP = decltype(parity)::value;
    release_block(kP, kColumnBlocks - 1);  // S(i) retired: the rope columns are read by nothing else
    if ((tile_begin + i + 1) * kTileTokens > context)
      softmax(i, parity, std::true_type{});
    else
      softmax(i, parity, std::false_type{});
    wgmma::fence_proxy_async_shared();
    named_barrier_sync(kGroup0Barrier, 128);  // P(i) complete for this warpgroup's product
    named_barrier_arrive(kPFullBarrier + kP, kConsumerThreads);
    issue_output<0, 0, false>(o, slots_base + kP * Smem::kSlotBytes, p_base + kP * Smem::kPBytes,
                              std::make_integer_sequence<int, kOutputBlocks0>());
    // S(i + 1) after O(i)'s first m-tiles (the tensor cores take each sub-partition's products in issue order) and
    // before its last kDeferred, which then run beside the softmax of tile i + 1.
    named_barrier_sync(kOutputIssuedBarrier, kConsumerThreads);
    if (i + 1 < n) {
      issue_scores_of(i + 1, std::integral_constant<int, 1 - kP>{});
      named_barrier_arrive(kScoresIssuedBarrier, kConsumerThreads);
      wgmma::wait_group<1>();  // O(i)
    } else {
      wgmma::wait_group<0>();
    }
#pragma unroll
    for (int mt = 0; mt < kOutputBlocks0; ++mt) {
      wgmma::fence_registers(o[mt]);
      release_block(kP, mt);
    }
    wgmma::wait_group<0>();  // S(i + 1)
    wgmma::fence_registers(s);
  };
  for (int i = 0; i < n; i += 2) {
    step(i, std::integral_constant<int, 0>{});
    if (i + 1 < n) step(i + 1, std::integral_constant<int, 1>{});
  }

  // Epilogue: the sums over the 8 lanes of a column and the 4 warps; final max and sum per head into `stats`.
#pragma unroll
  for (int lanes = 4; lanes < 32; lanes *= 2)
#pragma unroll
    for (int k = 0; k < 12; ++k) l_part[k] += __shfl_xor_sync(0xffffffffu, l_part[k], lanes);
  if (g == 0)
#pragma unroll
    for (int j = 0; j < 6; ++j)
      *reinterpret_cast<float2*>(reduce + w4 * kBlockHeads + 8 * j + 2 * t4) =
          make_float2(l_part[2 * j], l_part[2 * j + 1]);
  if (w4 == 0 && g == 0)
#pragma unroll
    for (int j = 0; j < 6; ++j)
      *reinterpret_cast<float2*>(stats + 8 * j + 2 * t4) = make_float2(m_run[2 * j], m_run[2 * j + 1]);
  named_barrier_sync(kGroup0Barrier, 128);
  if (threadIdx.x < kBlockHeads) {
    const int c = threadIdx.x;
    stats[kBlockHeads + c] =
        reduce[c] + reduce[kBlockHeads + c] + reduce[2 * kBlockHeads + c] + reduce[3 * kBlockHeads + c];
  }
  named_barrier_sync(kGroup0Barrier, 128);                   // the sums, for this warpgroup's rows
  named_barrier_arrive(kConsumerBarrier, kConsumerThreads);  // and warpgroup 1's
  if (splits > 1 && threadIdx.x < kBlockHeads && head0 + int(threadIdx.x) < heads)
    partial_stats[(int64_t(b) * splits + split) * heads + head0 + threadIdx.x] =
        make_float2(stats[threadIdx.x], stats[kBlockHeads + threadIdx.x]);
  store_output<0, kOutputBlocks0>(o, stats + kBlockHeads, out, partial_out, b, splits, split, heads, head0, row_lo, t4);
  mbarrier::cluster_sync();  // no block exits while the other may still arrive on its barriers
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a: the host side refuses before launching
#endif
}
cudaError_t configure_kernel(int device) {
  static std::atomic<uint64_t> configured{0};
  return allow_dynamic_shared_memory_once(mla_decode_wgmma_cluster_split_kv, Smem::kAllocBytes, device, configured);
}

// Two-block clusters the device runs at once with this kernel's shared memory (0 if it cannot), once per device.
int max_active_clusters(int device) {
  static std::atomic<int> cached[64];
  static std::atomic<uint64_t> known{0};
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (known.load(std::memory_order_acquire) & bit) != 0) return cached[device].load();
  int clusters = 0;
  if (configure_kernel(device) == cudaSuccess) {
    ClusterLaunch launch(dim3(2 * 256, 1, 1), dim3(kThreads, 1, 1), 2, nullptr);
    launch.config.dynamicSmemBytes = Smem::kAllocBytes;
    if (cudaOccupancyMaxActiveClusters(&clusters, mla_decode_wgmma_cluster_split_kv, &launch.config) != cudaSuccess) {
      clusters = 0;
      (void)cudaGetLastError();
    }
  }
  if (bit != 0) {
    cached[device].store(clusters);
    known.fetch_or(bit, std::memory_order_release);
  }
  return clusters;
}

}  // namespace

bool mla_decode_wgmma_cluster_runs(int device) {
  return mla_decode_wgmma_supported(device) && max_active_clusters(device) > 0;
}

int mla_decode_wgmma_cluster_num_splits(const MlaDecodeShape& shape) {
  const int common = mla_decode_num_splits(shape);  // 1 for an invalid or empty shape
  if (common == 1) return 1;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || !mla_decode_wgmma_supported(device)) return 1;
  const int clusters = max_active_clusters(device);
  return std::clamp(clusters / std::max(shape.batch, 1), 1, common);
}

cudaError_t mla_decode_wgmma_cluster_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                                const int32_t* page_table, const int32_t* context_tokens,
                                                float scale_log2, const MlaDecodeShape& shape, int splits,
                                                float* partial_out, float2* partial_stats, float* out,
                                                cudaStream_t stream) {
  int device = 0;
  cudaError_t status = mla_decode_wgmma_device(device);
  if (status != cudaSuccess) return status;
  if (shape.heads > kMlaDecodeClusterMaxHeads) return cudaErrorInvalidValue;
  status = configure_kernel(device);
  if (status != cudaSuccess) return status;
  CUtensorMap cache_map{};
  const int box_rows = mla_cache_tensor_map(cache_map, cache_pages, shape.page_tokens, kTileTokens, 4);
  const dim3 grid(unsigned(2 * splits), unsigned(shape.batch));
  mla_decode_wgmma_cluster_split_kv<<<grid, kThreads, Smem::kAllocBytes, stream>>>(
      q, cache_pages, page_table, context_tokens, scale_log2, shape.heads, shape.page_tokens,
      shape.max_pages_per_sequence, int(shape.max_context_tokens), splits, partial_out, partial_stats, out, cache_map,
      box_rows);
  return cudaGetLastError();
}

}  // namespace k3::kernels
