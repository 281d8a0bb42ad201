// mxfp4_grouped_gemm_wgmma: the prefill version of the MXFP4 routed-expert products on Hopper's warpgroup MMA
// (kernels/mxfp4_grouped.h, Mxfp4GroupedAlgorithm::gemm_wgmma; sm_90a, weights in the tiled layout):
//   y[s, o] = Σ_i W_e[o, i] · x[slot_token[s], i]   for the slots s of every active expert e.
// Persistent blocks of five warpgroups walk tiles of 128 output rows × 192 slots of one expert (the schedule of
// mxfp4_grouped_device.h) in k-steps of 64 elements (one block pair of the tiled layout) through a 5-stage ring in
// shared memory:
//   warpgroups 0 and 1, the producers, gather the tile's x rows through slot_token by cp.async and decode the step's
//     W tile once from the packed bytes (each warp one unit of 16 rows, each lane its 16 bytes as the tiled GEMV does)
//     into bf16 in shared memory, both operands in the 128-byte-swizzled K-major layout wgmma reads
//     (kernels/ptx/wgmma_sm90.h); a stage is announced full once its copies landed, three steps later, so that
//     the copies of three steps are in flight at once; the weights are asked of the L2 four steps ahead;
//   warpgroups 2 to 4, the consumers, each multiply 64 of the tile's slots (M) by its 128 rows (N), wgmma
//     m64n128k16 with both operands from shared memory, fp32 accumulators in registers, and release the stage when
//     their products are done; a consumer whose 64 slots are all past the expert's end only paces the ring.
// Each decoded weight serves 192 slots (an 8 K-token chunk of K3 routes 146 to an expert on average), and the decode
// runs on other warps than the MMAs, beside them. Slots past the expert's end are not copied (their rows are never
// stored); a slot whose token lies outside [0, x_rows) gets NaN; W rows past `out` are not decoded (their columns are
// never stored).
#include "kernels/mxfp4_grouped_device.h"
#include "kernels/ptx/mbarrier_sm90.h"
#include "kernels/ptx/ptx_mma.h"
#include "kernels/ptx/shared_memory_config.h"
#include "kernels/ptx/sm90a_device.h"
#include "kernels/ptx/wgmma_sm90.h"

#include <algorithm>
#include <climits>

namespace k3::kernels::mxfp4_detail {

namespace {

constexpr int kWarpgroupThreads = 128;
constexpr int kWgProducers = 2, kWgConsumers = 3;  // warpgroups 0-1 produce, 2-4 consume
constexpr int kWgProducerThreads = kWgProducers * kWarpgroupThreads;
constexpr int kWgProducerWarps = kWgProducerThreads / 32;
constexpr int kWgThreads = (kWgProducers + kWgConsumers) * kWarpgroupThreads;
constexpr int kWgRows = 128;                                                     // output rows per tile: the wgmma N
constexpr int kWgConsumerSlots = 64;                                             // the wgmma M
constexpr int kWgSlots = kWgConsumers * kWgConsumerSlots;                        // 192 slots per tile
constexpr int kWgAccumulators = kWgConsumerSlots * kWgRows / kWarpgroupThreads;  // 64 per consumer thread
constexpr int kWgStages = 5;
// A stage is announced full kWgCopyLag steps after its copies were issued (the x rows are gathered from anywhere in
// HBM), leaving one stage for the consumers to work on.
constexpr int kWgCopyLag = kWgStages - 2;
constexpr int kWgPrefetchSteps = 4;                                       // the weights' L2 prefetch distance
constexpr int kWgStepElements = 64;                                       // one block pair of the tiled layout
constexpr int kWgRowBytes = kWgStepElements * 2;                          // 128: one SW128 row of bf16
constexpr int kWgXStageBytes = kWgSlots * kWgRowBytes;                    // 24 KiB
constexpr int kWgWStageBytes = kWgRows * kWgRowBytes;                     // 16 KiB
constexpr int kWgStageBytes = kWgXStageBytes + kWgWStageBytes;            // 40 KiB, a multiple of 1024
constexpr int kWgUnitsPerWarp = kWgRows / kTiledRows / kWgProducerWarps;  // units of 16 rows per producer warp
constexpr int kWgXCopies = kWgSlots * 8 / kWgProducerThreads;             // chunks of 16 bytes per producer thread
constexpr int kWgXSlotsPerPass = kWgProducerThreads / 8;
constexpr int kWgBarrierBytes = 2 * kWgStages * 8;  // full, then empty
constexpr size_t kWgAlign = 1024;                   // SW128 blocks
constexpr size_t kWgFixedSharedBytes =
    kWgAlign + size_t(kWgStages) * kWgStageBytes + kWgBarrierBytes + (kWgSlots + kWgThreads / 32) * sizeof(int);
constexpr size_t kWgMaxSharedBytes = kWgFixedSharedBytes + (kMxfp4GroupedGemmMaxActiveExperts + 1) * sizeof(int);
static_assert(kWgMaxSharedBytes <= 227 * 1024, "one block per SM on an H100 / H200");
static_assert(kWgStageBytes % kWgAlign == 0 && kWgXStageBytes % kWgAlign == 0);

// Asks for the 128-byte line holding p in L2, without waiting or taking a register.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

__device__ __forceinline__ void store_shared_16(uint32_t address, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// The producer warpgroups' own barrier (id 1; __syncthreads is id 0).
__device__ __forceinline__ void producer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kWgProducerThreads) : "memory");
}

