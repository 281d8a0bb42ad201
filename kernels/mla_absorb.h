// mla_absorb: the per-head products around MLA's absorbed decode (K3-SPEC §4), with W_kvb = kv_b
// [H·(dn+dv), r] (per head, rows k_nope (dn) then v (dv); a Linear weight, row-major):
//   mla_absorb_q_bf16:   q_abs[t, h, 0:r]    = Σ_i q[t, h, i] · kv_b[h·(dn+dv) + i, :]     (i < dn: W_uk folded into q)
//                        q_abs[t, h, r:r+dr] = q[t, h, dn:dn+dr]                          (the k_r half, as is)
//     q [tokens, H·(dn+dr)] bf16 (per head [q_nope | q_r]; its own row stride), q_abs [tokens, H, r+dr] bf16.
//   mla_apply_v_bf16:    out[t, h·dv + c] = Σ_j lat[t, h, j] · kv_b[h·(dn+dv) + dn + c, j] · sigmoid(gate[t, h·dv + c])
//     lat [tokens, H, r] fp32 (the attention output in latent space), gate bf16 [tokens, H·dv] with its row stride
//     (null: no output gate), out [tokens, H·dv] bf16.
//   mla_assemble_kv_bf16: the expanded keys and values of the prefill form from kv = c·kv_bᵀ [S, H·(dn+dv)] bf16 and
//     the cached rows latent [S, r+dr]: k[s, h] = [kv[s, h·(dn+dv) : +dn] | latent[s, r:r+dr]] ([S, H, dn+dr]),
//     v[s, h] = kv[s, h·(dn+dv) + dn : +dv] ([S, H, dv]).
// fp32 accumulation. Memory-bound on kv_b at decode (96 heads × 256 rows × 512 bf16 ≈ 25 MB for K3, half of it per
// product).
// Versions (MlaAbsorbAlgorithm):
//   per_column — absorb_q: one block of 32 threads per (head, 32 latent columns) × token tile of 8, thread = column j,
//     2-byte strided loads over the dn rows; apply_v: one warp per (head, output column), lanes over r. The fallback
//     where the others do not apply.
//   weight_stream — every thread streams 16-byte vectors of kv_b rows with 8 loads in flight, the token tile's q or
//     latent row in shared memory (fp32), all 8 tokens accumulated per loaded vector. absorb_q: block = (head, 256
//     latent columns) × token tile, 8 warps; apply_v: block = (head, 64 output columns) × token tile, warp = 8 output
//     columns. Needs kv_b 16-byte aligned and r a multiple of 8. Reads kv_b once per token tile of 8: fastest for a
//     few tokens.
//   mma_tiled — per head a GEMM on bf16 m16n8k16 tensor-core MMAs, a block per 64 tokens × 64 output columns, kv_b
//     read once per 64 tokens; apply_v's fp32 latent as two bf16 halves (kernels/mla_absorb_mma.h). Same
//     requirements as weight_stream; fastest past a few tokens.
//   automatic — where weight_stream applies: absorb_q weight_stream up to kMlaAbsorbQStreamMaxTokens tokens,
//   apply_v up to kMlaApplyVStreamMaxTokens, mma_tiled past them; per_column where they do not apply.
// assemble_kv: one block per token.
// Measurements: bench/results/kernel-notes.md (mla_absorb).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

enum class MlaAbsorbAlgorithm { automatic, per_column, weight_stream, mma_tiled };

// automatic's token counts up to which weight_stream runs (mma_tiled past them): the measured crossovers on an H200.
inline constexpr int kMlaAbsorbQStreamMaxTokens = 16;
inline constexpr int kMlaApplyVStreamMaxTokens = 4;

struct MlaDims {
  int heads;
  int nope_dim;     // dn (K3: 128)
  int rope_dim;     // dr (64)
  int value_dim;    // dv (128)
  int latent_rank;  // r (512)
};

cudaError_t mla_absorb_q_bf16(const __nv_bfloat16* q, int64_t q_row_stride, const __nv_bfloat16* kv_b,
                              const MlaDims& dims, int tokens, __nv_bfloat16* q_abs, cudaStream_t stream,
                              MlaAbsorbAlgorithm algorithm = MlaAbsorbAlgorithm::automatic);
cudaError_t mla_apply_v_bf16(const float* latent_out, const __nv_bfloat16* kv_b, const __nv_bfloat16* gate,
                             int64_t gate_row_stride, const MlaDims& dims, int tokens, __nv_bfloat16* out,
                             cudaStream_t stream, MlaAbsorbAlgorithm algorithm = MlaAbsorbAlgorithm::automatic);
cudaError_t mla_assemble_kv_bf16(const __nv_bfloat16* kv, const __nv_bfloat16* latent, const MlaDims& dims,
                                 int64_t tokens, __nv_bfloat16* k, __nv_bfloat16* v, cudaStream_t stream);

}  // namespace k3::kernels
