// mla_prefill_wgmma: MlaPrefillAlgorithm::wgmma of mla_prefill_attention_bf16 (the op and its shapes:
// kernels/mla_prefill.h) on Hopper's warpgroup MMA (sm_90a; kernels/ptx/wgmma_sm90.h). One block of three warpgroups
// per (192 queries, head), each warpgroup owning 64 query rows as the M = 64 of every wgmma, over 64-key tiles:
//   scores  S[64, 64] = Q · Kᵀ: 12 wgmma m64n64k16, Q (the warpgroup's rows) and the tile's keys both K-major from
//           shared memory; scale, causal mask on the tiles that cross the diagonal or the end of the keys, online
//           softmax in base 2 in registers, P rounded to bf16 straight into the A-fragment layout;
//   output  O[64, 128] = alpha · O + P · V: 4 wgmma m64n128k16 with P from registers and the tile's values
//           MN-major from shared memory (trans-b); 64 fp32 accumulators per thread.
// Each warpgroup runs its two products a tile apart: the scores of tile i + 1 are issued before the output product of
// tile i, and their softmax runs while that product does. The three warpgroups share each K/V tile. Q (72 KiB) and
// two stages of K (24 KiB) and V (16 KiB) tiles in the 128-byte-swizzled layout, filled by cp.async (K two tiles
// ahead, V one; rows past the keys or queries zero-filled): 152 KiB, one block per SM. A warpgroup skips the tiles
// past its last query; blocks with the most tiles are scheduled first.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace k3::kernels {

// Whether `device` runs it: compute capability 9.0 (the code is built for sm_90a only).
bool mla_prefill_wgmma_supported(int device);

// The attention for arguments mla_prefill_attention_bf16 has checked (q_tokens > 0, 16-byte-aligned operands);
// scale_log2 = scale · log2(e). cudaErrorNotSupported on a device that is not compute capability 9.0.
cudaError_t mla_prefill_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, int q_tokens,
                              int kv_tokens, int heads, float scale_log2, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace k3::kernels