// One producer lane's share of a step: the 16 weight bytes and the scale word of each of its warp's units.
struct StepWeights {
  uint4 packed[kWgUnitsPerWarp];
  uint32_t scales[kWgUnitsPerWarp];
};

template <typename OutT>
__global__ void __launch_bounds__(kWgThreads, 1)
    mxfp4_grouped_gemm_wgmma_128x192(Mxfp4ExpertWeights w, ExpertRouting r, const __nv_bfloat16* __restrict__ x,
                                     int64_t x_stride, int64_t x_rows, OutT* __restrict__ y, int64_t y_stride) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t wg_shared_raw[];
  uint8_t* const shared =
      wg_shared_raw + ((kWgAlign - (reinterpret_cast<uintptr_t>(wg_shared_raw) % kWgAlign)) % kWgAlign);
  const auto base = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  const uint32_t full = base + kWgStages * kWgStageBytes, empty = full + kWgStages * 8;
  int* const tokens = reinterpret_cast<int*>(shared + kWgStages * kWgStageBytes + kWgBarrierBytes);  // -1: no copy
  int* const warp_sums = tokens + kWgSlots;
  int* const tile_prefix = warp_sums + kWgThreads / 32;  // [active + 1]

  if (threadIdx.x == 0) {
    for (int s = 0; s < kWgStages; ++s) {
      mbarrier::init(full + 8 * s, kWgProducerThreads);  // every producer thread, once its copies landed
      mbarrier::init(empty + 8 * s, kWgConsumers);       // one thread per consumer warpgroup
    }
  }
  const int active = build_tile_prefix<kWgThreads, kWgRows, kWgSlots>(w, r, tile_prefix, warp_sums);  // a barrier
  const int total_tiles = tile_prefix[active];
  const int64_t out = w.out_features, pairs = w.in_features / kWgStepElements;
  const int steps = static_cast<int>(pairs);
  // Broadcast from lane 0, so the compiler sees the roles (and below, whether a consumer multiplies) as uniform
  // over each warp: wgmma in a path it cannot prove uniform is serialised.
  const int warpgroup = __shfl_sync(0xFFFFFFFFu, int(threadIdx.x) / kWarpgroupThreads, 0);
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  if (warpgroup < kWgProducers) {
    const int thread = threadIdx.x, warp = thread / 32;  // among the producers
    // Producer. Steps are numbered across tiles (n): stage n % stages, its (n / stages)-th use.
    uint32_t n = 0;
    const auto announce = [&](uint32_t written) {  // the copies and this thread's stores, to wgmma's async proxy
      wgmma::fence_proxy_async_shared();
      mbarrier::arrive(full + 8 * (written % kWgStages));
    };
    const int x_chunk = thread % 8, x_first_slot = thread / 8;
    for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
      const GemmTile at = locate_tile<kWgRows, kWgSlots>(r, tile_prefix, active, tile);
      producer_sync();  // every producer thread has read the previous tile's tokens
      for (int i = thread; i < kWgSlots; i += kWgProducerThreads) {
        const int slot = at.slot0 + i;
        int token = -1;
        if (slot < at.end_slot) {
          const int candidate = r.slot_token[slot];
          if (candidate >= 0 && candidate < x_rows) token = candidate;
        }
        tokens[i] = token;
      }
      producer_sync();
      const int64_t first_unit_tile = (int64_t(at.expert) * out + at.row0) / kTiledRows;
      bool unit_in[kWgUnitsPerWarp];
#pragma unroll
      for (int q = 0; q < kWgUnitsPerWarp; ++q)
        unit_in[q] = at.row0 + int64_t(warp + kWgProducerWarps * q) * kTiledRows < out;
      const auto load_step = [&](int step, StepWeights& sw) {
#pragma unroll
        for (int q = 0; q < kWgUnitsPerWarp; ++q) {
          const int64_t unit = (first_unit_tile + warp + kWgProducerWarps * q) * pairs + step;
          sw.packed[q] = unit_in[q]
                             ? __ldg(reinterpret_cast<const uint4*>(w.packed + unit * kTiledUnitWeightBytes) + lane)
                             : make_uint4(0, 0, 0, 0);
          sw.scales[q] =
              unit_in[q] ? __ldg(reinterpret_cast<const uint32_t*>(w.scales + unit * kTiledUnitScaleBytes) + g) : 0u;
        }
      };
      // The weights' lines asked of the L2 kWgPrefetchSteps steps ahead (lanes 0-3 a unit's 512 bytes, lane 4 the
      // 128-byte line of scales that 4 steps share), so that the loads a step ahead find them there.
      const auto prefetch_step = [&](int step) {
#pragma unroll
        for (int q = 0; q < kWgUnitsPerWarp; ++q) {
          const int64_t unit = (first_unit_tile + warp + kWgProducerWarps * q) * pairs + step;
          if (!unit_in[q]) continue;
          if (lane < 4) prefetch_l2(w.packed + unit * kTiledUnitWeightBytes + lane * 128);
          if (lane == 4 && step % 4 == 0) prefetch_l2(w.scales + unit * kTiledUnitScaleBytes);
        }
      };
      for (int step = 0; step < kWgPrefetchSteps && step < steps; ++step) prefetch_step(step);
      StepWeights now;
      load_step(0, now);
      for (int step = 0; step < steps; ++step, ++n) {
        const int stage = static_cast<int>(n % kWgStages);
        StepWeights next = now;
        if (step + 1 < steps) load_step(step + 1, next);  // in flight while this step is written
        if (step + kWgPrefetchSteps < steps) prefetch_step(step + kWgPrefetchSteps);
        if (n >= kWgStages) mbarrier::wait(empty + 8 * stage, ((n / kWgStages) & 1u) ^ 1u);
        const uint32_t x_stage = base + uint32_t(stage * kWgStageBytes), w_stage = x_stage + kWgXStageBytes;
#pragma unroll
        for (int j = 0; j < kWgXCopies; ++j) {
          const int s = x_first_slot + kWgXSlotsPerPass * j, token = tokens[s];
          if (token >= 0) {
            ptx::cp_async_16(x_stage + wgmma::sw128_offset(kWgSlots, s, x_chunk),
                             x + int64_t(token) * x_stride + int64_t(step) * kWgStepElements + x_chunk * 8, true);
          }
        }
        cp_async_commit();
#pragma unroll
        for (int q = 0; q < kWgUnitsPerWarp; ++q) {
          if (!unit_in[q]) continue;
          const int row = (warp + kWgProducerWarps * q) * kTiledRows + g;
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            const uint32_t w0 = b == 0 ? now.packed[q].x : now.packed[q].z;
            const uint32_t w1 = b == 0 ? now.packed[q].y : now.packed[q].w;
            const int chunk = 4 * b + t;  // elements 32b + 8t … + 7 of the pair
            store_shared_16(w_stage + wgmma::sw128_offset(kWgRows, row, chunk),
                            tiled_row_scaled<0>(w0, w1, block_scale((now.scales[q] >> (8 * b)) & 0xFFu)));
            store_shared_16(w_stage + wgmma::sw128_offset(kWgRows, row + 8, chunk),
                            tiled_row_scaled<1>(w0, w1, block_scale((now.scales[q] >> (8 * (2 + b))) & 0xFFu)));
          }
        }
        // At most kWgCopyLag younger groups in flight: step n − lag's copies have landed.
        cp_async_wait<kWgCopyLag>();
        if (n >= uint32_t(kWgCopyLag)) announce(n - kWgCopyLag);
        now = next;
      }
    }
    cp_async_wait<0>();
    for (uint32_t m = n > uint32_t(kWgCopyLag) ? n - kWgCopyLag : 0; m < n; ++m) announce(m);
    return;
  }

  // Consumers: slots [64c, 64c + 64) of each tile.
  const int c = warpgroup - kWgProducers, thread = threadIdx.x % kWarpgroupThreads, warp = thread / 32;
  const bool leader = thread == 0;
  uint32_t n = 0;
  float acc[kWgAccumulators];
  for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
    const GemmTile at = locate_tile<kWgRows, kWgSlots>(r, tile_prefix, active, tile);
    const int first_slot = at.slot0 + c * kWgConsumerSlots;
    if (__shfl_sync(0xFFFFFFFFu, int(first_slot >= at.end_slot), 0)) {  // no slot of ours: pace the ring only
      for (int step = 0; step < steps; ++step, ++n) {
        const int stage = static_cast<int>(n % kWgStages);
        mbarrier::wait(full + 8 * stage, (n / kWgStages) & 1u);
        if (leader) mbarrier::arrive(empty + 8 * stage);
      }
      continue;
    }
