#include "kernels/mla_decode_wgmma_cluster.h"
#include "kernels/mbarrier_sm90.h"
#include "kernels/mla_cache_tensor_map.h"
#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_rows.h"
#include "kernels/ptx_mma.h"
#include "kernels/shared_memory_config.h"
#include "kernels/wgmma_sm90.h"

#include "core/error.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <utility>

namespace k3::kernels {

namespace {

constexpr int kLatent = kMlaDecodeLatentDim;
constexpr int kWidth = kMlaDecodeCacheWidth;
constexpr int kHeads = kMlaDecodeClusterMaxHeads;  // N of both products
constexpr int kTileTokens = 64;                    // M of the score product, K of the output product
constexpr int kSlots = 3;
constexpr int kConsumerThreads = 256;              // two warpgroups
constexpr int kThreads = kConsumerThreads + 128;   // and the loader warpgroup
constexpr int kLoaderRegisters = 40;               // setmaxnreg: the loader gives registers to the consumers
constexpr int kConsumerRegisters = 232;            // 128 · 40 + 256 · 232 ≤ 65536
constexpr int kMainBlocks = 4;                     // a block's 256 latent columns as 64-column SW128 blocks
constexpr int kTailColumns = 32;                   // its share of the 64 trailing columns
constexpr int kRankColumns = kMainBlocks * 64 + kTailColumns;  // 288
constexpr int kOutputKSteps = kTileTokens / 16;   // 4

struct Smem {
  static constexpr int kQBlockBytes = kHeads * 128;           // 12288: 96 rows of 64 bf16
  static constexpr int kSlotBlockBytes = kTileTokens * 128;   // 8192
  static constexpr int kSlotBytes = kMainBlocks * kSlotBlockBytes;
  static constexpr int kExchangeBytes = kTileTokens * kHeads * 4;  // 24576: a score tile, fp32
  static constexpr int kPBytes = kQBlockBytes;                     // Pᵀ: 96 head rows of 64 tokens, bf16
  static constexpr int kQ = 0;
  static constexpr int kQTail = kQ + kMainBlocks * kQBlockBytes;  // chunks 0–3 of each row
  static constexpr int kSlots_ = kQTail + kQBlockBytes;
  static constexpr int kTails = kSlots_ + kSlots * kSlotBytes;    // slot s: block s / 2, chunks 4·(s % 2) …
  static constexpr int kExchange = kTails + 2 * kSlotBlockBytes;  // the other block's partial, then the scores
  static constexpr int kP = kExchange + kExchangeBytes;           // [2] Pᵀ of tile i at i % 2
  static constexpr int kAlpha = kP + 2 * kPBytes;                 // [2][96] fp32
  static constexpr int kMax = kAlpha + 2 * kHeads * 4;            // [2][96] fp32: running max after tile i, at i % 2
  static constexpr int kReduce = kMax + 2 * kHeads * 4;           // [2 warpgroups][4 warps][48] fp32: column maxima
  static constexpr int kBarriers = kReduce + 2 * 4 * (kHeads / 2) * 4;
  static constexpr int kBarrierCount = 8;
  static constexpr int kBytes = kBarriers + kBarrierCount * 8;
  static constexpr int kAllocBytes = kBytes + 1024;  // slack to align the base
};
static_assert(Smem::kAllocBytes <= 232448, "an H200 block gets at most 227 KiB of shared memory");
static_assert(Smem::kSlots_ % 1024 == 0 && Smem::kTails % 1024 == 0 && Smem::kP % 1024 == 0 &&
                  Smem::kPBytes % 1024 == 0,
              "SW128 blocks must be 1024-byte aligned");
static_assert(kRankColumns * 2 == kWidth, "the two blocks of a cluster split the 576 columns");

// Barrier indices (8 bytes each from Smem::kBarriers).
constexpr int kSlotFull = 0;       // [3] a slot's tile landed: the loader's 128 cp.async arrivals, one more (with the
                                   // bulk-tensor bytes expected when the tile comes by TMA)
constexpr int kSlotEmpty = 3;      // [3] both warpgroups' products of the slot's tile retired (2 arrivals)
constexpr int kExchangeFull = 6;   // the other block's partial scores of the next tile are in (one arrival here, 24 KiB
                                   // from there)
constexpr int kExchangeEmpty = 7;  // the other block's exchange buffer is free (one arrival from there)

constexpr int kReduceBarrier = 1;  // + warpgroup: its 128 threads
constexpr int kStepBarrier = 3;    // both warpgroups

template <int kCount>
__device__ __forceinline__ void named_barrier_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kCount) : "memory");
}

