// kda_chunk_prefill: one sequence's prefill chunk (or whole prompt) through the KDA delta rule in the chunked form
// (K3-SPEC §3 "Chunked form"), continuing from `state` and leaving the final state in it; equal to T steps of
// kda_decode_step_f32state (ref::kda_recurrent) up to TF32 rounding.
// Shapes: q, k, v, g, out [tokens, heads·d] fp32 row-major, head h in columns [h·d, (h+1)·d) (q L2-normalised and
// scaled by d^-1/2, k L2-normalised, g = log decay with gate_lower_bound ≤ g ≤ 0); beta [tokens, heads] fp32;
// state [heads, d, d] fp32, key index first (as ref::kda_recurrent's S[h](i, j)), read and written in place.
// d = head_dim = 128 only; tokens ≥ 1, any count (the last 64-token chunk may be partial). out must not alias the
// inputs. Every buffer dense; workspace: device scratch of kda_chunk_prefill_workspace_bytes(tokens, heads, 128)
// bytes, 256-byte aligned (as cudaMalloc returns): about 4.5× the size of q per call (1.8 GB for 8192 tokens × 96
// heads). No host synchronisation and no allocation inside, so a call can be captured in a CUDA graph.
//
// gate_lower_bound: the gate's lower bound (K3: -5), or 0 for an unbounded gate (Kimi Linear's softplus form). Other
// positive values and NaN are rejected. It only selects how the diagonal 16-token tiles are scored (below); both
// paths are exact for their inputs. g below the stated bound breaks the tensor-core path's overflow guarantee.
//
// Algorithm (as ut_tensorcore runs it; the other versions below differ as noted): two launches, every matrix product
// on tensor cores (WMMA m16n16k8, TF32 operands rounded to nearest, fp32 accumulation):
//   1. kda_chunk_intra_ut (one block per (64-token chunk, head), all chunks at once): the chunk-local cumulative log
//      decay G; A_kk, A_qk in 16 × 16 tiles (K3-SPEC's lower-bound tiling, as ref::kda_chunked_tiled): a tile
//      below the diagonal is one product with exponents referenced to its row tile's first token (all ≤ 0); a
//      diagonal tile is one product referenced to its middle token when -5 ≤ gate_lower_bound < 0 (|ΔG| ≤ 40 nats),
//      otherwise computed pair by pair from each pair's own exponent G_i − G_j ≤ 0 (exact for any gate); the UT
//      transform X = (I + StrictLower(A_kk))⁻¹ by forward substitution (16 × 16 diagonal blocks per warp, then the
//      blocks below in three wavefronts, fp32); W = X (β e^G ⊙ K), U = X (β ⊙ V); and Qg = e^G ⊙ Q,
//      Kd = e^{G_last − G} ⊙ K, e^{G_last}, all into the workspace.
//   2. kda_chunk_state_pass (one block per (head, 32 value columns): 4·heads blocks, 384 for K3), the only
//      sequential part: per chunk V' = U − W S, O = Qg S + A_qk V', S ← Diag(e^{G_last}) S + Kdᵀ V', the block's
//      slice of S (128 × 32) resident in shared memory from the first chunk to the last.
// Precision: TF32 products give ≈ 5e-4 normalised error against the fp64 recurrence (a CPU model of this algorithm
// with TF32 operand rounding: 3.3e-4 to 4.8e-4 for 1 to 8192 tokens); the state itself accumulates in fp32.
// Versions (KdaChunkVariant; the same workspace, the same two launches and the same arithmetic in the same order —
// only when data is requested and how the state pass's work is split over blocks differ, except where noted):
//   ut_tensorcore (the plain reference version; 8K on an H200: 9.18 ms = 5.31 phase 1 + 3.88 state pass): as above;
//     every global operand read when it is needed, so the state pass waits one L2/HBM round trip per group of
//     fragment loads, ≈ 15 dependent round trips per chunk, 128 chunks in a row at 8K tokens.
//   Tried and removed (superseded by the two below; the code is in the repository's history):
//   ut_tensorcore_prefetch (L2 prefetch of the next chunk's operands in the state pass, of q and v rows in phase 1):
//     measured on an H200: 8.45 ms = 4.58 phase 1 + 3.89 state pass at 8K; removed.
//   ut_tensorcore_staged (state pass one block of 16 warps per head, the whole S and each chunk's operands in shared
//     memory via cp.async): measured on an H200: 7.07 ms = 4.49 phase 1 + 2.60 state pass at 8K; removed.
//   ut_staged_inputs (phase 1's q, k, v, g rows copied into shared memory on entry; staged state pass): measured on
//     an H200: 7.20 ms = 4.62 phase 1 + 2.59 state pass at 8K; removed.
//   ut_staged_split_value (phase 1 as ut_tensorcore_prefetch; the split-value state pass below): measured on an
//     H200: 6.28 ms = 4.49 phase 1 + 1.77 state pass at 8K (32K 24.9 ms, 128K 98.8 ms); removed.
//   ut_factored_split_value (8K on an H200: 3.36 ms = 1.57 phase 1 + 1.79 state pass, 3.5× the roofline
//     and 10.0× faster than the recurrent kernel's 33.7 ms; 32K 13.2 ms, 128K 52.8 ms, 3.4×): the state pass is one
//     block of 2 warps per (head, 32 value columns) (4·heads blocks, 384 for K3, three per SM), each warp holding its
//     16 columns of S (128 × 16, fp32) in registers from the first chunk to the last, kept transposed (Sᵀ), so the
//     products V'ᵀ = Uᵀ − Sᵀ Wᵀ, Oᵀ = Sᵀ Qgᵀ + V'ᵀ A_qkᵀ, Sᵀ ← Sᵀ Diag(e^{G_last}) + V'ᵀ Kd run on mma.sync m16n8k8
//     (TF32 rounded to nearest, fp32 accumulation) with no exchange between warps: an accumulator tile serves as the
//     next product's A operand with the reduction order permuted within each 8 (the B rows read to match). Each
//     chunk's operands stream through a ring of four shared buffers in 8 steps of 16 to 32 rows (W and Qg 16 rows at
//     a time, then U's 32 columns, e^{G_last} and A_qk, then Kd), each copied with cp.async three steps before it is
//     used (74 KB of shared memory per block). W, Qg, Kd and A_qk are read by all 4 blocks of a head. The same
//     products as ut_tensorcore, summed in another order within each 8-term group. Phase 1 (kda_chunk_intra_factored,
//     kernels/kda_chunk_intra.cu) writes the same workspace with far fewer instructions and more resident warps:
//     every exponent split at tile boundaries, so each row factor q ⊙ e^{G − G_{16I}}, k ⊙ e^{G − G_{16I}} and column
//     factor k ⊙ e^{G_{16J+15} − G} is built once (two exponentials per element, in two rounds of 64 channels) and
//     each score tile is a shared-memory product on mma.sync with one per-channel scale (the same references and
//     operand bounds as the other versions); the UT transform's off-diagonal blocks by blocked doubling
//     (X_10 = −X_11 L_10 X_00, then the 32 × 32 block) in four barrier-separated fp32 steps instead of a wavefront;
//     W and U on mma.sync. 61.7 KB of shared memory, three blocks (24 warps) per SM instead of two; same precision.
//   ut_factored_split_key (the default until split_key_f16; on constant inputs, 8K on an H200: 2.78 ms = 1.64 phase 1
//     + 1.15 state pass, 2.87× the roofline and 12.1× faster than the recurrent kernel's 33.6 ms; 32K 10.9 ms,
//     2.82×; 128K 44.2 ms, 2.85×; bench/results/2026-11-30-h200-kernels-8; on random inputs 2.90×, 2.89× and
//     2.97–2.98× (46.1 ms at 128K), bench/results/2026-11-30-h200-kernels-12): phase 1 of ut_factored_split_value; the
//     state pass (kernels/kda_chunk_state.cu) is one block of 8 warps per (head, 32 value columns) (384 blocks for K3,
//     three per SM): warp (vh, p) keeps Sᵀ's 16 values vh × 32 keys [32p, 32p + 32) in registers and updates them
//     alone, and computes V'ᵀ and Oᵀ over all 128 keys for its token tiles {p, 7 − p} from a TF32 copy of the block's
//     Sᵀ in shared memory, so no sum is split between warps and each warp's chain per chunk is 105 products instead of
//     ≈ 450; V'ᵀ goes through shared memory to the products over tokens. Each chunk's operands stream through a ring
//     of 3 shared buffers in 7 steps (W and Qg by key quarter, A_qk with e^{G_last}, Kd by halves), each copied with
//     cp.async two steps ahead (75 KB per block), with the per-lane address arithmetic out of the chunk loop (608 M
//     instructions at 8K against 819 M before; kernels/kda_chunk_state.cu). The same products and roundings; the key
//     sums in another order.
//     Workspace contract of these two ut_factored versions: phase 1 stores W, Qg, Kd and A_qk (product operands only)
//     already TF32-rounded, U and e^{G_last} in fp32; split_key's pass feeds the rounded ones to mma.sync unconverted.
//   ut_factored_split_key_f16 (the default; random inputs on an H200: 8K 2.07 ms = 1.38 phase 1 + 0.68 state pass,
//     2.13× the roofline and 16× faster than the recurrent kernel; 32K 8.22 ms, 2.12×; 128K 32.9 ms = 21.7 + 11.3,
//     2.12×; bench/results/2026-11-30-h200-kernels-12): split_key with W, Qg, Kd and A_qk stored in fp16 (rounded to
//     nearest: TF32's 10-bit mantissa, half the bytes; 88.5 instead of 144.5 KB of workspace per head and chunk) and
//     the state pass on mma.sync m16n8k16 fp16 with ldmatrix fragment loads (kernels/kda_chunk_state_f16.cu): 53
//     products per warp and chunk instead of 105, no operand conversions, the warp's slice of S in registers for the
//     whole pass, a ring of 4 buffers three steps ahead in 54 KB. Phase 1 is split_key's, storing fp16. The same
//     products in fp32 accumulation; each operand rounded once, to fp16 instead of TF32, which inside fp16's range
//     (normal 6.1e-5 .. 65504) is the same rounding; W, V' and S must stay below 65504 in magnitude (they scale with
//     v; Qg, Kd and A_qk are at most 1 for L2-normalised q and k), and operands below 6.1e-5 keep an absolute error
//     under 3e-8.
// Where ut_tensorcore's time goes at 8K tokens × 96 heads (arithmetic; kda_prefill_bench times each launch on its
// own, rows "phase 1" and "phase 2"): the workspace is 1.8 GB written then read back (≈ 0.9 ms at 4 TB/s, the floor
// of the two-launch design); phase 1 runs 12288 blocks two per SM (112 KB shared memory each), ≈ 47 waves of a chain
// of ≈ 40 dependent global round trips per block; the state pass is 128 chunks × ≈ 15 dependent round trips in every
// block, 384 blocks in one wave (the split state passes answer this part). Not done: full double buffering of a
// chunk's operands (144 KB per chunk does not fit twice beside the 64 KB state), a blocked UT inverse on tensor
// cores in phase 1, and a workspace in a narrower type.
#pragma once