#pragma unroll
    for (int i = 0; i < kWgAccumulators; ++i) acc[i] = 0.0f;
    int previous_stage = -1;
    for (int step = 0; step < steps; ++step, ++n) {
      const int stage = static_cast<int>(n % kWgStages);
      mbarrier::wait(full + 8 * stage, (n / kWgStages) & 1u);
      const uint32_t x_stage = base + uint32_t(stage * kWgStageBytes);
      const uint64_t a_desc = wgmma::sw128_descriptor(x_stage + c * kWgConsumerSlots * kWgRowBytes, 16, 1024);
      const uint64_t b_desc = wgmma::sw128_descriptor(x_stage + kWgXStageBytes, 16, 1024);
      wgmma::fence_registers(acc);
      wgmma::fence();
#pragma unroll
      for (int k16 = 0; k16 < kWgStepElements / 16; ++k16) {
        wgmma::mma_ss<0, 0>(acc, a_desc + 2 * k16, b_desc + 2 * k16);  // +32 bytes per k16 (descriptor units of 16)
      }
      wgmma::commit_group();
      wgmma::fence_registers(acc);
      wgmma::wait_group<1>();  // the previous step's products are done: its stage may be refilled
      if (previous_stage >= 0 && leader) mbarrier::arrive(empty + 8 * previous_stage);
      previous_stage = stage;
    }
    wgmma::wait_group<0>();
    wgmma::fence_registers(acc);
    if (previous_stage >= 0 && leader) mbarrier::arrive(empty + 8 * previous_stage);
      // Accumulator d[4j + e]: slot row 16·warp + g + 8·(e / 2), output column 8j + 2t + e % 2.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int slot = first_slot + 16 * warp + g + 8 * half;
      if (slot >= at.end_slot) continue;
      const int token = r.slot_token[slot];
      const bool ok = token >= 0 && token < x_rows;
      OutT* const out_row = y + int64_t(slot) * y_stride;
