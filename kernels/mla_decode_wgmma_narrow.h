// mla_decode_wgmma_narrow: the split pass of mla_decode_paged_bf16's MlaDecodeAlgorithm::wgmma_narrow (the op, its
// shapes and the workspace format: kernels/mla_decode_paged.h) for a rank's few heads (at most 16: TP16's 6, TP8's
// 12), on Hopper's warpgroup MMA (sm_90a; kernels/ptx/wgmma_sm90.h).
//
// Why: at 6 heads the op reads 1,152 bytes per cached token and does 12 FLOP per byte, so only the read rate counts.
// The heads-as-M kernels pad 6 heads to 64 rows (10.7x the useful tensor work, near the ridge at batch 8) and
// wgmma_cluster pads them to 96 columns; both hold two 36-72 KiB tiles, one in flight while one is read. Here the
// cached tokens are the wgmma M and the heads N = 8 or 16 (S^T = K · Q^T, m64nNk16; O^T += C^T · P^T, the latent
// columns as M), so the tensor work is at most 2.7x the useful, and shared memory goes to the reads: a ring of 25-26
// column blocks (8 KiB each: 64 token rows of 64 columns, 128-byte swizzled by TMA), about three 64-token tiles, each
// block refilled as soon as its last product retires (the rope block 8 after the scores, blocks 0-7 after their
// output m-tile).
// One block per (split, sequence): warpgroup 0 computes, one loader warp copies. Per 64-token tile i:
//   scores   S^T(i) [64 tokens, N heads] over the 9 column blocks (36 wgmma m64nNk16, A the tile K-major, B = Q^T
//            K-major), each block issued once it landed;
//   softmax  per head (a column): the tile's maximum over 64 rows (2 per thread, 8 lanes, 4 warps through shared
//            memory), the running max and the thread's share of the sum rescaled, P = exp2(y - max) in bf16 written
//            K-major [N heads][64 tokens] (one 128-byte swizzled block), O rescaled;
//   output   O^T [512 latent columns, N heads] += C^T · P^T, 8 m-tiles of 64 columns (4 wgmma each, A the tile's
//            block MN-major through trans-a, B = P^T K-major), each its own group; then S(i + 1), so the tensor pipe
//            runs both back to back; each column block released as its group retires.
// The loader copies whole tiles by TMA (boxes of 64 columns x min(page_tokens, 64) rows inside one page,
// kernels/mla_cache_tensor_map.h) and a sequence's last, part-filled tile (or every tile where the pages do not split
// into whole boxes) by cp.async with the rows past the context zero-filled. Its split count fills the device's SMs in
// whole waves (mla_decode_wgmma_narrow_num_splits).
// Measurements: bench/results/kernel-notes.md (mla_decode).
#pragma once

#include "kernels/mla_decode_paged.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kMlaDecodeNarrowMaxHeads = 16;

// Splits of the context per sequence: the count in [1, mla_decode_num_splits(shape)] whose blocks (one per SM at a
// time) finish soonest, counting whole waves of the current device's SMs (an H200's 132 without one) and one tile of
// pipeline fill per block: at batch 8 and 128 K 33 splits, two full waves, against 16 in one wave leaving 4 SMs idle.
int mla_decode_wgmma_narrow_num_splits(const MlaDecodeShape& shape);

// The split pass for `splits` = mla_decode_wgmma_narrow_num_splits(shape) (arguments checked by the caller, heads ≤
// 16), writing what the other split passes write: with one split `out` normalised; otherwise each split's
// unnormalised rows to partial_out [batch, splits, heads, 512] and (max, sum) in base 2 to partial_stats [batch,
// splits, heads], for mla_decode_paged's combine pass. cudaErrorNotSupported where mla_decode_wgmma_supported(device)
// is false, cudaErrorInvalidValue for heads > 16.
cudaError_t mla_decode_wgmma_narrow_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                               const int32_t* page_table, const int32_t* context_tokens,
                                               float scale_log2, const MlaDecodeShape& shape, int splits,
                                               float* partial_out, float2* partial_stats, float* out,
                                               cudaStream_t stream);

}  // namespace k3::kernels