// Score k16 step: d = A · B (+ d unless the first step), m64n96k16, A = the tile's token rows and B = Qᵀ, both K-major
// SW128 from shared memory, their descriptors the base descriptors plus constants (added inside the asm, so that the
// compiler does not precompute every step's descriptors into registers; start addresses are 16-byte units below 2^14,
// so the add never carries out of the field). The first step only writes d ("=f"), so that the scores' registers are
// free between a tile's softmax and the next tile's product.
#define K3_SCORE_WGMMA(D_CONSTRAINT, SCALE_D)                                                                         \
  asm volatile(                                                                                                        \
      "{\n.reg .pred p;\n.reg .b64 ad, bd;\nsetp.ne.b32 p, " SCALE_D ", 0;\nadd.s64 ad, %48, %50;\n"                  \
      "add.s64 bd, %49, %51;\n"                                                                                        \
      "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {"                                                       \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                        \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                              \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, ad, bd, p, 1, 1, 0, 0;\n}\n"  \
      : D_CONSTRAINT(d[0]), D_CONSTRAINT(d[1]), D_CONSTRAINT(d[2]), D_CONSTRAINT(d[3]), D_CONSTRAINT(d[4]),           \
        D_CONSTRAINT(d[5]), D_CONSTRAINT(d[6]), D_CONSTRAINT(d[7]), D_CONSTRAINT(d[8]), D_CONSTRAINT(d[9]),           \
        D_CONSTRAINT(d[10]), D_CONSTRAINT(d[11]), D_CONSTRAINT(d[12]), D_CONSTRAINT(d[13]), D_CONSTRAINT(d[14]),      \
        D_CONSTRAINT(d[15]), D_CONSTRAINT(d[16]), D_CONSTRAINT(d[17]), D_CONSTRAINT(d[18]), D_CONSTRAINT(d[19]),      \
        D_CONSTRAINT(d[20]), D_CONSTRAINT(d[21]), D_CONSTRAINT(d[22]), D_CONSTRAINT(d[23]), D_CONSTRAINT(d[24]),      \
        D_CONSTRAINT(d[25]), D_CONSTRAINT(d[26]), D_CONSTRAINT(d[27]), D_CONSTRAINT(d[28]), D_CONSTRAINT(d[29]),      \
        D_CONSTRAINT(d[30]), D_CONSTRAINT(d[31]), D_CONSTRAINT(d[32]), D_CONSTRAINT(d[33]), D_CONSTRAINT(d[34]),      \
        D_CONSTRAINT(d[35]), D_CONSTRAINT(d[36]), D_CONSTRAINT(d[37]), D_CONSTRAINT(d[38]), D_CONSTRAINT(d[39]),      \
        D_CONSTRAINT(d[40]), D_CONSTRAINT(d[41]), D_CONSTRAINT(d[42]), D_CONSTRAINT(d[43]), D_CONSTRAINT(d[44]),      \
        D_CONSTRAINT(d[45]), D_CONSTRAINT(d[46]), D_CONSTRAINT(d[47])                                                  \
      : "l"(a_desc), "l"(b_desc), "n"(kAOffset), "n"(kBOffset))
#define K3_WRITE_ONLY(x) "=f"(x)
#define K3_READ_WRITE(x) "+f"(x)
template <bool kAccumulate, uint64_t kAOffset, uint64_t kBOffset>
__device__ __forceinline__ void score_step(float (&d)[48], uint64_t a_desc, uint64_t b_desc) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kAccumulate) {
    K3_SCORE_WGMMA(K3_READ_WRITE, "1");
  } else {
    K3_SCORE_WGMMA(K3_WRITE_ONLY, "0");
  }
