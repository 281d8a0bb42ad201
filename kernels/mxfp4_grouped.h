// mxfp4_grouped: the routed-expert products of one MoE projection with in-kernel MXFP4 dequantisation
// (K3-SPEC §5, §6), routed on the device:
//   for every active expert e and each of its slots s in [offsets[e], offsets[e+1]):
//     y[s, o] = Σ_i W_e[o, i] · x[slot_token[s], i]        W_e[o, i] = E2M1(nibble) · 2^(scale − 127)
// Shapes: all experts of the projection stacked as in the checkpoint, packed u8 [experts, out, in/2] (low
// nibble = even element) and scales u8 E8M0 [experts, out, in/32] (0xFF = NaN); x bf16 [x_rows, in]
// (row stride in elements); y fp32 or bf16 [max_slots, out] (row stride in elements). in is a multiple of
// 32, out a multiple of 16; packed and x 16-byte aligned, x_row_stride a multiple of 8. Weights whose layout is
// Mxfp4Layout::tiled16 hold each expert's bytes in the order of kernels/mxfp4_tiled.h (in a multiple of 64).
// The routing is the device bucketing's (token, choice) pairs, expert-major: expert_offsets int32
// [experts + 1], slot_token int32 [slots], active_experts int32 [experts] (ascending ids with ≥ 1 slot) and
// active_count int32 [1]. Only the host bounds max_slots (= tokens · top_k, the rows of y) and
// max_active_experts shape the launch, so a launch can be captured in a CUDA graph and replayed with new
// routings. Rows of y that no expert owns are not written; a slot whose token lies outside [0, x_rows)
// gets NaN.
//
// Versions (one entry, the algorithm chosen on the host from max_slots / max_active_experts):
//   mxfp4_grouped_gemv_mma_lean — decode on canonical weights, few slots per expert: one warp per 16 output rows of
//     one active expert streams those rows once per 8 slots (16-byte loads, two per row per lane in flight) and
//     multiplies on the tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate): each lane dequantises its own
//     32-element blocks in registers, and x is read in the same permuted k order. Its k-loop over whole 8-block
//     groups carries no bounds tests and walks pointers, slot-less lanes read a valid x row (their column is never
//     stored), and the scale is one multiply-add unless a scale of the warp's group is above 2^1 or NaN. Seven blocks
//     per SM (72 registers, no spill), so 16 experts of w2 at T = 1 run in one wave.
//   mxfp4_grouped_gemv_tiled — decode on Mxfp4Layout::tiled16 weights (mxfp4_grouped_gemv_tiled.cu; the layout and
//     why: kernels/mxfp4_tiled.h): the lean GEMV's grid, passes and products, a warp's weight loads 512 contiguous
//     bytes, one scale word per row pair and block pair, x in memory order, 8 bf16 pairs decoded in 18 integer
//     instructions (the canonical order's decode binds the lean GEMV). Where the tiles fit one wave of 28 warps per
//     SM, one 28-warp block per SM over an even share of them (mxfp4_gemv_tiled_block_warps).
//   mxfp4_grouped_gemm_mma_128x128_pipelined — prefill, many slots per expert (mxfp4_grouped_gemm.cu; either
//     layout): persistent blocks of 4 warps walk tiles (expert, 128 output rows, 128 slots) in k-steps of 64; a
//     4-stage cp.async ring brings the raw packed W bytes and the x rows gathered through slot_token into shared
//     memory, each lane dequantises its own mma A fragments from the packed bytes straight into registers (the lookup
//     decode), B comes as 16-byte chunks of a bank-swizzled x tile, and 32-slot groups past an expert's last slot are
//     skipped. Each warp owns 32 rows × all 128 slots: no weight decoded twice.
//   mxfp4_grouped_gemm_wgmma_128x192 — prefill on Hopper (mxfp4_grouped_gemm_wgmma.cu; tiled weights, compute
//     capability 9.0): persistent blocks of four warpgroups walk tiles (expert, 128 output rows, 192 slots) in
//     k-steps of 64 through a 5-stage shared-memory ring; a producer warpgroup gathers x by cp.async and decodes each
//     W tile once into bf16 in shared memory, three consumer warpgroups multiply 64 slots each by wgmma m64n128k16 with
//     both operands from shared memory, so the decode runs beside the MMAs on other warps.
// automatic: the GEMV (gemv_tiled on tiled weights) while the average slots per possibly active expert is at most
// kMxfp4GroupedGemvMaxAverageSlots (a decode step reads each weight once), above it the pipelined GEMM (each decoded
// weight serves 128 slots), from kMxfp4GroupedWgmmaMinAverageSlots the wgmma GEMM where it runs
// (mxfp4_grouped_gemm_wgmma_supported). The engine
// dequantises to bf16 for cuBLASLt from more slots still (kernels/mxfp4_grouped_dequantized.h). All decode E2M1 to the
// bf16 bits of v·2^-126 (E2M1 subnormals included; by bit placement, the pipelined GEMM by byte lookup) and one or two
// exact bf16 multiplies by powers of two; the dequantised W equals the fp32 decode bit for bit. Measurements, profiles
// and the many versions tried: bench/results/kernel-notes.md (mxfp4_grouped).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

