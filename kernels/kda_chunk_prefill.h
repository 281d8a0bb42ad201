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
// Algorithm: two launches, every matrix product on tensor cores (mma.sync, fp32 accumulation):
//   1. phase 1, kda_chunk_intra_factored (kernels/kda_chunk_intra.cu; one block per (64-token chunk, head), all chunks
//      at once): the chunk-local cumulative log decay G; A_kk, A_qk in 16 × 16 tiles (K3-SPEC's lower-bound tiling,
//      as ref::kda_chunked_tiled), every exponent split at tile boundaries so that each row factor
//      q ⊙ e^{G − G_{16I}}, k ⊙ e^{G − G_{16I}} and column factor k ⊙ e^{G_{16J+15} − G} is built once and each score
//      tile is one shared-memory product with one per-channel scale; a diagonal tile is referenced to its middle token
//      when -5 ≤ gate_lower_bound < 0 (|ΔG| ≤ 40 nats), otherwise computed pair by pair from each pair's own exponent
//      G_i − G_j ≤ 0 (exact for any gate); the UT transform X = (I + StrictLower(A_kk))⁻¹ by blocked doubling in fp32;
//      W = X (β e^G ⊙ K), U = X (β ⊙ V); Qg = e^G ⊙ Q, Kd = e^{G_last − G} ⊙ K, e^{G_last}, into the workspace: W,
//      Qg, Kd and A_qk as fp16 (rounded to nearest), U and e^{G_last} fp32.
//   2. the state pass (kernels/kda_chunk_state_f16.cu; one block of 8 warps per (head, 32 value columns): 384 blocks
//      for K3, three per SM), the only sequential part: per chunk V' = U − W S, O = Qg S + A_qk V',
//      S ← Diag(e^{G_last}) S + Kdᵀ V' on mma.sync m16n8k16 fp16 with ldmatrix fragment loads; warp (vh, p) keeps Sᵀ's
//      16 values × 32 keys [32p, 32p + 32) in registers and computes V'ᵀ and Oᵀ over all 128 keys for its token tiles
//      {p, 7 − p}, so no sum is split between warps; each chunk's operands stream through a ring of 4 shared buffers
//      three steps ahead.
// Precision: fp16 operands keep TF32's 10-bit mantissa, so inside fp16's range (normal 6.1e-5 .. 65504) each operand
// is rounded as a TF32 product would round it: ≈ 5e-4 normalised error against the fp64 recurrence (a CPU model of
// the algorithm with TF32 operand rounding: 3.3e-4 to 4.8e-4 for 1 to 8192 tokens); the state accumulates in fp32.
// W, V' and S must stay below 65504 in magnitude (they scale with v; Qg, Kd and A_qk are at most 1 for L2-normalised
// q and k), and operands below 6.1e-5 keep an absolute error under 3e-8.
// Version: ut_factored_split_key_f16 — factored phase 1 (kda_chunk_intra.cu); a state pass of 8 warps per block, S
// split by keys, fp16 product operands on fp16 mma.sync (kda_chunk_state_f16.cu). The fastest of the versions
// measured on an H200; the earlier TF32 versions and what was tried: bench/results/kernel-notes.md
// (kda_chunk_prefill).
#pragma once

#include <cuda_runtime.h>
#include <cstddef>

namespace k3::kernels {

// Device scratch bytes for one call (0 for invalid sizes): per head and 64-token chunk, W, U, Qg, Kd [64, 128],
// A_qk [64, 64] and e^{G_last} [128], sized as fp32 (kernels/kda_chunk_intra.h).
size_t kda_chunk_prefill_workspace_bytes(int tokens, int heads, int head_dim);

// Bytes of the workspace that one call writes (phase 1) and the state pass reads back, each once: 90,624 of the
// layout's 147,968 bytes per head and chunk (0 for invalid sizes).
size_t kda_chunk_prefill_workspace_traffic_bytes(int tokens, int heads, int head_dim);

cudaError_t kda_chunk_prefill_f32state(const float* q, const float* k, const float* v, const float* g,
                                       const float* beta, float* state, float* out, int tokens, int heads, int head_dim,
                                       float gate_lower_bound, void* workspace, size_t workspace_bytes,
                                       cudaStream_t stream);

// For benchmarks only: one of the two launches of kda_chunk_prefill_f32state on its own, with the same arguments and
// checks. intra_chunk fills the workspace from q, k, v, g, β (state and out untouched); state_pass reads a workspace
// an earlier intra_chunk (or full) call with the same tokens and heads filled, and updates state and out. Run in
// that order they equal one full call.
enum class KdaChunkPhase { intra_chunk, state_pass };
cudaError_t kda_chunk_prefill_phase_for_bench(KdaChunkPhase phase, const float* q, const float* k, const float* v,
                                              const float* g, const float* beta, float* state, float* out, int tokens,
                                              int heads, int head_dim, float gate_lower_bound, void* workspace,
                                              size_t workspace_bytes, cudaStream_t stream);

}  // namespace k3::kernels
