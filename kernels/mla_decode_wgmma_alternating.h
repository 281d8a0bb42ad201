// mla_decode_wgmma_alternating: the split pass of mla_decode_paged_bf16's MlaDecodeAlgorithm::wgmma_alternating (the
// op, its shapes and the workspace format: kernels/mla_decode_paged.h), on Hopper's warpgroup MMA (sm_90a;
// kernels/ptx/wgmma_sm90.h). One block of two warpgroups per (sequence, split of the context, group of 64 heads):
// heads are the M = 64 rows of every wgmma, so K3's 96 heads are one full group and one of 32 real heads padded with
// zero query rows. The split count (mla_decode_wgmma_num_splits: one wave of one block per SM) never exceeds
// mla_decode_num_splits, so the common workspace and combine pass serve it.
// The score tiles (32 tokens) alternate between the warpgroups: warpgroup w computes the scores and softmax of local
// tiles i with i % 2 == w, and both warpgroups do the output product of every tile for their 256 columns. Per tile i,
// with warpgroup w its owner:
//   other   (the owner of i − 1 and i + 1) issues the scores S(i + 1) [64 heads × 32 tokens] of its next tile (36
//           wgmma m64n32k16, Q and the tile's 576-wide token rows K-major from shared memory), which run on the tensor
//           cores while the owner does the softmax of tile i; then waits for the owner's signal, reads P, alpha and
//           the running max and sum, and issues its output product O[64, its 256 columns] = alpha · O + P · C
//           (2 wgmma m64n256k16, P from registers, C MN-major), which runs during its own softmax of tile i + 1.
//   owner   masks S(i) past the context, continues the online softmax (base 2) from the running max and sum after
//           tile i − 1, writes P (bf16, in the A-fragment layout), alpha and the new max and sum to its shared-memory
//           buffer, signals, and issues its own output product of tile i.
// So the tensor cores stay busy through every softmax; the running max and sum stay one sequence over the tiles.
// The hand-offs are named barriers between the two warpgroups (bar.arrive by the producer, bar.sync by the consumer):
// "ready" (P, alpha, max and sum of a tile written, and the producer's output product of the tile before retired)
// and "free" (the consumer has read the producer's P buffer, which the producer fills again two tiles later).
// Tiles are 32 tokens because the pipeline holds four at once (one loading, one being scored, one in the softmax and
// output products, one finishing its output product): Q 72 KiB + 4 × 36 KiB + 2 × 4 KiB of P + 1.5 KiB of softmax
// state = 225.5 KiB, where four 64-token tiles would need 360 KiB. The owner of a tile loads it (cp.async,
// XOR-swizzled SW128 blocks, the page lookup per token row, rows past the context zero-filled) three tiles ahead,
// into the slot of its previous tile once both output products of that tile have retired.
// Measurements and history: bench/results/kernel-notes.md (mla_decode).
#pragma once

#include "kernels/mla_decode_paged.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

// The split pass for `splits` = mla_decode_wgmma_num_splits(shape) (arguments checked by the caller), writing what
// mla_decode_wgmma_split_pass writes: with one split out normalised; otherwise each split's unnormalised rows to
// partial_out [batch, splits, heads, 512] and (max, sum) in base 2 to partial_stats [batch, splits, heads], for
// mla_decode_paged's combine pass. cudaErrorNotSupported where mla_decode_wgmma_supported(device) is false.
cudaError_t mla_decode_wgmma_alternating_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                                    const int32_t* page_table, const int32_t* context_tokens,
                                                    float scale_log2, const MlaDecodeShape& shape, int splits,
                                                    float* partial_out, float2* partial_stats, float* out,
                                                    cudaStream_t stream);

}  // namespace k3::kernels
