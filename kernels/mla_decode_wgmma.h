// mla_decode_wgmma: the split pass of mla_decode_paged_bf16's MlaDecodeAlgorithm::wgmma (the op, its shapes and the
// workspace format: kernels/mla_decode_paged.h), on Hopper's warpgroup MMA (sm_90a; kernels/wgmma_sm90.h).
// One block of two warpgroups per (sequence, split of the context, group of 64 heads): heads are the M = 64 rows of
// every wgmma, so K3's 96 heads are one full group and one of 32 real heads padded with zero query rows (their scores
// are finite and never written). Padding costs a quarter of the tensor work. Heads as N with tokens as M leaves no
// padding and puts the per-head softmax reductions across warps; its operands then come from shared memory at
// N = 96 (99 % of the best wgmma issue rate, measured on an H200; 88 % at N = 48, 69 % at N = 32:
// bench/results/2026-11-30-h200-kernels-10), but Q (96 × 576) beside three 64-token tiles, or the 512 × 96 output
// accumulators, exceed one block, so it needs the 576 columns split over a cluster of two blocks, whose 24-KiB
// exchange of partial scores measured 1.26 µs per round (docs/engine.md, the MLA row of the targets table). Per
// 64-token tile:
//   scores  warpgroup 0: S[64 heads, 64 tokens] = Q · Kᵀ, 36 wgmma m64n64k16 with Q and the tile's 576-wide token
//           rows both K-major from shared memory; mask past the context, online softmax (base 2) in registers; P
//           (bf16, already in the A-fragment layout) and the row rescale factors go to shared memory.
//   output  both warpgroups: O[64, 256 columns each] = alpha · O + P · C, 4 wgmma m64n256k16 with P from registers
//           and C (the tile's first 512 columns) MN-major from the same shared-memory tile (trans-b); 128 fp32
//           accumulators per thread.
// Tiles arrive by cp.async, double-buffered, 16-byte chunks XOR-swizzled into the 128-byte canonical layout (the page
// lookup per token row; rows past the context zero-filled, never read). Q, two tiles, P: 225 KiB of shared memory,
// one block per SM; the splits fill one wave (132 blocks, an H200's SMs) and never exceed mla_decode_num_splits, so
// the common workspace and combine pass serve it.
// Warpgroup 1 waits while warpgroup 0 computes the scores: kernels/mla_decode_wgmma_alternating.h alternates the score
// tiles between the warpgroups so that the tensor cores stay busy through the softmax (572 against 710 µs at batch 1
// and 1 M on an H200; the default there).
#pragma once

#include "kernels/mla_decode_paged.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

// Splits of the context per sequence for this shape: ⌊132 / (batch · ⌈heads / 64⌉)⌋ within [1, mla_decode_num_splits].
int mla_decode_wgmma_num_splits(const MlaDecodeShape& shape);

// Whether `device` runs it: compute capability 9.0 (the code is built for sm_90a only).
bool mla_decode_wgmma_supported(int device);
// The current device for a split pass of the sm_90a algorithm `algorithm` (its name in messages): throws k3::Error
// where mla_decode_wgmma_supported is false; a failing cudaGetDevice comes back as its status.
cudaError_t mla_decode_wgmma_device(const char* algorithm, int& device);

// The split pass for `splits` = mla_decode_wgmma_num_splits(shape) (arguments checked by the caller): with one split
// it writes out normalised; otherwise each split writes its unnormalised rows to partial_out [batch, splits, heads,
// 512] and (max, sum) in base 2 to partial_stats [batch, splits, heads], for mla_decode_paged's combine pass. Throws
// k3::Error on a device that is not compute capability 9.0.
cudaError_t mla_decode_wgmma_split_pass(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages,
                                        const int32_t* page_table, const int32_t* context_tokens, float scale_log2,
                                        const MlaDecodeShape& shape, int splits, float* partial_out,
                                        float2* partial_stats, float* out, cudaStream_t stream);

}  // namespace k3::kernels
