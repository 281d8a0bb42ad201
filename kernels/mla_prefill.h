// mla_prefill: MLA's prefill attention in the expanded form (K3-SPEC §4), causal, NoPE (nothing rotated):
//   out[i, h, :] = Σ_{j ≤ p_i} softmax_j(scale · q[i, h, :] · k[j, h, :]) v[j, h, :],   p_i = kv_tokens − q_tokens + i
// so the q_tokens queries are the last q_tokens positions of the kv_tokens keys (a chunk after a cached prefix:
// kv_tokens = prefix + q_tokens). Shapes, dense and row-major: q bf16 [q_tokens, heads, 192] (row stride heads·192),
// k bf16 [kv_tokens, heads, 192] (heads·192), v bf16 [kv_tokens, heads, 128] (heads·128), out bf16
// [q_tokens, heads, 128] (heads·128); 192 = qk_nope 128 + qk_rope 64 and 128 = v_head_dim are K3's and fixed.
// q, k, v and out must be 16-byte aligned; out must not alias the inputs.
// Versions (MlaPrefillAlgorithm): mla_prefill_flash — flash attention with mma.sync m16n8k16 bf16 (fp32
// accumulation), 16 query rows per warp with Q held in registers: flash_q64 one block of 4 warps per (64 queries,
// head), two blocks per SM (automatic up to 64 queries); flash_q128 one block of 8 warps per (128 queries, head), one
// per SM (registers: 224 per thread), so each key and value tile loaded serves twice the queries (automatic above 64
// queries; on an H200 at 96 heads, no prefix: 8K tokens 7.54 against 9.18 ms, 32K 114.5 against 141.2 ms, 288
// against 234 TFLOP/s on the causal FLOPs, bench/results/2026-11-30-h200-kernels-12 run 13); key/value tiles of 64
// loaded with cp.async into XOR-swizzled shared memory, double-buffered; online softmax in base 2 with P kept in
// registers as the next product's A operand; key tiles past the block's last query are skipped (causal), masks applied
// only on the tiles that cross the diagonal or the end of the keys; blocks with the most tiles are scheduled first.
// Faster (not done): wgmma (Hopper warpgroup MMA) with TMA loads and a producer warp, as FlashAttention-3 does.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace k3::kernels {

inline constexpr int kMlaPrefillQkDim = 192;
inline constexpr int kMlaPrefillValueDim = 128;

// The versions (above); automatic takes flash_q128 above 64 queries, flash_q64 up to 64.
enum class MlaPrefillAlgorithm { automatic, flash_q64, flash_q128 };

cudaError_t mla_prefill_attention_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                       int q_tokens, int kv_tokens, int heads, float scale, __nv_bfloat16* out,
                                       cudaStream_t stream,
                                       MlaPrefillAlgorithm algorithm = MlaPrefillAlgorithm::automatic);

}  // namespace k3::kernels