#endif
}
#undef K3_SCORE_WGMMA
#undef K3_WRITE_ONLY
#undef K3_READ_WRITE
// Main steps 0–15: block k / 4, 32 bytes per step inside it (offsets in 16-byte units).
template <int kStep>
__device__ __forceinline__ void score_main_step(float (&d)[48], uint64_t tile_desc, uint64_t q_desc) {
  constexpr uint64_t kTileOffset = uint64_t((kStep / 4) * Smem::kSlotBlockBytes + (kStep % 4) * 32) / 16;
  constexpr uint64_t kQOffset = uint64_t((kStep / 4) * Smem::kQBlockBytes + (kStep % 4) * 32) / 16;
  score_step<(kStep > 0), kTileOffset, kQOffset>(d, tile_desc, q_desc);
}
template <int... kSteps>
__device__ __forceinline__ void score_main_steps(float (&d)[48], uint64_t tile_desc, uint64_t q_desc,
                                                 std::integer_sequence<int, kSteps...>) {
  (score_main_step<kSteps>(d, tile_desc, q_desc), ...);
}

// Issues (and commits as one group) this block's partial scores of a tile over its 288 columns.
__device__ __forceinline__ void issue_scores(float (&s)[48], uint32_t tile_smem, uint32_t tile_tail_smem,
                                             uint32_t q_smem, uint32_t q_tail_smem) {
  wgmma::fence();
  score_main_steps(s, wgmma::sw128_descriptor(tile_smem, 16, 1024), wgmma::sw128_descriptor(q_smem, 16, 1024),
                   std::make_integer_sequence<int, 4 * kMainBlocks>());
  const uint64_t tail_desc = wgmma::sw128_descriptor(tile_tail_smem, 16, 1024);
  const uint64_t q_tail_desc = wgmma::sw128_descriptor(q_tail_smem, 16, 1024);
  score_step<true, 0, 0>(s, tail_desc, q_tail_desc);
  score_step<true, 2, 2>(s, tail_desc, q_tail_desc);  // + 32 bytes
  wgmma::commit_group();
}

// Oᵀ += Cᵀ · Pᵀ for this warpgroup's two 64-column m-tiles of the slot (MN-major through trans-a: rows 16kk … of the
// block, 2048 bytes per k16 step) and Pᵀ (K-major, 96 rows), issued and committed as one group.
__device__ __forceinline__ void issue_output(float (&o)[2][48], uint32_t columns_smem, uint32_t p_smem) {
  wgmma::fence_registers(o[0]);
  wgmma::fence_registers(o[1]);
  wgmma::fence();
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int kk = 0; kk < kOutputKSteps; ++kk)
      wgmma::mma_ss<1, 0>(o[mt],
                          wgmma::sw128_descriptor(columns_smem + mt * Smem::kSlotBlockBytes + kk * 2048,
                                                  Smem::kSlotBlockBytes, 1024),
                          wgmma::sw128_descriptor(p_smem + kk * 32, 16, 1024));
  wgmma::commit_group();
}

using ptx::cp_async_16;

