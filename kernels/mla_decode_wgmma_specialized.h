// mla_decode_wgmma_specialized: the split pass of mla_decode_paged_bf16's MlaDecodeAlgorithm::wgmma_specialized (the
// op, its shapes and the workspace format: kernels/mla_decode_paged.h), on Hopper's warpgroup MMA with specialised
// warpgroups (sm_90a; kernels/wgmma_sm90.h). The blocks, tiles and splits are mla_decode_wgmma's (64 heads as the M
// rows of every wgmma, 64-token tiles, one wave of 132 blocks, the common workspace and combine); the work inside a
// block is divided by role instead of by output columns alone:
//   warpgroup 0 (scores): Q's A fragments (64 heads × 576, 144 registers a thread) stay in registers for the whole
//           call, so S[64 heads, 64 tokens] = Q · Kᵀ is 36 wgmma m64n64k16 with only the tile read from shared memory
//           (half the shared-memory traffic of mla_decode_wgmma's score product, which reads Q too); online softmax
//           (base 2) in registers; P (bf16) goes to shared memory as a K-major SW128 block, the row factors beside
//           it. It also issues every cp.async of the tiles.
//   warpgroups 1, 2 (output): O[64, 256 columns each] = alpha · O + P · C, 4 wgmma m64n256k16 with P and C both from
//           shared memory; 128 fp32 accumulators a thread.
// Q leaving shared memory frees room for a third tile stage: tiles j + 1 and j + 2 load while tile j is used, and the
// score product of tile j + 1 runs on the tensor cores while the output warpgroups run tile j's output product.
// Registers are moved to the score warpgroup with setmaxnreg (launch 168 a thread; scores 184, output 160 each).
// Hand-offs are named barriers: kPFull (P_j, its factors and tile j are ready: the score warpgroup arrives, the output
// warpgroups sync) and kPEmpty (the output warpgroups have finished tile j's product, so P and tile j's stage are
// free: they arrive, the score warpgroup syncs before it writes P_{j+1} and loads into that stage).
// Heads: 96 = 64 + 32 stays one full block and one half-padded block. Arithmetic per 64-token tile, in units of
// m64n8k16: padded blocks 2 × (36·8 + 8·32) = 1088; a padding-free mapping (heads as N = 96, tokens or latent columns
// as M) needs 816, but its output accumulator O[96, 512] (192 KiB of fp32) does not fit one block's registers next
// to the operands, and splitting heads over blocks reads each tile twice either way. Padding is kept.
#pragma once

#include "kernels/mla_decode_paged.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace k3::kernels {

// The split pass for `splits` = mla_decode_wgmma_num_splits(shape) (arguments checked by the caller), with the
// outputs of mla_decode_wgmma_split_pass. Throws k3::Error on a device that is not compute capability 9.0.
cudaError_t mla_decode_wgmma_specialized_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                                    const int32_t* page_table, const int32_t* context_tokens,
                                                    float scale_log2, const MlaDecodeShape& shape, int splits,
                                                    float* partial_out, float2* partial_stats, float* out,
                                                    cudaStream_t stream);

}  // namespace k3::kernels
