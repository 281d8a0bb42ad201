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
// Version: kda_chunk_ut_tensorcore, two launches, every matrix product on tensor cores (WMMA m16n16k8, TF32
// operands rounded to nearest, fp32 accumulation):
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
// Faster (not done): the state pass reads W, Qg, Kd and A_qk of each chunk straight from L2 into fragments, without
// prefetching the next chunk (cp.async double buffering would hide that latency); phase 1 rebuilds each 16-channel
// slice of the tile factors per warp through shared memory, where mma.sync fragments built in registers would not.
#pragma once

#include <cuda_runtime.h>
#include <cstddef>

namespace k3::kernels {

// Device scratch bytes for one call (0 for invalid sizes): per head and 64-token chunk, W, U, Qg, Kd [64, 128],
// A_qk [64, 64] and e^{G_last} [128], fp32.
size_t kda_chunk_prefill_workspace_bytes(int tokens, int heads, int head_dim);

cudaError_t kda_chunk_prefill_f32state(const float* q, const float* k, const float* v, const float* g,
                                       const float* beta, float* state, float* out, int tokens, int heads, int head_dim,
                                       float gate_lower_bound, void* workspace, size_t workspace_bytes,
                                       cudaStream_t stream);

}  // namespace k3::kernels
