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
//   mxfp4_grouped_gemv_mma_lean — decode (the automatic choice), few slots per expert: one warp per 16 output rows
//     of one active expert streams those rows once per 8 slots (16-byte loads, two per row per lane in flight) and
//     multiplies on the tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate): each lane dequantises its own
//     32-element blocks in registers, and x is read in the same permuted k order. Its k-loop over whole 8-block
//     groups carries no bounds tests and walks pointers, slot-less lanes read a valid x row (their column is never
//     stored), and the scale is one multiply-add unless a scale of the warp's group is above 2^1 or NaN. Seven blocks
//     per SM (72 registers, no spill), so 16 experts of w2 [3584, 3072] at T = 1 (896 blocks) run in one wave: 63-64
//     against 54 % per graph launch at six (…-kernels-13 run 4; w13 71-72 against 71 %, T ≥ 8 within the spread;
//     eight blocks, 64 registers and a spill, no better). On an H200
//     (…-kernels-9, four runs) it reads w1's weights at 78-81 / 79-83 / 79-83 % of copy bandwidth at T = 8 / 16 / 64
//     per launch in a CUDA graph and 65-66 % at T = 1 (timed alone: 76-78 / 80-81 / 79-83 / 55-56 %).
//   mxfp4_grouped_gemv_tiled — decode on Mxfp4Layout::tiled16 weights (mxfp4_grouped_gemv_tiled.cu; the layout and
//     why: kernels/mxfp4_tiled.h): the lean GEMV's grid, passes and products, a warp's weight loads 512 contiguous
//     bytes, one scale word per row pair and block pair, x in memory order, 8 bf16 pairs decoded in 18 integer
//     instructions. Where the tiles fit one wave of 28 warps per SM, one 28-warp block per SM over an even share of
//     them (mxfp4_gemv_tiled_block_warps): w2 at T = 1 75.6-75.8 against 72.7-72.9 % per launch in the graph, the
//     same rounds (bench/results/2026-12-01-h200-kernels-18 run 12). Before that (…-kernels-16, four machines) per
//     launch in a CUDA graph w13 [6144, 3584] 78.2-82.0 / 82.2-90.3 / 81.2-90.8 / 77.8-88.2 % of copy bandwidth at
//     T = 1 / 8 / 16 / 64 and w2 [3584, 3072] 72.3-73.8 / 80.5-89.1 / 81.1-88.3 / 80.8-88.1 %, against the lean
//     GEMV's 64.0-73.2 % and 63.9-73.1 % (three of the runs).
//     The pipelined GEMM reads the tiled layout as well; the first GEMM does not (an Error says so).
//   mxfp4_grouped_gemm_mma_128x64 — prefill on request (the first GEMM), many slots per expert: persistent blocks
//     walk the tiles (expert, 128 output rows, 64 slots); each k-step dequantises a 128×32 W tile to bf16 and gathers
//     the 64 slots' x rows through slot_token into double-buffered shared memory, then 8 warps of 32×32
//     run mma.sync m16n8k16 from ldmatrix fragments.
//   mxfp4_grouped_gemm_mma_128x128_pipelined — prefill (the automatic choice; mxfp4_grouped_gemm.cu; on an H200 w1 at
//     8192 tokens, all 896 experts active: 18.3 ms = 158 TFLOP/s against 26.8 ms for gemm_mma_128x64):
//     persistent blocks of 4 warps walk tiles (expert, 128 output rows, 128 slots) in k-steps of 64; a 4-stage
//     cp.async ring brings the raw packed W bytes and the x rows gathered through slot_token into shared memory,
//     each lane dequantises its own mma A fragments from the packed bytes straight into registers (the lookup
//     decode), B comes as 16-byte chunks of a bank-swizzled x tile, and 32-slot groups past an expert's last
//     slot are skipped. Each warp owns 32 rows × all 128 slots (32 accumulator tiles): no weight decoded twice.
// All decode E2M1 to the bf16 bits of v·2^-126 (E2M1 subnormals included; by bit placement, the pipelined GEMM
// by byte lookup) and one or two exact bf16 multiplies by powers of two; the dequantised W equals the fp32
// decode bit for bit.
// History, measured on an H200: gemv_mma_rows16 (the lean GEMV's tile, products and order, so the same bits, with
// bounds tests and 64-bit index arithmetic in its k-loop, zero-filled x for slot-less lanes and both scale multiplies
// always; 760 SASS instructions per k-group): 52.7 / 64.0 / 65.3 / 66.4 % per graph launch at T = 1 / 8 / 16 / 64
// against the lean form's 65.8 / 80.1 / 82.0 / 82.7 % in the same run (…-kernels-9, run 3); removed. Forms of the
// lean GEMV tried in …-kernels-9 and removed: 4 loads per row in flight (96 registers, 5 blocks per SM: a second
// wave at T = 1), two accumulators, x loaded beside the weights, a 3- or 4-stage cp.async ring for weights and
// scales, and an L2 prefetch 1 or 2 groups ahead: none faster at every T, the ring and the prefetch 5-15 % slower.
// Then, all with the lean GEMV's products (bit-for-bit tests passed), per graph launch at T = 1 / 8 / 16 / 64 against
// the lean form in the same run, all removed: half-groups of 4 blocks each loaded one half ahead (staggered, run 7)
// 58.0 / 67.7 / 69.0 / 67.9 % against 66.1 / 80.1 / 82.5 / 81.4 %; x staged per group in shared memory by cp.async
// (xshared, run 8; +23 % instructions) 55.1 / 68.5 / 70.6 / 70.9 %, with staggered weights 54.5 / 64.4 / 66.2 /
// 68.1 %, against 66.2 / 80.5 / 83.1 / 81.5 %; 3 or 4 chunks per row held to 80 registers (run 9) 59.7 / 78.3 /
// 80.7 / 78.4 % and 62.2 / 80.6 / 82.6 / 80.9 % against 65.8 / 80.5 / 82.9 / 81.1 %; a block's 4 warps splitting
// the k-groups of 16 rows, 4 waves at T = 1 (split4, run 10) 60.4 / 70.7 / 70.5 / 67.5 % against 65.5 / 79.3 /
// 80.4 / 77.3 %; for x of one row (batch-1 decode) the row in shared memory once per block (one_row, run 11), plain
// and with staggered weights, 63.0 and 57.9 % at T = 1 against 65.5 %; an L2 256-byte fetch hint on the weight
// loads (run 12) 62.7 / 80.8 / 82.7 / 76.6 % against 65.2 / 79.0 / 80.5 / 79.4 %; the next whole group prefetched in
// registers at 80 registers (run 13) 65.4 / 77.2 / 77.3 / 76.1 % against 65.2 / 78.9 / 79.8 / 74.3 %. What T = 1 is
// bound by (Nsight Compute): the warps wait on the weights' own DRAM latency (15.4 K of ~44 K cycles per warp on
// long scoreboard; 19.5 K for staggered one_row, which has no x load in its loop); a whole group prefetched halves
// that (8.3 K) and the time stays, the stall turning into math-pipe throttle (issue 66 %), so the SMs' decode work
// binds as in T = 64's steady state, and T = 1 adds its single wave's ramp and drain (34 µs against 28 µs for 16
// experts at T = 64's 1.73 µs per expert).
// Earlier: gemv_cp_async (rows16's tile with each lane's weight chunks through a 3-step
// per-warp cp.async ring in shared memory) 4-6 % slower than rows16; removed. gemv_lut (rows16 with the byte-lookup
// decode, 262 integer PTX instructions against 390) within 1-3 % of rows16; removed. gemv_pipelined (rows16
// software-pipelined in registers: 2 stages of 4 blocks with their x) and gemv_pipelined_weights (3 stages of 4
// blocks, weights only), 80 and 78 registers: at T = 1 / 8 / 16 / 64, 53.2 / 318.9 / 582.8 / 1533.7 us and
// 50.0 / 288.3 / 528.1 / 1390.6 us against rows16's 48.6 / 273.6 / 498.9 / 1308.9 us in the same run (one 16-byte
// load per row in flight ahead is fewer bytes than rows16's two at once); removed. gemv_l2_prefetch_4 and _8 (rows16
// with lanes 0..15 asking the L2, by cp.async.bulk.prefetch, for the warp's rows 4 or 8 k-groups ahead): 58.0 / 335.4 /
// 612.3 / 1605.6 and 57.8 / 324.2 / 587.0 / 1528.9 us against 48.2 / 272.9 / 496.2 / 1311.6 us; removed. Nsight
// Compute on rows16 (…-kernels-8): at T = 64 issue slots 80 % busy, the ALU pipe 80 % and the FMA-heavy pipe (IMAD
// shifts, the bf16 scale multiplies) 68 %: the in-register E2M1 decode binds; at T = 1 (one wave of 768 blocks) DRAM
// 36 %, issue 69 % at ncu's locked 1.34 GHz, stalls on long scoreboard and math-pipe throttle alike. gemm_wgmma (the
// pipelined GEMM's tiles on 2 warpgroups with wgmma m64nNk16, A decoded from the packed bytes into registers, x as a
// SW128 tile; commit 7dd6f2b): passed every test, memcheck and racecheck clean, 18.69 ms (154 TFLOP/s) for w1 at
// 8192 tokens against gemm_pipelined's 18.28 ms in the same run, so the MMA instruction was not the limit; removed.
// gemv_bulk (bench/results/2026-11-30-h200-kernels-12 runs 7-8; the lean GEMV's tiles, products and order, the same
// bits in every test, memcheck and racecheck clean): persistent warps, units of 16 rows of one active expert dealt
// round-robin, each warp streaming its rows' weights and scales into its own shared-memory stages by bulk copies
// (cp.async.bulk, one per row and lane, counted on an mbarrier) one or two steps ahead, so the bytes in flight cost
// no registers. 6 warps per SM with 3 stages of 32 blocks: 29-33 % of copy bandwidth at T = 1 / 8 / 16 / 64 against
// the lean GEMV's 56-79 % in the same runs; 16 warps with 2 stages of 16 blocks: 29 / 44 / 46 / 44 % (31 / 46 / 47 /
// 46 % per graph launch, against 65 / 75 / 76 / 74 %). Too few warps decode and wait on each step's copy; removed.
// overlap_previous (bench/results/2026-11-30-h200-kernels-13 run 3; commit 7c66f6e): the lean GEMV as a programmatic
// dependent launch that let the next kernel launch at once, read the routing, asked the L2 for each row's first 4
// groups and waited for the previous kernel before reading x (same bits, eager and in a graph). Chained in a CUDA
// graph it was no faster at T = 1 (w13: 68.1 against 62.4 µs per launch) and slower at T ≥ 8 (its early blocks take
// the SM slots the previous launch's later waves need); the K3 decode step with it on both GEMVs, 2.705 and 3.199 ms
// at 128 K and 1 M, was within a run's spread of 2.690 and 3.183. Removed.
// gemv_tiled_staged (bench/results/2026-11-30-h200-kernels-17 run 3; an experiment build, the 23 MXFP4 tests passing,
// memcheck and racecheck clean): gemv_tiled with each warp's groups (2 KiB of weights and 128 bytes of scales,
// contiguous in the tiled layout) brought by two bulk copies into its own 3-stage shared-memory ring, 3 groups ahead:
// per graph launch w2 59.8-60.1 / 77.6-77.9 / 74.9-78.4 / 75.0-75.8 % at T = 1 / 8 / 16 / 64 against 72.2-72.4 /
// 92.4 / 82.5-83.2 / 82.9 %, w13 about 10 points lower at every T; not kept. In the same graph a kernel that only
// reads the GEMV's bytes (kernels/read_floor.h) reaches 89.1 % at w2, T = 1 (run 1): a one-wave launch's ramp and
// drain cost any kernel 11 of the 28 points between the GEMV's 72.2 % and the copy rate there. Two accumulators per
// lane (units 0, 2 and 1, 3; run 9): the same within a point at every T. x read only by the lanes whose mma column
// has a slot (run 10): 3-4 points slower at T = 1.
// At w2, T = 1, traced per warp (bench/results/2026-12-01-h200-kernels-18, experiment builds of ec301ee): the 3,584
// warps start within 0.2 µs and do the same 12 groups, yet end between 16 and 30 µs in the launch order of their
// blocks on the SM (mean end 19.1 µs for each SM's first block, 29.2 µs for its seventh): the SM issues the older
// warps' decode first (298 instructions per group) and the launch lasts as long as its youngest blocks. With the
// products replaced by an XOR of the loaded words the same kernel reaches 90.5-93.2 %: the decode's issue binds, not
// the loads. No faster: loads a group ahead (67.7-70.5 %), the routing read first, __nanosleep between pairs; units of
// a tile's k-groups from a global counter summed by the tile's last unit (46-55 %), or from a shared-memory queue in
// one block of 28 warps per SM (45-63 %: the warps end together, but each group takes 2-2.5 times as long).
// Faster: wgmma with TMA-fed tiles for prefill (the engine dequantises to bf16 and uses cuBLASLt from 128 slots per
// expert: mxfp4_grouped_dequantized.h); the GEMV's cheaper decode is the tiled layout's (gemv_tiled above).
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

