// mla_decode_wgmma_cluster: the split pass of mla_decode_paged_bf16's MlaDecodeAlgorithm::wgmma_cluster (the op, its
// shapes and the workspace format: kernels/mla_decode_paged.h), on Hopper's warpgroup MMA (sm_90a; kernels/wgmma_sm90.h)
// in clusters of two blocks. Up to 96 heads (K3's; fewer are zero-padded to 96).
//
// Why: with heads as the wgmma M (wgmma, wgmma_alternating) 96 heads are two 64-row tiles, a third of the tensor work
// padding, and the 32-token score tiles make N = 32, which issues at 69 % of the best wgmma rate. Here the cached
// tokens are M and the heads N = 96 (wgmma m64n96k16 issues at 95–99 % with both operands in shared memory; measured
// on an H200, bench/results/2026-11-30-h200-kernels-10):
//   scores  Sᵀ [64 tokens × 96 heads] = C [64 × 576] · Qᵀ            (K-major both)
//   output  Oᵀ [512 latent × 96 heads] += Cᵀ[0:512] · Pᵀ [64 × 96]     (C MN-major through trans-a, Pᵀ K-major)
// Q for 96 heads (108 KiB) beside 64-token tiles (72 KiB each) and a 512 × 96 fp32 output do not fit one block, so a
// cluster of two blocks shares each split: block r holds the columns 256r … 256r+255 of the latent part and 32 of the
// 64 trailing ones (512 + 32r …), of Q and of every tile, and owns output columns 256r … 256r+255. Each computes its
// partial scores over its 288 columns, writes them into the other block's shared memory (distributed shared memory,
// 24 KiB fp32 per tile; mbarrier hand-offs), adds the other's partial to its own, and both run the same online softmax
// on the same sums (fp32 addition commutes, so the two blocks' maxima and P agree bit for bit).
//
// Per block: a loader warpgroup keeps three 64-token slots filled — whole tiles by TMA (a tensor map over the paged
// cache, one piece per page part), the 32 trailing columns, a sequence's last part-filled tile and pages that do not
// split into 16-, 32- or 64-token pieces by cp.async with the rows past the context zero-filled; completion tracked by
// an mbarrier per slot; it gives its registers to the others with setmaxnreg. The score products alternate between the
// two warpgroups (warpgroup i % 2 computes S(i) during the softmax of tile i − 1 and sends its partial); the softmax of
// every tile is split over both (48 heads each): the owner of S(i) adds the other block's partial and writes the scaled
// scores back into the exchange buffer, each warpgroup takes the column maxima, the new running max and alpha, P (bf16,
// into Pᵀ, K-major) and the running sums of its 48 heads, and both apply the tile to their 128 output columns (2
// m-tiles of 64, 96 fp32 registers per thread). Barrier waits are block-scope: a cluster-scope acquire costs an L1
// invalidation per wait.
// Shared memory: Q 4 × 12 KiB + its trailing columns in one 12 KiB block (half used) | 3 slots × 32 KiB + their
// trailing columns two to an 8 KiB block | the exchange buffer 24 KiB | 2 × Pᵀ 12 KiB | alpha and running max 2 × 2 ×
// 0.375 KiB | the max reduction 1.5 KiB | 8 mbarriers: 223 KiB.
//
// Measured on an H200 (bench/results/2026-11-30-h200-kernels-11): correct (every decode test; memcheck clean), and
// 1.5× slower than wgmma_alternating (979 against 640 µs at batch 1 and 1 M in one run; 3.0–3.7× the bound at 1 M).
// Step traces: a 64-token step takes about 6,500 cycles against about 2,000 of tensor work — the softmax and its
// barriers, the output product's issue, and a wait for a tile that lands about a step after its slot is freed (only
// three slots fit beside the exchange buffer). Not the automatic choice.
#pragma once

#include "kernels/mla_decode_paged.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kMlaDecodeClusterMaxHeads = 96;

// Splits of the context per sequence: as many two-block clusters as the device runs at once (one wave), divided over
// the batch, within [1, mla_decode_num_splits(shape)] (so mla_decode_workspace_bytes covers it). 1 where the device
// cannot run the kernel.
int mla_decode_wgmma_cluster_num_splits(const MlaDecodeShape& shape);

// The split pass for `splits` = mla_decode_wgmma_cluster_num_splits(shape) (arguments checked by the caller, heads ≤
// 96), writing what mla_decode_wgmma_split_pass writes: with one split `out` normalised; otherwise each split's
// unnormalised rows to partial_out [batch, splits, heads, 512] and (max, sum) in base 2 to partial_stats [batch,
// splits, heads], for mla_decode_paged's combine pass. Throws k3::Error where mla_decode_wgmma_supported(device) is
// false or heads > 96.
cudaError_t mla_decode_wgmma_cluster_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                                const int32_t* page_table, const int32_t* context_tokens,
                                                float scale_log2, const MlaDecodeShape& shape, int splits,
                                                float* partial_out, float2* partial_stats, float* out,
                                                cudaStream_t stream);

}  // namespace k3::kernels
