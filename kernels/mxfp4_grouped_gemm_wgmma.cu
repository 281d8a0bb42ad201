// mxfp4_grouped_gemm_wgmma: mxfp4_grouped_gemm_wgmma_128x128, the prefill version of the MXFP4 routed-expert products
// on Hopper's warpgroup MMA (kernels/mxfp4_grouped.h, Mxfp4GroupedAlgorithm::gemm_wgmma; sm_90a only):
//   y[s, o] = Σ_i W_e[o, i] · x[slot_token[s], i]   for the slots s of every active expert e.
// Persistent blocks of 2 warpgroups walk the pipelined GEMM's tiles of 128 output rows × 128 slots of one expert (the
// schedule of mxfp4_grouped_device.h). Each k-step covers 64 elements (two MX blocks): a 4-stage cp.async ring, filled
// 2 steps ahead, copies the x rows of the tile's slots, gathered through slot_token, as one 128-byte-swizzled K-major
// tile (wgmma_sm90.h: slot s at s · 128 bytes, its 16-byte chunk c at (c ^ (s % 8)) · 16), and after it the RAW packed
// W bytes of the tile's rows (32 per row). Warpgroup wg owns rows 64wg..64wg + 63 and multiplies them by the tile's
// slots rounded up to a multiple of 32 (wgmma m64nNk16, N = 32, 64, 96 or 128, chosen once per tile): A from registers,
// each thread decoding exactly its own fragments from the packed bytes (dequantize_word_lut, scale folded in exactly),
// B from the x tile by descriptor.
//
// Fragment mapping (natural k order): thread (warp w of its warpgroup, g = lane / 4, t = lane % 4) holds the A
// fragments of rows 16w + g and 16w + g + 8; for k16 step kk of the step these are elements 16kk + 2t, +1 (a[0], a[1])
// and 16kk + 2t + 8, +9 (a[2], a[3]), i.e. byte t of the 8-element words 2kk and 2kk + 1 of the row's 32 packed bytes.
// Byte t of words 0..3 (MX block 0 of the step) gathered into one word is that block's pairs (8j + 2t, 8j + 2t + 1),
// j = 0..3, which dequantize_word_lut returns as out[j]: kk = 0 takes out[0], out[1] as a[0], a[2], kk = 1 out[2],
// out[3]; words 4..7 (block 1) feed kk = 2, 3 the same way.
//
// Pipeline: step s waits for its copies (issued 2 steps earlier), then wgmma wait_group 1 retires step s − 2's
// products, the barrier shows every thread's copies and that both warpgroups are done with step s − 2's stage, which
// the copies of step s + 2 then refill; step s's A fragments are decoded while step s − 1's wgmma still runs (two
// register sets, alternating). Scales are loaded from global one step ahead (each row's prefetched into L2 at the tile's
// start).
//
// Partial tiles: slots past the end or with an invalid token are not copied (their stale columns are never stored; an
// invalid token's slot gets NaN); W rows past `out` are not copied (their rows are never stored, their scale loads are
// skipped); blocks past `in` are zero-filled for W and x, with the neutral scale.
#include "kernels/mxfp4_grouped_device.h"
#include "kernels/ptx_mma.h"
#include "kernels/shared_memory_config.h"
#include "kernels/wgmma_sm90.h"

#include <algorithm>
#include <climits>
#include <type_traits>