enum class Mxfp4GroupedAlgorithm { automatic, gemv, gemm, gemm_pipelined };

// The tiled GEMV's blocks: 4 warps (16 output rows each), 7 per SM; or, where the possibly active experts' tiles fit
// one wave of 28 warps per SM, one block of 28 warps per SM over an even share of them, so that all warps start
// together and none waits behind older blocks' decode (the SM issues it in launch order: at w2, T = 1 the seventh
// block of each SM ended 10 µs after the first).
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
// The GEMMs keep a per-expert tile prefix in shared memory: at most this many active experts.
inline constexpr int kMxfp4GroupedGemmMaxActiveExperts = 4096;

// The algorithm `automatic` runs for these weights and bounds (host values only): the GEMV while the
// average is small (the lean GEMV), the pipelined GEMM above it.
Mxfp4GroupedAlgorithm mxfp4_grouped_algorithm(const Mxfp4ExpertWeights& w, const ExpertRouting& routing);

cudaError_t mxfp4_grouped_bf16_to_f32(const Mxfp4ExpertWeights& w, const ExpertRouting& routing,
                                      const __nv_bfloat16* x, int64_t x_row_stride, int64_t x_rows, float* y,
                                      int64_t y_row_stride, cudaStream_t stream,
                                      Mxfp4GroupedAlgorithm algorithm = Mxfp4GroupedAlgorithm::automatic);
cudaError_t mxfp4_grouped_bf16_to_bf16(const Mxfp4ExpertWeights& w, const ExpertRouting& routing,
                                       const __nv_bfloat16* x, int64_t x_row_stride, int64_t x_rows, __nv_bfloat16* y,
                                       int64_t y_row_stride, cudaStream_t stream,
                                       Mxfp4GroupedAlgorithm algorithm = Mxfp4GroupedAlgorithm::automatic);

}  // namespace k3::kernels