// All experts of one projection, stored contiguously as in the checkpoint stacked by expert.
// The order of the bytes within each expert: the checkpoint's (canonical), or the tiled one of kernels/mxfp4_tiled.h
// (out a multiple of 16, in of 64), which only the GEMV reads.
enum class Mxfp4Layout { canonical, tiled16 };

struct Mxfp4ExpertWeights {
  const uint8_t* packed;  // [experts, out, in/2]
  const uint8_t* scales;  // [experts, out, in/32]
  int experts;
  int64_t out_features;
  int64_t in_features;
  Mxfp4Layout layout = Mxfp4Layout::canonical;
};

// Device arrays of the bucketing contract, and the host bounds that size the launch.
struct ExpertRouting {
  const int32_t* expert_offsets;  // [experts + 1]
  const int32_t* slot_token;      // [max_slots]
  const int32_t* active_experts;  // [experts]
  const int32_t* active_count;    // [1]
  int max_slots;                  // tokens · top_k: rows of y
  int max_active_experts;         // bound on *active_count (≤ experts)
};

enum class Mxfp4GroupedAlgorithm { automatic, gemv, gemm_pipelined, gemm_wgmma };

// The tiled GEMV's blocks: 4 warps (16 output rows each), 7 per SM; or, where the possibly active experts' tiles fit
// one wave of 28 warps per SM, one block of 28 warps per SM over an even share of them, so that all warps start
// together and none waits behind older blocks' decode (the SM issues it in launch order).
inline constexpr int kMxfp4GemvTiledBlockWarps = 4;
inline constexpr int kMxfp4GemvTiledWarpsPerSm = 28;
// Warps per block for `active_experts` (the host bound) experts of `out_features` rows on `multiprocessors` SMs.
constexpr int mxfp4_gemv_tiled_block_warps(int64_t active_experts, int64_t out_features, int multiprocessors) {
  return active_experts * (out_features / 16) <= int64_t(kMxfp4GemvTiledWarpsPerSm) * multiprocessors
             ? kMxfp4GemvTiledWarpsPerSm
             : kMxfp4GemvTiledBlockWarps;
}

// GEMV while the average slots per possibly active expert is at most this; the GEMM above it.
inline constexpr int kMxfp4GroupedGemvMaxAverageSlots = 8;
// The wgmma GEMM from this average on (below it the pipelined GEMM's 32-slot groups waste less), and the engine's
// dequantise-then-cuBLASLt path from kMxfp4GroupedWgmmaMaxAverageSlots on: the measured crossovers on an H200 at K3's
// shapes, all 896 experts active (bench/results/2026-12-03-h200-moe-wgmma): at 73 slots per expert the pipelined
// GEMM's w13 + w2 take 23.7 ms against the wgmma GEMM's 28.9, at 146 the wgmma GEMM's 34.8 against 47.0 dequantised
// and 54.4 pipelined, at 585 the dequantised path's 82.8 against 132.3; the thresholds are the geometric means of
// the neighbouring measured averages.
inline constexpr int kMxfp4GroupedWgmmaMinAverageSlots = 104;
inline constexpr int kMxfp4GroupedWgmmaMaxAverageSlots = 292;
// The GEMMs keep a per-expert tile prefix in shared memory: at most this many active experts.
inline constexpr int kMxfp4GroupedGemmMaxActiveExperts = 4096;

// Whether gemm_wgmma runs these weights on the current device: the tiled layout, compute capability 9.0.
bool mxfp4_grouped_gemm_wgmma_supported(const Mxfp4ExpertWeights& w);

// The algorithm `automatic` runs for these weights and bounds (host values and the current device): the GEMV while
// the average is small, the pipelined GEMM above it, the wgmma GEMM from kMxfp4GroupedWgmmaMinAverageSlots where it
// is supported. gemm_wgmma asked for
// where it is not supported: cudaErrorNotSupported.
Mxfp4GroupedAlgorithm mxfp4_grouped_algorithm(const Mxfp4ExpertWeights& w, const ExpertRouting& routing);

cudaError_t mxfp4_grouped_bf16_to_f32(const Mxfp4ExpertWeights& w, const ExpertRouting& routing, const __nv_bfloat16* x,
                                      int64_t x_row_stride, int64_t x_rows, float* y, int64_t y_row_stride,
                                      cudaStream_t stream,
                                      Mxfp4GroupedAlgorithm algorithm = Mxfp4GroupedAlgorithm::automatic);
cudaError_t mxfp4_grouped_bf16_to_bf16(const Mxfp4ExpertWeights& w, const ExpertRouting& routing,
                                       const __nv_bfloat16* x, int64_t x_row_stride, int64_t x_rows, __nv_bfloat16* y,
                                       int64_t y_row_stride, cudaStream_t stream,
                                       Mxfp4GroupedAlgorithm algorithm = Mxfp4GroupedAlgorithm::automatic);

}  // namespace k3::kernels