namespace k3::kernels::mxfp4_detail {

namespace {

constexpr int kWgThreads = 256;                                    // 2 warpgroups
constexpr int kWgRows = 128;                                       // output rows per tile, 64 per warpgroup
constexpr int kWgSlots = 128;                                      // slots per tile: the widest wgmma N
constexpr int kWgSlotGroup = 32;                                   // N = the tile's slots rounded up to this
constexpr int kWgStepBlocks = 2;                                   // MX blocks per k-step: 64 elements
constexpr int kWgStages = 4;                                       // the cp.async ring
constexpr int kWgAhead = 2;                                        // steps copied ahead of the one multiplied
constexpr int kWgXRowBytes = kWgStepBlocks * kMxBlockElements * 2;  // 128: one SW128 row per slot and step
constexpr int kWgXRowChunks = kWgXRowBytes / 16;                    // 8 chunks of 16 bytes
constexpr int kWgXTileBytes = kWgSlots * kWgXRowBytes;              // 16 KiB
constexpr int kWgWRowBytes = kWgStepBlocks * kMxBlockBytes;         // 32: packed W of one row and step
constexpr int kWgStageBytes = kWgXTileBytes + kWgRows * kWgWRowBytes;  // 20 KiB: the x tile first, then W
constexpr int kWgXCopiesPerThread = kWgSlots * kWgXRowChunks / kWgThreads;  // 4
constexpr int kWgXSlotsPerPass = kWgThreads / kWgXRowChunks;                // 32
// Dynamic shared memory: slack to align the stages to 1024 bytes, the stages, the tile's tokens [kWgSlots], the scan's
// warp sums, the tile prefix.
constexpr size_t kWgFixedSharedBytes =
    1024 + size_t(kWgStages) * kWgStageBytes + (kWgSlots + kWgThreads / 32) * sizeof(int);
constexpr size_t kWgMaxSharedBytes = kWgFixedSharedBytes + (kMxfp4GroupedGemmMaxActiveExperts + 1) * sizeof(int);

static_assert(kWgStageBytes % 1024 == 0, "every stage's x tile must start 1024-byte aligned (the SW128 pattern)");
static_assert(kWgRows * kWgStepBlocks == kWgThreads, "one 16-byte W copy per thread and step");
static_assert(kWgSlots <= kWgThreads, "one token per thread at the tile's start");
// The stage refilled at step s (that of s + ahead) is neither s − 1's (its wgmma may still run) nor s .. s + ahead − 1.
static_assert(kWgStages >= kWgAhead + 2);
static_assert(kWgMaxSharedBytes <= 227 * 1024, "an H200 block gets at most 227 KiB of shared memory");

// Asks for the 128-byte line holding p in L2, without waiting or taking a register.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

// Byte t of each word of v, as bytes 0..3 (selector = t | (t + 4) << 4): of an MX block's 4 words, the pairs
// (8j + 2t, 8j + 2t + 1), j = 0..3.
__device__ __forceinline__ uint32_t gather_bytes(uint4 v, uint32_t selector) {
  return prmt(prmt(v.x, v.y, selector), prmt(v.z, v.w, selector), 0x5410u);
}

// d += A · B for one k16 step, m64nNk16, B K-major (d[4j + e] holds column 8j + 2t + e % 2 for every N).
template <int kN>
__device__ __forceinline__ void wgmma_rs(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t b_desc) {
  static_assert(kN == 32 || kN == 64 || kN == 96 || kN == 128);
  if constexpr (kN == 32) {
    wgmma::wgmma_m64n32k16_rs<0>(d, a, b_desc);
  } else if constexpr (kN == 64) {
    wgmma::wgmma_m64n64k16_rs<0>(d, a, b_desc);
  } else if constexpr (kN == 96) {
    wgmma::wgmma_m64n96k16_rs<0>(d, a, b_desc);
  } else {
    wgmma::wgmma_m64n128k16_rs<0>(d, a, b_desc);
  }
}

template <typename OutT>
__global__ void __launch_bounds__(kWgThreads, 1)
    mxfp4_grouped_gemm_wgmma_128x128(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                     int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t wgmma_shared[];
  const auto raw = static_cast<uint32_t>(__cvta_generic_to_shared(wgmma_shared));
  const uint32_t stages_base = (raw + 1023u) & ~1023u;  // stage i at stages_base + i · kWgStageBytes
  uint8_t* const stages = wgmma_shared + (stages_base - raw);
  int* const tokens = reinterpret_cast<int*>(stages + kWgStages * kWgStageBytes);  // -1: not copied
  int* const warp_sums = tokens + kWgSlots;
  int* const tile_prefix = warp_sums + kWgThreads / 32;  // [active + 1]

  const int active = build_tile_prefix<kWgThreads, kWgRows, kWgSlots>(w, r, tile_prefix, warp_sums);
  const int total_tiles = tile_prefix[active];

  const int64_t out = w.out_features;
  const int blocks = static_cast<int>(w.in_features / kMxBlockElements);
  const int steps = (blocks + kWgStepBlocks - 1) / kWgStepBlocks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int group_row = 64 * (warp / 4) + 16 * (warp % 4);  // the first of this warp's 16 rows of the tile
  const int row_lo = group_row + g;                          // this thread's A rows: row_lo and row_lo + 8
  const auto gather_selector = static_cast<uint32_t>(t | ((t + 4) << 4));
  // This thread's copies: W row w_copy_row, block w_copy_block of the step; chunk x_chunk of slots x_slot + 32j.
  const int w_copy_row = threadIdx.x / kWgStepBlocks, w_copy_block = threadIdx.x % kWgStepBlocks;
  const int x_chunk = threadIdx.x % kWgXRowChunks, x_slot = threadIdx.x / kWgXRowChunks;

  for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
    const GemmTile at = locate_tile<kWgRows, kWgSlots>(r, tile_prefix, active, tile);
    const int64_t row0 = at.row0;
    const int slot0 = at.slot0;
    const int tile_slots = min(kWgSlots, at.end_slot - slot0);  // ≥ 1

    __syncthreads();  // both warpgroups are done with the previous tile's stages (wgmma retired) and tokens
    if (threadIdx.x < kWgSlots) {
      const int slot = slot0 + static_cast<int>(threadIdx.x);
      int token = -1;
      if (slot < at.end_slot) {
        const int candidate = r.slot_token[slot];
        if (candidate >= 0 && candidate < x_rows) token = candidate;
      }
      tokens[threadIdx.x] = token;
    }
    __syncthreads();  // the tokens, for every thread's copies

    const int64_t copy_row = row0 + w_copy_row;
    const uint8_t* const w_row =
        copy_row < out ? w.packed + (int64_t(at.expert) * out + copy_row) * blocks * kMxBlockBytes : nullptr;
    // The row's scales (blocks bytes) into L2 now: the per-step scale loads, one step ahead, then never wait on HBM.
    if (copy_row < out && w_copy_block == 0) {
      const uint8_t* const row_scales = w.scales + (int64_t(at.expert) * out + copy_row) * blocks;
      for (int offset = 0; offset < blocks; offset += 128) prefetch_l2(row_scales + offset);
      prefetch_l2(row_scales + blocks - 1);
    }
    // Copies step `step` into its stage; every thread commits one group per step (empty past the last).
    const auto issue = [&](int step) {
      const uint32_t stage = stages_base + uint32_t((step % kWgStages) * kWgStageBytes);
      if (w_row != nullptr) {
        const int block = step * kWgStepBlocks + w_copy_block;
        const bool in_row = block < blocks;
        ptx::cp_async_16(stage + kWgXTileBytes + w_copy_row * kWgWRowBytes + w_copy_block * kMxBlockBytes,
                         in_row ? w_row + int64_t(block) * kMxBlockBytes : w.packed, in_row);
      }
      const bool x_in_row = step * kWgStepBlocks + x_chunk / 4 < blocks;  // 4 chunks per MX block
      const int64_t x_element = int64_t(step) * kWgStepBlocks * kMxBlockElements + x_chunk * 8;
#pragma unroll
      for (int j = 0; j < kWgXCopiesPerThread; ++j) {
        const int s = x_slot + kWgXSlotsPerPass * j;
        const int token = tokens[s];
        if (token >= 0) {
          ptx::cp_async_16(stage + wgmma::sw128_offset(kWgSlots, s, x_chunk),
                           x_in_row ? x + int64_t(token) * x_stride + x_element : x, x_in_row);
        }
      }
    };

    // This thread's scales: rows row_lo + 8 rh, blocks 2 step + b (neutral past the row's end; none loaded for rows
    // past `out`: out and the warp's 16-row group start are multiples of 16).
    const bool rows_in = row0 + group_row < out;
    const uint8_t* const scales_lo =
        rows_in ? w.scales + (int64_t(at.expert) * out + row0 + row_lo) * blocks : w.scales;
    const auto load_scales = [&](int step, uint32_t (&s)[2][kWgStepBlocks]) {
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {
#pragma unroll
        for (int b = 0; b < kWgStepBlocks; ++b) {
          const int block = step * kWgStepBlocks + b;
          s[rh][b] = rows_in && block < blocks ? __ldg(scales_lo + int64_t(8 * rh) * blocks + block) : kNeutralScale;
        }
      }
    };

    // The tile with wgmma m64nNk16, N = decltype(width)::value: the k loop, then the stores, with accumulators for
    // exactly N columns.
    const auto multiply = [&](auto width) {
      constexpr int kN = decltype(width)::value;
      float acc[kN / 2];
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
#pragma unroll
      for (int s = 0; s < kWgAhead; ++s) {  // steps 0 .. ahead − 1, one group each
        if (s < steps) issue(s);
        cp_async_commit();
      }
      uint32_t scale_now[2][kWgStepBlocks];
      load_scales(0, scale_now);
      wgmma::fence_registers(acc);

      // One step: a holds its A fragments [kk][4] until the wait_group of step + 2 has retired its wgmma.
      const auto step_products = [&](int step, uint32_t (&a)[4][4]) {
        // Committed so far: the groups of steps 0 .. step + ahead − 1; at most ahead − 1 pending means this step's
        // has landed for this thread.
        cp_async_wait<kWgAhead - 1>();
        wgmma::fence_proxy_async_shared();  // the copies, read next by wgmma through the async proxy
        wgmma::wait_group<1>();             // step − 2's products, which read the stage refilled below
        __syncthreads();
        if (step + kWgAhead < steps) issue(step + kWgAhead);
        cp_async_commit();
        uint32_t scale_next[2][kWgStepBlocks];
        load_scales(step + 1, scale_next);  // in flight during this step's decode

        const uint32_t stage_offset = uint32_t((step % kWgStages) * kWgStageBytes);
        const uint8_t* const w_tile = stages + stage_offset + kWgXTileBytes;
#pragma unroll
        for (int rh = 0; rh < 2; ++rh) {
          const uint4* const row_words = reinterpret_cast<const uint4*>(w_tile + (row_lo + 8 * rh) * kWgWRowBytes);
#pragma unroll
          for (int b = 0; b < kWgStepBlocks; ++b) {
            uint32_t pairs[4];  // elements (8j + 2t, 8j + 2t + 1) of block b of the step, j = 0..3
            dequantize_word_lut(gather_bytes(row_words[b], gather_selector), block_scale(scale_now[rh][b]), pairs);
            // k16 steps 2b and 2b + 1: j = 0, 1 are k 2t and 2t + 8 of the first, j = 2, 3 of the second.
            a[2 * b][rh] = pairs[0];
            a[2 * b][2 + rh] = pairs[1];
            a[2 * b + 1][rh] = pairs[2];
            a[2 * b + 1][2 + rh] = pairs[3];
          }
        }
        wgmma::fence();  // the A registers (and, at the first step, the zeroed accumulators) before the wgmma
        const uint32_t x_tile = stages_base + stage_offset;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) wgmma_rs<kN>(acc, a[kk], wgmma::sw128_descriptor(x_tile + 32 * kk, 16, 1024));
        wgmma::commit_group();
#pragma unroll
        for (int rh = 0; rh < 2; ++rh) {
#pragma unroll
          for (int b = 0; b < kWgStepBlocks; ++b) scale_now[rh][b] = scale_next[rh][b];
        }
      };

      uint32_t a_even[4][4], a_odd[4][4];
      for (int step = 0; step < steps; step += 2) {
        step_products(step, a_even);
        if (step + 1 < steps) step_products(step + 1, a_odd);
      }
      wgmma::wait_group<0>();
      wgmma::fence_registers(acc);

      // acc[4j + e]: row row_lo + 8 (e / 2), slot column 8j + 2t + e % 2.
      if (!rows_in) return;
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) {
        if (8 * j >= tile_slots) break;  // uniform
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int s = 8 * j + 2 * t + c;
          if (s >= tile_slots) continue;
          const bool ok = tokens[s] >= 0;  // a slot before the end: -1 only for an invalid token
          OutT* const out_row = y + int64_t(slot0 + s) * y_stride + row0 + row_lo;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            store_out(out_row + 8 * half, ok ? acc[4 * j + 2 * half + c] : __int_as_float(0x7FC00000));
          }
        }
      }
    };
    const int width = min(kWgSlots, (tile_slots + kWgSlotGroup - 1) / kWgSlotGroup * kWgSlotGroup);  // uniform
    if (width == 32) {
      multiply(std::integral_constant<int, 32>{});
    } else if (width == 64) {
      multiply(std::integral_constant<int, 64>{});
    } else if (width == 96) {
      multiply(std::integral_constant<int, 96>{});
    } else {
      multiply(std::integral_constant<int, 128>{});
    }
  }
  cp_async_wait<0>();  // only empty groups can remain; no copy outlives the block
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a: the host side refuses before launching
#endif
}