// Grid: x = 2 · split + rank in the cluster, y = sequence; clusters of 2 along x. Threads 0–255: two warpgroups
// (warp w = warp % 4 of warpgroup wg, lane 4g + t holds accumulator rows 16w + g and 16w + g + 8, columns 8j + 2t
// (+1), j = 0 … 11: wgmma_sm90.h); threads 256–383: the loader warpgroup.
//
// Step i (tile i), both warpgroups; S(i) was computed by warpgroup i % 2 (in step i − 1, or before step 0) and sent:
//   1. the warpgroup that computes S(i + 1) waits for tile i + 1 and issues it (it runs during this softmax);
//   2. the owner of S(i) waits for the other block's partial of tile i, adds its own, scales, masks past the context
//      and writes the scores back into the exchange buffer; barrier (A) over both warpgroups;
//   3. each warpgroup, for its 48 heads: column maxima (8 lanes, then 4 warps through `reduce`), the new running max
//      and alpha (one thread per head), P = exp2(x − max) into Pᵀ(i) and the running sums; fence; barrier (C);
//   4. the owner of S(i) tells the other block that its exchange buffer is free; wait_group 0 (this warpgroup's
//      O(i − 1), and S(i + 1) where it issued it), tile i − 1's slot back to the loader, S(i + 1) sent;
//   5. O rescaled by alpha(i), O(i) issued.
// Each warpgroup's role at each step is fixed in the code (steps in pairs), and every wait on the products is
// wait_group 0, as in wgmma_alternating (ptxas keeps the products asynchronous only then).
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
  const int split = blockIdx.x >> 1, b = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const mla_wgmma::SplitTiles range =
      mla_wgmma::split_tiles<kTileTokens>(context_tokens, b, max_context, splits, split);
  const int context = range.context, tile_begin = range.begin;
  const int n = range.end - tile_begin;

  if (n == 0) {  // both blocks of the cluster alike: no hand-offs
    if (threadIdx.x < heads && threadIdx.x < kHeads) {
      const int head = threadIdx.x;
      if (splits > 1) {
        if (rank == 0) partial_stats[(int64_t(b) * splits + split) * heads + head] = make_float2(-INFINITY, 0.0f);
      } else {
        float* dst = out + (int64_t(b) * heads + head) * kLatent + rank * 256;
        for (int c = 0; c < 256; ++c) dst[c] = 0.0f;
      }
    }
    return;
  }

  const uint32_t barriers = base + Smem::kBarriers;
  const auto barrier = [&](int index) { return barriers + 8u * uint32_t(index); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) {
      mbarrier::init(barrier(kSlotFull + s), 129);
      mbarrier::init(barrier(kSlotEmpty + s), 2);
    }
    mbarrier::init(barrier(kExchangeFull), 1);
    mbarrier::init(barrier(kExchangeEmpty), 1);
    mbarrier::fence_init();
  }
  {  // Qᵀ (all threads): head rows, this block's 36 chunks of 16 bytes each; heads past the last zero-filled.
    for (int i = threadIdx.x; i < kHeads * 36; i += kThreads) {
      const int head = i / 36, chunk = i % 36;
      const bool valid = head < heads;
      const __nv_bfloat16* src = q + (int64_t(b) * heads + (valid ? head : 0)) * kWidth;
      if (chunk < 32) {
        cp_async_16(base + Smem::kQ + wgmma::sw128_offset(kHeads, head, chunk), src + (valid ? 256 * rank + 8 * chunk : 0),
                    valid);
      } else {
        const int c = chunk - 32;
        cp_async_16(base + Smem::kQTail + head * 128 + ((c ^ (head & 7)) << 4),
                    src + (valid ? kLatent + kTailColumns * rank + 8 * c : 0), valid);
      }
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait_all();
    wgmma::fence_proxy_async_shared();
  }
  mbarrier::cluster_sync();  // barriers initialised in both blocks, Q in place

  const auto slot_smem = [&](int i) { return base + Smem::kSlots_ + uint32_t(i % kSlots) * Smem::kSlotBytes; };
  const auto slot_tail_smem = [&](int i) {
    const int s = i % kSlots;
    return base + Smem::kTails + uint32_t(s >> 1) * Smem::kSlotBlockBytes + uint32_t(s & 1) * 64;
  };

  if (warp >= kConsumerThreads / 32) {  // the loader: tile t into slot t % 3; 2 threads per token row
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kLoaderRegisters));
    const int row = (threadIdx.x - kConsumerThreads) >> 1, half = threadIdx.x & 1;
    // The row of tile t is looked up (page table) before waiting for its slot, so the lookup's latency is not
    // added to the load's.
    const auto row_source = [&](int t) {
      const int token = (tile_begin + t) * kTileTokens + row;
      return token < context ? mla_wgmma::token_row(pages, page_table, b, max_pages, page_tokens, token) : nullptr;
    };
    const __nv_bfloat16* next_src = row_source(0);
    // Whole tiles come by TMA when the pages allow it (tma_box_rows > 0: pieces of tma_box_rows rows inside one page),
    // issued by the loader's first thread, 4 blocks × (64 / tma_box_rows) pieces; the last, part-filled tile of a
    // sequence, and every tile otherwise, by the loader's cp.async with the rows past the context zero-filled. The 32
    // trailing columns always by cp.async.
    const bool elected = threadIdx.x == kConsumerThreads;
    const int pieces = tma_box_rows > 0 ? kTileTokens / tma_box_rows : 0;
    int page_rows[4] = {0, 0, 0, 0}, next_page_rows[4] = {0, 0, 0, 0};  // first cache row of each piece
    const auto piece_rows = [&](int t, int (&rows)[4]) {
      for (int p = 0; p < pieces; ++p) {
        const int token = (tile_begin + t) * kTileTokens + p * tma_box_rows;
        if (token < context)
          rows[p] = page_table[int64_t(b) * max_pages + token / page_tokens] * page_tokens + token % page_tokens;
      }
    };
    if (elected) piece_rows(0, next_page_rows);
    for (int t = 0; t < n; ++t) {
      const int s = t % kSlots;
      const __nv_bfloat16* row_src = next_src;
      if (t + 1 < n) next_src = row_source(t + 1);
      const bool by_tma = pieces > 0 && (tile_begin + t + 1) * kTileTokens <= context;
      if (elected) {
        for (int p = 0; p < 4; ++p) page_rows[p] = next_page_rows[p];
        if (t + 1 < n) piece_rows(t + 1, next_page_rows);
      }
      if (t >= kSlots) mbarrier::wait(barrier(kSlotEmpty + s), uint32_t((t / kSlots - 1) & 1));
      if (elected) {
        if (by_tma) {
          mbarrier::arrive_expect_bytes(barrier(kSlotFull + s), Smem::kSlotBytes);
          for (int p = 0; p < pieces; ++p)
#pragma unroll
            for (int kb = 0; kb < kMainBlocks; ++kb) {
              const uint32_t dst = slot_smem(t) + kb * Smem::kSlotBlockBytes + p * tma_box_rows * 128;
              asm volatile(
                  "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                  "%3}], [%4];\n" ::"r"(dst),
                  "l"(reinterpret_cast<uint64_t>(&cache_map)), "r"(int(256 * rank) + 64 * kb), "r"(page_rows[p]),
                  "r"(barrier(kSlotFull + s))
                  : "memory");
            }
        } else {
          mbarrier::arrive(barrier(kSlotFull + s));
        }
      }
      const bool valid = row_src != nullptr;
      const __nv_bfloat16* src = valid ? row_src : pages;
      if (!by_tma) {
        const uint32_t dst = slot_smem(t) + row * 128;
#pragma unroll
        for (int k = 0; k < 4 * kMainBlocks; ++k) {  // chunks c = 2k + half of the 32 main ones
          const int c = 2 * k + half;
          cp_async_16(dst + (c >> 3) * Smem::kSlotBlockBytes + (((c & 7) ^ (row & 7)) << 4),
                      src + (valid ? 256 * rank + 8 * c : 0), valid);
        }
      }
      const uint32_t tail = base + Smem::kTails + uint32_t(s >> 1) * Smem::kSlotBlockBytes + row * 128;
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const int c = 2 * k + half;
        cp_async_16(tail + (((4 * (s & 1) + c) ^ (row & 7)) << 4),
                    src + (valid ? kLatent + kTailColumns * rank + 8 * c : 0), valid);
      }
      mbarrier::arrive_on_cp_async(barrier(kSlotFull + s));
    }
    mbarrier::cluster_sync();  // the consumers' final cluster barrier
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegisters));

  // The consumers.
  const int wg = warp >> 2, wg_thread = threadIdx.x & 127, w4 = warp & 3;
  const int g = lane >> 2, t4 = lane & 3;
  const int row_lo = 16 * w4 + g;  // accumulator rows row_lo and row_lo + 8 (tokens of Sᵀ, latent columns of Oᵀ)
  const uint32_t q_smem = base + Smem::kQ, q_tail_smem = base + Smem::kQTail;
  const uint32_t columns_offset = uint32_t(2 * wg) * Smem::kSlotBlockBytes;  // this warpgroup's 2 m-tiles of a slot
  float4* exchange = reinterpret_cast<float4*>(smem + Smem::kExchange) + wg_thread;  // this thread's 12 float4
  const auto p_smem = [&](int i) { return base + Smem::kP + uint32_t(i & 1) * Smem::kPBytes; };
  const auto alpha_ptr = [&](int i) { return reinterpret_cast<float*>(smem + Smem::kAlpha) + (i & 1) * kHeads; };
  const auto max_ptr = [&](int i) { return reinterpret_cast<float*>(smem + Smem::kMax) + (i & 1) * kHeads; };
  float* reduce = reinterpret_cast<float*>(smem + Smem::kReduce) + wg * 4 * (kHeads / 2);
  const int j0 = 6 * wg;  // this warpgroup's softmax columns: 8j + 2t + e for j in [j0, j0 + 6): heads 48·wg …

  float o[2][48];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int k = 0; k < 48; ++k) o[mt][k] = 0.0f;
  float l_part[12];  // running sums of this thread's 2 tokens of every tile, per softmax column (jj, e)
