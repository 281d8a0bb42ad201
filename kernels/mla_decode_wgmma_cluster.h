// mla_decode_wgmma_cluster: the split pass of mla_decode_paged_bf16's MlaDecodeAlgorithm::wgmma_cluster (the op, its
// shapes and the workspace format: kernels/mla_decode_paged.h), on Hopper's warpgroup MMA (sm_90a;
// kernels/wgmma_sm90.h) in clusters of two blocks. Up to 96 heads (K3's; fewer are zero-padded to 96).
//
// Why: with heads as the wgmma M (wgmma, wgmma_alternating) 96 heads are two 64-row tiles, a third of the tensor work
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
// Measured on an H200 (bench/results/2026-11-30-h200-kernels-15): at batch 1 and 1 M 443–464 µs per call alone and
// 474–508 µs per launch in a CUDA graph (1.54–1.74× the bound with the ceilings measured in the same run) against
// wgmma_alternating's 650–673 µs; faster than it at every measured shape (8 K to 1 M, batch 1 to 8). Column-block
// slots and the 4 deferred m-tiles gave about 5 % over the form with whole-slot barriers and O(i) before S(i + 1)
// (…-kernels-14: 440–546 µs alone). What bounds it is its on-chip work, no unit saturated (…-kernels-17): with the
// cache L2-resident it is as slow (437.7 against 438.2 µs at batch 1 and 1 M); Nsight Compute there has the tensor
// pipe active 55 %, shared-memory wavefronts 68 %, DRAM 58 %; and a build with no copies and no exp2 still takes
// 1.34–1.41× the bound at 1 M: the chain S(i) → softmax → P(i) → O(i) on one SM's tensor cores idles them about a
// quarter of the time. With warpgroup 0 issuing S(i + 1) without waiting for warpgroup 1's m-tiles (an experiment
// build), that build reaches 1.18–1.23×, but with the copies the kernel is no faster: the two slots' refills bind.
// More work in flight (a third slot, or 96 heads per block for m64n96 products) does not fit the shared memory or the
// registers. The floors of this design (docs/engine.md's MLA row) sit at the bound: at batch 1 and 1 M its 68
// m64n48k16 steps per tile take 284 µs for the busiest block at the rate measured with bulk copies landing in the
// same shared memory (the copies cost that rate 3.9 %; bench/results/2026-12-01-h200-kernels-19), and each block's
// 72 KiB per tile reach its SM in 271 µs at the 67.7 GB/s per SM that all SMs receive at once; the 1.25× target
// needs both busy ≥ 76–80 % of the time together, where the kernel has them about 60 %. Yet the same work with no
// dependencies at all (wgmma_rate_bench part 5, bench/results/2026-12-01-h200-kernels-22) takes 1.19–1.26× the bound:
// with both busy the board's 700 W limit lowers the SM clock. Tried there and slower: the tiles' column blocks in a
// ring of 21 buffers (8–16 % from 32 K) and each block copying every tile itself instead of by multicast (5–14 %).
// At 8 K (batch 1, 2, 4) and 32 K (batch 1) a kernel that only reads the cache already takes 1.25–2.24× the bound.
// History: the first wgmma_cluster (bench/results/2026-11-30-h200-kernels-11) split the 576 columns between the two
// blocks and exchanged 24 KiB of partial fp32 scores per tile through distributed shared memory; correct, but 3.0–3.9×
// the bound at 1 M (979 µs at batch 1): the exchange and the full column-max softmax of every 64 × 96 tile took about
// 6,500 cycles per tile against about 2,000 of tensor work.
#pragma once

#include "kernels/mla_decode_paged.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kMlaDecodeClusterMaxHeads = 96;

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
// splits, heads], for mla_decode_paged's combine pass. Throws k3::Error where mla_decode_wgmma_supported(device) is
// false or heads > 96.
cudaError_t mla_decode_wgmma_cluster_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                                const int32_t* page_table, const int32_t* context_tokens,
                                                float scale_log2, const MlaDecodeShape& shape, int splits,
                                                float* partial_out, float2* partial_stats, float* out,
                                                cudaStream_t stream);

}  // namespace k3::kernels