#pragma unroll
      for (int j = 0; j < kWgRows / 8; ++j) {
        const int64_t o = at.row0 + 8 * j + 2 * t;
        if (o >= out) continue;  // out is a multiple of 16: both columns or neither
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          store_out(out_row + o + e, ok ? acc[4 * j + 2 * half + e] : __int_as_float(0x7FC00000));
        }
      }
    }
  }
#endif
}

}  // namespace

template <typename OutT>
cudaError_t launch_gemm_wgmma(const Mxfp4ExpertWeights& w, const ExpertRouting& r, const __nv_bfloat16* x,
                              int64_t x_stride, int64_t x_rows, OutT* y, int64_t y_stride, int64_t active,
                              cudaStream_t stream) {
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  if (!sm90a_device(device) || w.layout != Mxfp4Layout::tiled16) return cudaErrorNotSupported;
  if (!mxfp4_tiled_supported(w.out_features, w.in_features) || active > kMxfp4GroupedGemmMaxActiveExperts) {
    return cudaErrorInvalidValue;
  }
  const int64_t row_tiles = (w.out_features + kWgRows - 1) / kWgRows;
  const int64_t max_tiles = row_tiles * ((r.max_slots + kWgSlots - 1) / kWgSlots + active);
  if (max_tiles > INT32_MAX) return cudaErrorInvalidValue;  // tile indices are int
  int sms = 0;
  status = current_multiprocessors(sms);
  if (status != cudaSuccess) return status;
  const auto kernel = mxfp4_grouped_gemm_wgmma_128x192<OutT>;
  // The largest size any launch uses, so a graph captured earlier stays valid; neither call enqueues work.
  status = allow_dynamic_shared_memory(kernel, int(kWgMaxSharedBytes));
  if (status != cudaSuccess) return status;
  const size_t shared = kWgFixedSharedBytes + size_t(active + 1) * sizeof(int);
  const auto grid = static_cast<unsigned>(std::min<int64_t>(max_tiles, sms));  // one persistent block per SM
  kernel<<<grid, kWgThreads, shared, stream>>>(w, r, x, x_stride, x_rows, y, y_stride);
  return cudaGetLastError();
}

template cudaError_t launch_gemm_wgmma(const Mxfp4ExpertWeights&, const ExpertRouting&, const __nv_bfloat16*, int64_t,
                                       int64_t, float*, int64_t, int64_t, cudaStream_t);
template cudaError_t launch_gemm_wgmma(const Mxfp4ExpertWeights&, const ExpertRouting&, const __nv_bfloat16*, int64_t,
                                       int64_t, __nv_bfloat16*, int64_t, int64_t, cudaStream_t);

}  // namespace k3::kernels::mxfp4_detail
