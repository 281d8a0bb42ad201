// mla_prefill: MLA's prefill attention in the expanded form (K3-SPEC §4), causal, NoPE (nothing rotated):
//   out[i, h, :] = Σ_{j ≤ p_i} softmax_j(scale · q[i, h, :] · k[j, h, :]) v[j, h, :],   p_i = kv_tokens − q_tokens + i
// so the q_tokens queries are the last q_tokens positions of the kv_tokens keys (a chunk after a cached prefix:
// kv_tokens = prefix + q_tokens). Shapes, dense and row-major: q bf16 [q_tokens, heads, 192] (row stride heads·192),
// k bf16 [kv_tokens, heads, 192] (heads·192), v bf16 [kv_tokens, heads, 128] (heads·128), out bf16
// [q_tokens, heads, 128] (heads·128); 192 = qk_nope 128 + qk_rope 64 and 128 = v_head_dim are K3's and fixed.
// q, k, v and out must be 16-byte aligned; out must not alias the inputs.
// Versions (MlaPrefillAlgorithm): mla_prefill_flash — flash attention with mma.sync m16n8k16 bf16 (fp32
// accumulation) over 64-key tiles loaded with cp.async into XOR-swizzled shared memory, double-buffered; online softmax
// in base 2 with P kept in registers as the next product's A operand; key tiles past the block's last query are
// skipped (causal), masks applied only on the tiles that cross the diagonal or the end of the keys; blocks with the
// most tiles are scheduled first. Each warp reads every K and V fragment of a tile from shared memory, which binds
// the smaller forms, so the larger ones share each fragment over more query rows:
//   flash_q64 (automatic up to 64 queries): one block of 4 warps per (64 queries, head), 16 rows per warp with their
//     q fragments in registers, two blocks per SM;
//   flash_q128 (automatic for 65-128 queries): 8 warps per 128 queries, one block per SM (224 registers), each K/V
//     tile loaded serving twice the queries;
//   flash_q256 (automatic above 128 queries): 8 warps of 32 rows (two 16-row tiles whose products share every K and V
//     fragment; q fragments read from shared memory per key tile), one block per SM (255 registers, 76 bytes spilled).
//   wgmma (automatic above 128 queries on compute capability 9.0; kernels/mla_prefill_wgmma.h): three warpgroups of 64
//     query rows per block, the scores and the output on Hopper's warpgroup MMA with K and V read by the tensor
//     cores straight from shared memory and P from registers, each warpgroup's two products a tile apart so the
//     softmax runs beside them; the scale folded into the exponent's fma, masks only on the tiles that need them,
//     the output's rescale skipped by a warp whose rows kept their maxima. Needs scale > 0 (cudaErrorInvalidValue
//     otherwise; automatic then takes flash_q256); cudaErrorNotSupported on other devices.
// Each larger form wins where its tile fills: flash_q64 keeps two blocks per SM for short chunks, flash_q256 (and
// wgmma on compute capability 9.0, whose tensor cores read K and V straight from shared memory) the longest.
// Measurements and what is not done: bench/results/kernel-notes.md (mla_prefill).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace k3::kernels {

inline constexpr int kMlaPrefillQkDim = 192;
inline constexpr int kMlaPrefillValueDim = 128;

// The versions (above); automatic takes wgmma (flash_q256 off compute capability 9.0 or for scale ≤ 0) above 128
// queries, flash_q128 above 64, flash_q64 up to 64.
enum class MlaPrefillAlgorithm { automatic, flash_q64, flash_q128, flash_q256, wgmma };

cudaError_t mla_prefill_attention_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                       int q_tokens, int kv_tokens, int heads, float scale, __nv_bfloat16* out,
                                       cudaStream_t stream,
                                       MlaPrefillAlgorithm algorithm = MlaPrefillAlgorithm::automatic);

}  // namespace k3::kernels