template <typename OutT>
cudaError_t launch_wgmma(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                         int64_t x_stride, int64_t x_rows, OutT* y, int64_t y_stride, int64_t active,
                         cudaStream_t stream) {
  if (active > kMxfp4GroupedGemmMaxActiveExperts) return cudaErrorInvalidValue;
  const int64_t row_tiles = (w.out_features + kWgRows - 1) / kWgRows;
  const int64_t max_tiles = row_tiles * ((r.max_slots + kWgSlots - 1) / kWgSlots + active);
  if (max_tiles > INT32_MAX) return cudaErrorInvalidValue;  // tile indices are int
  int device = 0, sms = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  if (!mxfp4_grouped_algorithm_supported(Mxfp4GroupedAlgorithm::gemm_wgmma, device)) return cudaErrorNotSupported;
  status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (status != cudaSuccess) return status;
  const auto kernel = mxfp4_grouped_gemm_wgmma_128x128<OutT>;
  // The largest size any launch uses, so a graph captured earlier stays valid; neither call enqueues work.
  status = allow_dynamic_shared_memory(kernel, int(kWgMaxSharedBytes));
  if (status != cudaSuccess) return status;
  const size_t shared = kWgFixedSharedBytes + size_t(active + 1) * sizeof(int);
  // One persistent block per SM (ptxas gives the kernel 255 registers, and fewer serialise its wgmma pipeline), never
  // more than the tiles any routing within the bounds has.
  const auto grid = static_cast<unsigned>(std::min<int64_t>(max_tiles, sms));
  kernel<<<grid, kWgThreads, shared, stream>>>(w, r, x, x_stride, x_rows, y, y_stride);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gemm_wgmma(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                              int64_t x_stride, int64_t x_rows, float* y, int64_t y_stride, int64_t active,
                              cudaStream_t stream) {
  return launch_wgmma(w, r, x, x_stride, x_rows, y, y_stride, active, stream);
}

cudaError_t launch_gemm_wgmma(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                              int64_t x_stride, int64_t x_rows, __nv_bfloat16* y, int64_t y_stride, int64_t active,
                              cudaStream_t stream) {
  return launch_wgmma(w, r, x, x_stride, x_rows, y, y_stride, active, stream);
}

}  // namespace k3::kernels::mxfp4_detail
