// mxfp4_grouped_gemm: mxfp4_grouped_gemm_mma_128x128_pipelined, the pipelined prefill version of the MXFP4
// routed-expert products (kernels/mxfp4_grouped.h, Mxfp4GroupedAlgorithm::gemm_pipelined):
//   y[s, o] = Σ_i W_e[o, i] · x[slot_token[s], i]   for the slots s of every active expert e.
// Persistent blocks of 4 warps walk tiles of 128 output rows × 128 slots of one expert (the schedule of
// mxfp4_grouped_device.h). Each k-step covers 64 elements (two MX blocks): a 4-stage cp.async ring copies the RAW
// packed W bytes of the tile's rows and the x rows of its slots, gathered through slot_token, into shared memory,
// three steps ahead. Warp w owns rows 32w..32w+31 and all 128 slots (2 × 16 m16n8k16 tiles): each lane decodes from
// shared memory exactly the weights of its own A fragments straight into registers (dequantize_word_lut, scale
// folded in exactly), so W never exists as bf16 in shared memory and no row is decoded twice, and reads its B
// fragments as 16-byte x chunks from a layout swizzled so the reads are free of bank conflicts.
//
// Fragment mapping (k order): lane (g, t) = (lane / 4, lane % 4) takes, of the step's 64 elements, the two 8-element
// words 2t and 2t + 1 (elements 16t..16t + 15, all of MX block t / 2), rows g and g + 8 of each m-tile. In half h of
// the step, word 2t + h feeds two MMAs: elements (0, 1) and (2, 3) as the mma k positions (2t, 2t + 1) and
// (2t + 8, 2t + 9) of the first, (4, 5) and (6, 7) of the second; the B fragments of lane (g, t) are the same
// elements of x for slot g of the n-tile, i.e. the 16-byte chunk 2t + h of that slot's step row, already in pairs.
//
// Partial tiles: groups of 4 n-tiles (32 slots) past the expert's last slot are skipped (a uniform branch); slots past
// the end or with an invalid token are not copied (their stale columns are never stored; an invalid token's slot
// gets NaN); W rows past `out` are not copied (their rows are never stored); blocks past `in` are zero-filled for the
// rows and slots that are stored, with the neutral scale.
#include "kernels/mxfp4_grouped_device.h"
#include "kernels/ptx/ptx_mma.h"
#include "kernels/ptx/shared_memory_config.h"

#include <algorithm>
#include <climits>

namespace k3::kernels::mxfp4_detail {

namespace {

constexpr int kPipeThreads = 128;                             // 4 warps
constexpr int kPipeWarpRows = 32;                             // 2 m-tiles of 16 per warp
constexpr int kPipeRows = kPipeThreads / 32 * kPipeWarpRows;  // 128 output rows per tile
constexpr int kPipeSlots = 128;                               // slots per tile, every warp all of them
constexpr int kPipeNTiles = kPipeSlots / 8;                   // 16 n-tiles of 8 slots
constexpr int kPipeGroupNTiles = 4;  // n-tiles multiplied together (or skipped together past an expert's end)
constexpr int kPipeStepBlocks = 2;   // MX blocks per k-step: 64 elements
constexpr int kPipeStages = 4;       // the cp.async ring
constexpr int kPipeWRowBytes = kPipeStepBlocks * kMxBlockBytes;                     // 32: packed W of one row and step
constexpr int kPipeXRowBytes = kPipeStepBlocks * kMxBlockElements * 2;              // 128: bf16 x of one slot and step
constexpr int kPipeXRowChunks = kPipeXRowBytes / 16;                                // 8 chunks of 16 bytes
constexpr int kPipeWStageBytes = kPipeRows * kPipeWRowBytes;                        // 4 KiB
constexpr int kPipeStageBytes = kPipeWStageBytes + kPipeSlots * kPipeXRowBytes;     // 20 KiB
constexpr int kPipeXCopiesPerThread = kPipeSlots * kPipeXRowChunks / kPipeThreads;  // 8
constexpr int kPipeXSlotsPerPass = kPipeThreads / kPipeXRowChunks;                  // 16
// Dynamic shared memory: the stages, the tile's tokens [kPipeSlots], the scan's warp sums, the tile prefix.
constexpr size_t kPipeFixedSharedBytes =
    size_t(kPipeStages) * kPipeStageBytes + (kPipeSlots + kPipeThreads / 32) * sizeof(int);
constexpr size_t kPipeMaxSharedBytes = kPipeFixedSharedBytes + (kMxfp4GroupedGemmMaxActiveExperts + 1) * sizeof(int);

// One W row per thread in the copies, one token per thread at the tile's start.
static_assert(kPipeRows == kPipeThreads && kPipeSlots == kPipeThreads);
// Two blocks per SM on an H100 / H200 (228 KiB of shared memory per SM, 1 KiB of it reserved per block).
static_assert(2 * (kPipeMaxSharedBytes + 1024) <= 228 * 1024);

// Shared-memory loads by 32-bit shared address, ordered with the barriers and cp.async waits around them.
__device__ __forceinline__ uint2 load_shared_8(uint32_t address) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(address) : "memory");
  return v;
}
__device__ __forceinline__ uint4 load_shared_16(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address)
               : "memory");
  return v;
}

