// mla_decode_wgmma_cluster: the split pass of mla_decode_paged_bf16's MlaDecodeAlgorithm::wgmma_cluster (the op, its
// shapes and the workspace format: kernels/mla_decode_paged.h), on Hopper's warpgroup MMA (sm_90a;
// kernels/ptx/wgmma_sm90.h) in clusters of two blocks. Up to 96 heads (K3's; fewer are zero-padded to 96).
//
// Why: with heads as the wgmma M (wgmma_alternating) 96 heads are two 64-row tiles, a third of the tensor work
// padding. Here the cached tokens are M and the heads N, and the two blocks of a cluster share each split, block r
// taking heads 48r … 48r + 47:
//   scores  Sᵀ [64 tokens × 48 heads] = C [64 × 576] · Qᵀ          (K-major both; m64n48k16)
//   output  Oᵀ [512 latent × 48 heads] += Cᵀ[0:512] · P [64 × 48]  (C MN-major through trans-a, P MN-major)
// so a block needs no other block's numbers: Q for its 48 heads (54 KiB), two 64-token slots (72 KiB each) and its
// 512 × 48 fp32 output (96 registers per thread over two warpgroups) fit one block. Each tile is read from the L2
// once per cluster: each block copies its share of the tile's 9 column blocks by TMA into both blocks' shared memory
// (multicast), and rank 0 asks the L2 for the tile (bulk prefetch) before it waits for the tile's slot, so the DRAM
// reads overlap that wait. A slot is 9 column blocks, each with its own full and empty barrier, released by its last
// reader in both blocks and refilled at once (the rope block after the scores, the latent blocks as the output's
// m-tiles that read them retire); the scores of a tile are issued block by block as each lands.
// Warpgroup 0 computes the scores, the softmax and 2 of the output's 8 latent m-tiles; warpgroup 1 the other 6; a
// loader warpgroup (setmaxnreg gives its registers to the others) fills the slots. Of O(i), m-tiles 0–3 are issued
// before S(i + 1) and 4–7 after it, so that the tensor cores run those four while warpgroup 0 computes the softmax of
// tile i + 1. The softmax keeps a running max per head that moves only when a score passes it by more than 2^8 (one
// barrier-reduced vote per tile; the first tile always moves it): then the column maxima over the tile (8 lanes, 4
// warps) set the new max, and the output and sums are rescaled (warpgroup 1 through an alpha vector and a flag in
// shared memory). P = exp2(score − max) ≤ 256 in bf16 and fp32 sums hold that slack; softmax is shift-invariant, so
// the result is the same up to rounding. Hand-offs: mbarriers per slot and column block (full: the loader's arrival
// and the TMA bytes; empty: both blocks' last reader), named barriers between the warpgroups (P written; O(i)'s first
// m-tiles issued; S(i + 1) issued).
// Shared memory: Q 9 × 6 KiB | 2 slots × 72 KiB | 2 × P 8 KiB | alpha, flags, reductions, stats | 36 mbarriers:
// 216 KiB.
//
// Measurements, what bounds it, the forms tried and the first design: bench/results/kernel-notes.md (mla_decode).
#pragma once

#include "kernels/mla_decode_paged.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kMlaDecodeClusterMaxHeads = 96;
// Up to this many heads (one wgmma_alternating block: a TP16 … TP2 rank's 6, 12, 24 or 48) wgmma_alternating is
// faster than wgmma_cluster at every measured shape, batch 1 and 8, 128K and 1M, by 8-22 % (at 6-48 heads the
// cluster's N idles and its one wave of clusters gives 8 splits at batch 8 against alternating's 16;
// bench/results/2026-12-02-h200-rank-2, mla_bench).
inline constexpr int kMlaDecodeAlternatingMaxHeads = 64;

// Whether `device` can run the kernel: compute capability 9.0 (mla_decode_wgmma_supported) and at least one two-block
// cluster with its shared memory resident at once (the occupancy query, cached per device). mla_decode_paged_bf16's
// automatic choice takes wgmma_cluster only where this holds.
bool mla_decode_wgmma_cluster_runs(int device);

// Splits of the context per sequence: as many two-block clusters as the device runs at once (one wave), divided over
// the batch, within [1, mla_decode_num_splits(shape)] (so mla_decode_workspace_bytes covers it). 1 where the device
// cannot run the kernel.
int mla_decode_wgmma_cluster_num_splits(const MlaDecodeShape& shape);

// The split pass for `splits` = mla_decode_wgmma_cluster_num_splits(shape) (arguments checked by the caller, heads ≤
// 96), writing what mla_decode_wgmma_split_pass writes: with one split `out` normalised; otherwise each split's
// unnormalised rows to partial_out [batch, splits, heads, 512] and (max, sum) in base 2 to partial_stats [batch,
// splits, heads], for mla_decode_paged's combine pass. cudaErrorNotSupported where mla_decode_wgmma_supported(device)
// is false, cudaErrorInvalidValue for heads > 96.
cudaError_t mla_decode_wgmma_cluster_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                                const int32_t* page_table, const int32_t* context_tokens,
                                                float scale_log2, const MlaDecodeShape& shape, int splits,
                                                float* partial_out, float2* partial_stats, float* out,
                                                cudaStream_t stream);

}  // namespace k3::kernels