#pragma unroll
  for (int k = 0; k < 12; ++k) l_part[k] = 0.0f;
  float s[48];
  // Pᵀ positions of this thread's values (K-major, 96 head rows of 64 tokens, one SW128 block): head 8j + 2t + e,
  // token row_lo (+8) at row 8j + 2t + e, chunk 2·w4 (+1) at position chunk ^ (2t + e), byte 2g in it; j adds j · 1024.
  uint32_t p_offset[2][2];
#pragma unroll
  for (int e = 0; e < 2; ++e)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      p_offset[e][h] = uint32_t(2 * t4 + e) * 128 + (uint32_t((2 * w4 + h) ^ (2 * t4 + e)) << 4) + uint32_t(g) * 2;

  const auto send = [&](int i) {  // S(i) into the other block's exchange buffer, once that block has read tile i − 1
    if (i >= 1) mbarrier::wait(barrier(kExchangeEmpty), uint32_t((i - 1) & 1));
    const uint32_t dst = mbarrier::peer_address(base + Smem::kExchange + wg_thread * 16, peer);
    const uint32_t full = mbarrier::peer_address(barrier(kExchangeFull), peer);
#pragma unroll
    for (int k = 0; k < 12; ++k)
      mbarrier::st_async(dst + k * 2048, s[4 * k], s[4 * k + 1], s[4 * k + 2], s[4 * k + 3], full);
  };
  const auto scores = [&](int i) {
    mbarrier::wait(barrier(kSlotFull + i % kSlots), uint32_t((i / kSlots) & 1));
    wgmma::fence_proxy_async_shared();
    issue_scores(s, slot_smem(i), slot_tail_smem(i), q_smem, q_tail_smem);
  };
  // O times alpha(i) (all 96 heads of this thread's accumulator columns).
  const auto rescale = [&](int i) {
    const float* alpha = alpha_ptr(i);
    bool any = false;
#pragma unroll
    for (int j = 0; j < 12; ++j) {
      const float2 v = *reinterpret_cast<const float2*>(alpha + 8 * j + 2 * t4);
      any |= v.x != 1.0f || v.y != 1.0f;
    }
    if (!__any_sync(0xffffffffu, any)) return;
#pragma unroll
    for (int j = 0; j < 12; ++j) {
      const float2 v = *reinterpret_cast<const float2*>(alpha + 8 * j + 2 * t4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        o[0][4 * j + e] *= (e & 1) ? v.y : v.x;
        o[1][4 * j + e] *= (e & 1) ? v.y : v.x;
      }
    }
  };

  // Step i (tile i) of either warpgroup; kOwnScores: this warpgroup computed S(i); kOwnNext: it computes S(i + 1).
  const auto step = [&](int i, auto own_scores, auto own_next) {
    constexpr bool kOwnScores = decltype(own_scores)::value, kOwnNext = decltype(own_next)::value;
    if (kOwnNext && i + 1 < n) scores(i + 1);  // on the tensor cores during this tile's softmax
    if (kOwnScores) {  // the full scores of tile i, scaled, −∞ past the context, into the exchange buffer
      if (wg_thread == 0) mbarrier::arrive_expect_bytes(barrier(kExchangeFull), Smem::kExchangeBytes);
      mbarrier::wait(barrier(kExchangeFull), uint32_t(i & 1));
      const int token_lo = (tile_begin + i) * kTileTokens + row_lo;
      const bool valid_lo = token_lo < context, valid_hi = token_lo + 8 < context;
#pragma unroll
      for (int k = 0; k < 12; ++k) {
        const float4 v = exchange[k * 128];
        exchange[k * 128] = make_float4(valid_lo ? (s[4 * k] + v.x) * scale_log2 : -INFINITY,
                                        valid_lo ? (s[4 * k + 1] + v.y) * scale_log2 : -INFINITY,
                                        valid_hi ? (s[4 * k + 2] + v.z) * scale_log2 : -INFINITY,
                                        valid_hi ? (s[4 * k + 3] + v.w) * scale_log2 : -INFINITY);
      }
    }
    named_barrier_sync<kConsumerThreads>(kStepBarrier);  // (A) the scores of tile i are in the exchange buffer
    // This warpgroup's 48 heads: x[4jj + e'] = scores of head 8(j0 + jj) + 2t + e'%2, token row_lo + 8·(e'/2).
    float x[24];
#pragma unroll
    for (int jj = 0; jj < 6; ++jj) {
      const float4 v = exchange[(j0 + jj) * 128];
      x[4 * jj] = v.x, x[4 * jj + 1] = v.y, x[4 * jj + 2] = v.z, x[4 * jj + 3] = v.w;
    }
    {  // column maxima over the thread's 2 tokens, the 8 lanes of a column, then (through `reduce`) the 4 warps
      float column_max[12];
#pragma unroll
      for (int k = 0; k < 12; ++k) column_max[k] = fmaxf(x[4 * (k >> 1) + (k & 1)], x[4 * (k >> 1) + 2 + (k & 1)]);
#pragma unroll
      for (int lanes = 4; lanes < 32; lanes *= 2)
#pragma unroll
        for (int k = 0; k < 12; ++k) column_max[k] = fmaxf(column_max[k], __shfl_xor_sync(0xffffffffu, column_max[k], lanes));
      if (g == 0) {
#pragma unroll
        for (int jj = 0; jj < 6; ++jj)
          *reinterpret_cast<float2*>(reduce + w4 * (kHeads / 2) + 8 * jj + 2 * t4) =
              make_float2(column_max[2 * jj], column_max[2 * jj + 1]);
      }
    }
    named_barrier_sync<128>(kReduceBarrier + wg);
    if (wg_thread < kHeads / 2) {  // head 48·wg + wg_thread: the new running max and alpha
      const int c = wg_thread, head = 48 * wg + c;
      const float tile_max = fmaxf(fmaxf(reduce[c], reduce[kHeads / 2 + c]), fmaxf(reduce[kHeads + c], reduce[3 * kHeads / 2 + c]));
      const float m_old = i > 0 ? max_ptr(i - 1)[head] : -INFINITY;
      const float m_new = fmaxf(m_old, tile_max);  // finite: the tile's first token is in the context
      max_ptr(i)[head] = m_new;
      alpha_ptr(i)[head] = exp2f(m_old - m_new);  // 0 on the split's first tile
    }
    named_barrier_sync<128>(kReduceBarrier + wg);
    {  // P = exp2(x − max) as bf16 into Pᵀ; the running sums take alpha and the rounded P
      unsigned char* pt = smem + Smem::kP + (i & 1) * Smem::kPBytes;
      const float* m_now = max_ptr(i);
      const float* alpha = alpha_ptr(i);
#pragma unroll
      for (int jj = 0; jj < 6; ++jj) {
        const int j = j0 + jj;
        const float2 m2 = *reinterpret_cast<const float2*>(m_now + 8 * j + 2 * t4);
        const float2 a2 = *reinterpret_cast<const float2*>(alpha + 8 * j + 2 * t4);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float m = e ? m2.y : m2.x;
          const __nv_bfloat16 p_lo = __float2bfloat16_rn(exp2f(x[4 * jj + e] - m));
          const __nv_bfloat16 p_hi = __float2bfloat16_rn(exp2f(x[4 * jj + 2 + e] - m));
          l_part[2 * jj + e] = l_part[2 * jj + e] * (e ? a2.y : a2.x) + (__bfloat162float(p_lo) + __bfloat162float(p_hi));
          *reinterpret_cast<__nv_bfloat16*>(pt + p_offset[e][0] + j * 1024) = p_lo;
          *reinterpret_cast<__nv_bfloat16*>(pt + p_offset[e][1] + j * 1024) = p_hi;
        }
      }
    }
    wgmma::fence_proxy_async_shared();
    named_barrier_sync<kConsumerThreads>(kStepBarrier);  // (C) Pᵀ and alpha of tile i complete; exchange buffer read
    if (kOwnScores && wg_thread == 0) mbarrier::arrive_cluster(mbarrier::peer_address(barrier(kExchangeEmpty), peer));
    wgmma::wait_group<0>();  // this warpgroup's O(i − 1) and, when it issued it, S(i + 1)
    wgmma::fence_registers(s);
    wgmma::fence_registers(o[0]);
    wgmma::fence_registers(o[1]);
    if (i >= 1 && wg_thread == 0) mbarrier::arrive(barrier(kSlotEmpty + (i - 1) % kSlots));
    if (kOwnNext && i + 1 < n) send(i + 1);
    rescale(i);
    issue_output(o, slot_smem(i) + columns_offset, p_smem(i));
  };

  using Yes = std::true_type;
  using No = std::false_type;
  wgmma::fence_registers(o[0]);  // the zeros set here, not sunk past the first wgmma
  wgmma::fence_registers(o[1]);
  if (wg == 0) {  // owns the scores of the even tiles
    scores(0);
    wgmma::wait_group<0>();
    wgmma::fence_registers(s);
    send(0);
    int i = 0;
    do {
      step(i, Yes{}, No{});
      if (i + 1 < n) step(i + 1, No{}, Yes{});
      i += 2;
    } while (i < n);
  } else {
    int i = 0;
    do {
      step(i, No{}, Yes{});
      if (i + 1 < n) step(i + 1, Yes{}, No{});
      i += 2;
    } while (i < n);
  }
  wgmma::wait_group<0>();
  wgmma::fence_registers(o[0]);
  wgmma::fence_registers(o[1]);

  // Epilogue: the running sums over the 8 lanes of a column and the 4 warps of the warpgroup that owns it, then the rows.