// Asks for the 128-byte line holding p in L2, without waiting or taking a register.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

template <typename OutT, bool kTiled>
__global__ void __launch_bounds__(kPipeThreads, 2)
    mxfp4_grouped_gemm_mma_128x128_pipelined(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                             int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride) {
  extern __shared__ __align__(16) uint8_t pipe_shared[];
  int* const tokens = reinterpret_cast<int*>(pipe_shared + kPipeStages * kPipeStageBytes);  // -1: not copied
  int* const warp_sums = tokens + kPipeSlots;
  int* const tile_prefix = warp_sums + kPipeThreads / 32;  // [active + 1]

  const int active = build_tile_prefix<kPipeThreads, kPipeRows, kPipeSlots>(w, r, tile_prefix, warp_sums);
  const int total_tiles = tile_prefix[active];

  const int64_t out = w.out_features;
  const int blocks = static_cast<int>(w.in_features / kMxBlockElements);
  const int steps = (blocks + kPipeStepBlocks - 1) / kPipeStepBlocks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_row = warp * kPipeWarpRows;
  const auto shared_base = static_cast<uint32_t>(__cvta_generic_to_shared(pipe_shared));
  // This thread's copies: W row threadIdx.x (both blocks of the step) and chunk x_chunk of the x rows of slots
  // x_slot + 16j, stored at chunk x_chunk ^ (slot & 1) of the slot's row: a quarter warp reading B (slots 2p and
  // 2p + 1, chunks 2t + h) then covers all 32 banks once.
  // In the tiled layout (kernels/mxfp4_tiled.h) half h of a step is block h, lane t taking its word t: B chunks t and
  // 4 + t, so odd slots' chunks are swapped by halves (XOR 4) for the same conflict-free quarter-warp reads.
  const int x_chunk = threadIdx.x % kPipeXRowChunks, x_slot = threadIdx.x / kPipeXRowChunks;
  constexpr int kSwizzle = kTiled ? 4 : 1;
  const uint32_t x_chunk_offset = uint32_t((x_chunk ^ ((x_slot & 1) * kSwizzle)) * 16);
  const int b_chunk[2] = {kTiled ? t : 2 * t, kTiled ? 4 + t : 2 * t + 1};
  const int b_chunk_offset[2] = {(b_chunk[0] ^ ((g & 1) * kSwizzle)) * 16,
                                 (b_chunk[1] ^ ((g & 1) * kSwizzle)) * 16};  // this lane's B chunks
  const int64_t pairs = w.in_features / 64;                                  // tiled: units per 16-row tile

  for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
    const GemmTile at = locate_tile<kPipeRows, kPipeSlots>(r, tile_prefix, active, tile);
    const int64_t row0 = at.row0;
    const int slot0 = at.slot0, end_slot = at.end_slot;
    // n-tiles holding at least one of the expert's slots (≥ 1: slot0 < end_slot).
    const int n_tiles = min(kPipeNTiles, (end_slot - slot0 + 7) / 8);

    __syncthreads();  // every warp is done with the previous tile's stages and tokens
    {
      const int slot = slot0 + static_cast<int>(threadIdx.x);
      int token = -1;
      if (slot < end_slot) {
        const int candidate = r.slot_token[slot];
        if (candidate >= 0 && candidate < x_rows) token = candidate;
      }
      tokens[threadIdx.x] = token;
    }
    __syncthreads();  // the tokens, for every thread's copies

    const int64_t copy_row = row0 + threadIdx.x;
    const uint8_t* const w_row =
        copy_row < out ? w.packed + (int64_t(at.expert) * out + copy_row) * blocks * kMxBlockBytes : nullptr;
    // Tiled: thread i copies chunks 2 (i % 16), + 1 of unit i / 16 (16 rows) of each step.
    const int copy_unit = threadIdx.x / 16, copy_chunk = 2 * (threadIdx.x % 16);
    const int64_t copy_tile = (int64_t(at.expert) * out + row0) / kTiledRows + copy_unit;
    const bool copy_unit_in = row0 + int64_t(copy_unit) * kTiledRows < out;
    // The row's scales (blocks bytes) into L2 now: the per-step scale loads, one step ahead, then never wait on HBM.
    if (!kTiled && copy_row < out) {
      const uint8_t* const row_scales = w.scales + (int64_t(at.expert) * out + copy_row) * blocks;
      for (int offset = 0; offset < blocks; offset += 128) prefetch_l2(row_scales + offset);
      prefetch_l2(row_scales + blocks - 1);
    }
    if (kTiled && copy_unit_in && threadIdx.x % 16 == 0) {  // the tile's scale units, pairs · 32 bytes
      const uint8_t* const tile_scales = w.scales + copy_tile * pairs * kTiledUnitScaleBytes;
      for (int64_t offset = 0; offset < pairs * kTiledUnitScaleBytes; offset += 128) prefetch_l2(tile_scales + offset);
    }
    // Copies step `step` into its stage; every thread commits one group per step (empty past the last).
    const auto issue = [&](int step) {
      const uint32_t stage = shared_base + uint32_t((step % kPipeStages) * kPipeStageBytes);
      if (kTiled) {
        if (copy_unit_in) {
          const uint8_t* unit = w.packed + (copy_tile * pairs + step) * kTiledUnitWeightBytes + copy_chunk * 16;
          ptx::cp_async_16(stage + copy_unit * kTiledUnitWeightBytes + copy_chunk * 16, unit, true);
          ptx::cp_async_16(stage + copy_unit * kTiledUnitWeightBytes + copy_chunk * 16 + 16, unit + 16, true);
        }
      } else if (w_row != nullptr) {
#pragma unroll
        for (int h = 0; h < kPipeStepBlocks; ++h) {
          const int block = step * kPipeStepBlocks + h;
          const bool in_row = block < blocks;
          ptx::cp_async_16(stage + threadIdx.x * kPipeWRowBytes + h * kMxBlockBytes,
                           in_row ? w_row + int64_t(block) * kMxBlockBytes : w.packed, in_row);
        }
      }
      const bool x_in_row = step * kPipeStepBlocks + x_chunk / 4 < blocks;
      const int64_t x_element = int64_t(step) * kPipeStepBlocks * kMxBlockElements + x_chunk * 8;
#pragma unroll
      for (int j = 0; j < kPipeXCopiesPerThread; ++j) {
        const int s = x_slot + kPipeXSlotsPerPass * j;
        const int token = tokens[s];
        if (token >= 0) {
          ptx::cp_async_16(stage + kPipeWStageBytes + s * kPipeXRowBytes + x_chunk_offset,
                           x_in_row ? x + int64_t(token) * x_stride + x_element : x, x_in_row);
        }
      }
    };

    // This lane's scales: rows warp_row + 16 mt + 8 rh + g of the tile, block 2 step + t / 2 (neutral past the
    // row's end and for rows past `out`: out and the m-tile starts are multiples of 16).
    bool m_tile_in[2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) m_tile_in[mt] = row0 + warp_row + 16 * mt < out;
    const int64_t scale_row = int64_t(at.expert) * out + row0 + warp_row + g;
    // Tiled: s[mt][0] is the m-tile's scale word of the step (row g blocks 0, 1, row g + 8 blocks 0, 1).
    const int64_t scale_tile = (int64_t(at.expert) * out + row0 + warp_row) / kTiledRows;
    const auto load_scales = [&](int step, uint32_t(&s)[2][2]) {
      const int block = step * kPipeStepBlocks + t / 2;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        if constexpr (kTiled) {
          s[mt][0] = m_tile_in[mt] && step < steps
                         ? __ldg(reinterpret_cast<const uint32_t*>(w.scales + ((scale_tile + mt) * pairs + step) *
                                                                                  kTiledUnitScaleBytes) +
                                 g)
                         : kNeutralScale * 0x01010101u;
          s[mt][1] = 0;
        } else {
#pragma unroll
          for (int rh = 0; rh < 2; ++rh) {
            s[mt][rh] = m_tile_in[mt] && block < blocks
                            ? __ldg(w.scales + (scale_row + 16 * mt + 8 * rh) * blocks + block)
                            : kNeutralScale;
          }
        }
      }
    };

    float acc[2][kPipeNTiles][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kPipeNTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

#pragma unroll
    for (int s = 0; s < kPipeStages - 1; ++s) {  // steps 0 .. stages − 2, one group each
      if (s < steps) issue(s);
      cp_async_commit();
    }
    uint32_t scale_now[2][2];
    load_scales(0, scale_now);

    for (int step = 0; step < steps; ++step) {
      // Committed so far: the groups of steps 0 .. step + stages − 2; at most stages − 2 pending means this step's
      // has landed for this thread; the barrier shows every thread's copies, and that every warp is done with
      // step − 1, whose stage the next copies overwrite.
      cp_async_wait<kPipeStages - 2>();
      __syncthreads();
      if (step + kPipeStages - 1 < steps) issue(step + kPipeStages - 1);
      cp_async_commit();
      uint32_t scale_next[2][2];
      load_scales(step + 1, scale_next);  // in flight during this step's products

      const uint32_t stage = shared_base + uint32_t((step % kPipeStages) * kPipeStageBytes);
      const uint32_t x_stage = stage + kPipeWStageBytes + g * kPipeXRowBytes;
      uint32_t a[2][2][2][4];  // (h, mt, rh): elements (0, 1), (2, 3), (4, 5), (6, 7) of the lane's word in half h
      if constexpr (kTiled) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const uint4 unit = load_shared_16(stage + (warp_row / kTiledRows + mt) * kTiledUnitWeightBytes + lane * 16);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t w0 = h == 0 ? unit.x : unit.z, w1 = h == 0 ? unit.y : unit.w;
            const uint4 lo = tiled_row_scaled<0>(w0, w1, block_scale((scale_now[mt][0] >> (8 * h)) & 0xFFu));
            const uint4 hi = tiled_row_scaled<1>(w0, w1, block_scale((scale_now[mt][0] >> (8 * (2 + h))) & 0xFFu));
            a[h][mt][0][0] = lo.x, a[h][mt][0][1] = lo.y, a[h][mt][0][2] = lo.z, a[h][mt][0][3] = lo.w;
            a[h][mt][1][0] = hi.x, a[h][mt][1][1] = hi.y, a[h][mt][1][2] = hi.z, a[h][mt][1][3] = hi.w;
          }
        }
      } else {
        uint2 words[2][2];  // words 2t, 2t + 1 of rows (mt, rh)
        BlockScale scale[2][2];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
          for (int rh = 0; rh < 2; ++rh) {
            words[mt][rh] = load_shared_8(stage + (warp_row + 16 * mt + 8 * rh + g) * kPipeWRowBytes + 8 * t);
            scale[mt][rh] = block_scale(scale_now[mt][rh]);
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
            for (int rh = 0; rh < 2; ++rh) {
              dequantize_word_lut(h == 0 ? words[mt][rh].x : words[mt][rh].y, scale[mt][rh], a[h][mt][rh]);
            }
          }
        }
      }