#include <cuda_runtime.h>
#include <cstddef>

namespace k3::kernels {

// Device scratch bytes for one call of any version (0 for invalid sizes): per head and 64-token chunk, W, U, Qg, Kd
// [64, 128], A_qk [64, 64] and e^{G_last} [128], fp32.
size_t kda_chunk_prefill_workspace_bytes(int tokens, int heads, int head_dim);

// The algorithm's versions (above); all take the same arguments and workspace.
enum class KdaChunkVariant {
  ut_tensorcore,              // the plain reference version: every operand read when needed
  ut_factored_split_value,    // phase 1 with score operands factored once (kernels/kda_chunk_intra.cu); state pass per
                              // (head, 32 value columns), S in registers
  ut_factored_split_key,      // factored phase 1; state pass of 8 warps per block, S split by keys (kda_chunk_state.cu)
  ut_factored_split_key_f16,  // split_key with fp16 product operands in the workspace and on fp16 mma.sync
                              // (kda_chunk_state_f16.cu)
};
// The fastest measured on an H200 (bench/results/2026-11-30-h200-kernels-12).
constexpr KdaChunkVariant kKdaChunkDefaultVariant = KdaChunkVariant::ut_factored_split_key_f16;
const char* kda_chunk_variant_name(KdaChunkVariant variant);  // "kda_chunk_ut_tensorcore", ...
// Bytes of the workspace that one call of `variant` writes (phase 1) and the state pass reads back, each once: the
// whole fp32 layout for the fp32 versions, 90,624 instead of 147,968 bytes per head and chunk for split_key_f16
// (0 for invalid sizes or versions).
size_t kda_chunk_prefill_workspace_traffic_bytes(int tokens, int heads, int head_dim, KdaChunkVariant variant);

cudaError_t kda_chunk_prefill_f32state(const float* q, const float* k, const float* v, const float* g,
                                       const float* beta, float* state, float* out, int tokens, int heads, int head_dim,
                                       float gate_lower_bound, void* workspace, size_t workspace_bytes,
                                       cudaStream_t stream, KdaChunkVariant variant = kKdaChunkDefaultVariant);

// For benchmarks only: one of the two launches of kda_chunk_prefill_f32state on its own, with the same arguments and
// checks. intra_chunk fills the workspace from q, k, v, g, β (state and out untouched); state_pass reads a workspace
// an earlier intra_chunk (or full) call with the same tokens and heads filled, and updates state and out. Run in
// that order they equal one full call.
enum class KdaChunkPhase { intra_chunk, state_pass };
cudaError_t kda_chunk_prefill_phase_for_bench(KdaChunkPhase phase, const float* q, const float* k, const float* v,
                                              const float* g, const float* beta, float* state, float* out, int tokens,
                                              int heads, int head_dim, float gate_lower_bound, void* workspace,
                                              size_t workspace_bytes, cudaStream_t stream,
                                              KdaChunkVariant variant = kKdaChunkDefaultVariant);

}  // namespace k3::kernels