#pragma unroll
  for (int lanes = 4; lanes < 32; lanes *= 2)
#pragma unroll
    for (int k = 0; k < 12; ++k) l_part[k] += __shfl_xor_sync(0xffffffffu, l_part[k], lanes);
  named_barrier_sync<kConsumerThreads>(kStepBarrier);  // every product retired: the slots and `reduce` are idle
  float* sums = reinterpret_cast<float*>(smem + Smem::kSlots_);  // [2 warpgroups][4 warps][48], in the first slot
  if (g == 0) {
#pragma unroll
    for (int jj = 0; jj < 6; ++jj)
      *reinterpret_cast<float2*>(sums + warp * (kHeads / 2) + 8 * jj + 2 * t4) = make_float2(l_part[2 * jj], l_part[2 * jj + 1]);
  }
  named_barrier_sync<kConsumerThreads>(kStepBarrier);
  float* totals = sums + 8 * (kHeads / 2);  // [96]
  if (threadIdx.x < kHeads) {
    const int owner = threadIdx.x / (kHeads / 2), c = threadIdx.x % (kHeads / 2);
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; ++w) total += sums[(4 * owner + w) * (kHeads / 2) + c];
    totals[threadIdx.x] = total;
  }
  named_barrier_sync<kConsumerThreads>(kStepBarrier);
  const float* final_max = max_ptr(n - 1);
  if (splits > 1 && rank == 0 && threadIdx.x < heads)
    partial_stats[(int64_t(b) * splits + split) * heads + threadIdx.x] =
        make_float2(final_max[threadIdx.x], totals[threadIdx.x]);