#pragma unroll
      for (int group = 0; group < kPipeNTiles / kPipeGroupNTiles; ++group) {
        if (group * kPipeGroupNTiles >= n_tiles) break;  // uniform
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int nt = group * kPipeGroupNTiles; nt < (group + 1) * kPipeGroupNTiles; ++nt) {
            const uint4 b = load_shared_16(x_stage + nt * 8 * kPipeXRowBytes + b_chunk_offset[h]);
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              const uint32_t(&lo)[4] = a[h][mt][0];
              const uint32_t(&hi)[4] = a[h][mt][1];
              mma_bf16_16x8x16(acc[mt][nt], lo[0], hi[0], lo[1], hi[1], b.x, b.y);
              mma_bf16_16x8x16(acc[mt][nt], lo[2], hi[2], lo[3], hi[3], b.z, b.w);
            }
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int rh = 0; rh < 2; ++rh) scale_now[mt][rh] = scale_next[mt][rh];
      }
    }

#pragma unroll
    for (int nt = 0; nt < kPipeNTiles; ++nt) {
      if (nt >= n_tiles) continue;
#pragma unroll
      for (int c = 0; c < 2; ++c) {  // columns 2t, 2t + 1
        const int s = nt * 8 + 2 * t + c;
        if (slot0 + s >= end_slot) continue;
        const bool ok = tokens[s] >= 0;  // a slot before the end: -1 only for an invalid token
        OutT* const out_row = y + int64_t(slot0 + s) * y_stride;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          if (!m_tile_in[mt]) continue;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int64_t o = row0 + warp_row + 16 * mt + g + 8 * half;
            store_out(out_row + o, ok ? acc[mt][nt][2 * half + c] : __int_as_float(0x7FC00000));
          }
        }
      }
    }
  }
}

}  // namespace