#pragma unroll
  for (int j = 0; j < 12; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int head = 8 * j + 2 * t4 + e;
      if (head >= heads) continue;
      float* dst;
      float factor = 1.0f;
      if (splits == 1) {
        dst = out + (int64_t(b) * heads + head) * kLatent;
        const float sum = totals[head];
        factor = sum > 0.0f ? 1.0f / sum : 0.0f;
      } else {
        dst = partial_out + ((int64_t(b) * splits + split) * heads + head) * kLatent;
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int column = 256 * int(rank) + 128 * wg + 64 * mt + row_lo;
        dst[column] = o[mt][4 * j + e] * factor;
        dst[column + 8] = o[mt][4 * j + 2 + e] * factor;
      }
    }
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
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(2 * 256, 1, 1);
    config.blockDim = dim3(kThreads, 1, 1);
    config.dynamicSmemBytes = Smem::kAllocBytes;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = 2;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    if (cudaOccupancyMaxActiveClusters(&clusters, mla_decode_wgmma_cluster_split_kv, &config) != cudaSuccess) {
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
  cudaError_t status = mla_decode_wgmma_device("wgmma_cluster", device);
  if (status != cudaSuccess) return status;
  K3_CHECK(shape.heads <= kMlaDecodeClusterMaxHeads, "mla_decode wgmma_cluster: {} heads; it runs at most {}",
           shape.heads, kMlaDecodeClusterMaxHeads);
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