template <typename OutT>
cudaError_t launch_gemm_pipelined(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                                  int64_t x_stride, int64_t x_rows, OutT* y, int64_t y_stride, int64_t active,
                                  cudaStream_t stream) {
  if (active > kMxfp4GroupedGemmMaxActiveExperts) return cudaErrorInvalidValue;
  const int64_t row_tiles = (w.out_features + kPipeRows - 1) / kPipeRows;
  const int64_t max_tiles = row_tiles * ((r.max_slots + kPipeSlots - 1) / kPipeSlots + active);
  if (max_tiles > INT32_MAX) return cudaErrorInvalidValue;  // tile indices are int
  int sms = 0;
  cudaError_t status = current_multiprocessors(sms);
  if (status != cudaSuccess) return status;
  if (w.layout == Mxfp4Layout::tiled16 && !mxfp4_tiled_supported(w.out_features, w.in_features)) {
    return cudaErrorInvalidValue;
  }
  const auto kernel = w.layout == Mxfp4Layout::tiled16 ? mxfp4_grouped_gemm_mma_128x128_pipelined<OutT, true>
                                                       : mxfp4_grouped_gemm_mma_128x128_pipelined<OutT, false>;
  // The largest size any launch uses, so a graph captured earlier stays valid; neither call enqueues work.
  status = allow_dynamic_shared_memory(kernel, int(kPipeMaxSharedBytes));
  if (status != cudaSuccess) return status;
  const size_t shared = kPipeFixedSharedBytes + size_t(active + 1) * sizeof(int);
  // Two persistent blocks per SM, never more than the tiles any routing within the bounds has.
  const auto grid = static_cast<unsigned>(std::min<int64_t>(max_tiles, int64_t(2) * sms));
  kernel<<<grid, kPipeThreads, shared, stream>>>(w, r, x, x_stride, x_rows, y, y_stride);
  return cudaGetLastError();
}

template cudaError_t launch_gemm_pipelined(const Mxfp4ExpertWeights&, const ExpertRouting&, const __nv_bfloat16*,
                                           int64_t, int64_t, float*, int64_t, int64_t, cudaStream_t);
template cudaError_t launch_gemm_pipelined(const Mxfp4ExpertWeights&, const ExpertRouting&, const __nv_bfloat16*,
                                           int64_t, int64_t, __nv_bfloat16*, int64_t, int64_t, cudaStream_t);

}  // namespace k3::kernels::mxfp4_detail
