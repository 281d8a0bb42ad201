// mla_decode_paged: MLA's absorbed ("MQA") decode attention over the paged latent cache (K3-SPEC §4). For each
// sequence b and head h, over the cached tokens t < context_tokens[b]:
//   s[t]       = scale · (q[b,h,0:512] · c_t + q[b,h,512:576] · kr_t)
//   out[b,h,:] = Σ_t softmax(s)_t c_t          (latent space, 512 values; W_uv is applied by the caller)
// Shapes, all dense and row-major (row strides as written): q bf16 [batch, heads, 576] (the absorbed query
// [q_nope·W_uk | q_r]); cache_pages bf16 [num_pages, page_tokens, 576], token rows [c (512) | k_r (64)]; page_table
// int32 [batch, max_pages_per_sequence]: the page ids of sequence b in order (token t sits in page
// page_table[b, t / page_tokens], slot t % page_tokens; entries past the sequence's pages are never read);
// context_tokens int32 [batch] in device memory (read by the kernel and clamped to [0, max_context_tokens], so one
// CUDA graph serves any lengths ≤ max_context_tokens; a sequence with no tokens gets zeros); out fp32
// [batch, heads, 512]. q, cache_pages and workspace must be 16-byte aligned. The width 576 = 512 + 64 is K3's
// (kv_lora_rank + qk_rope_head_dim) and fixed.
// Algorithms (MlaDecodeAlgorithm; all share the splits, the workspace and the results up to fp32 summation order):
//   register_q — mla_decode_split_kv (the default off Hopper): one block of 4 warps per (sequence, split of the
//                context, group of 32 heads), heads as the M dimension of mma.sync m16n8k16 bf16 tiles (fp32
//                accumulation), cached tokens in tiles of 32 as N (scores) and K (output), online softmax in base 2,
//                cp.async double-buffered loads of the 576-wide token rows (page lookup per token, rows past the
//                context zero-filled, never read) into XOR-swizzled shared memory. The score product is split over
//                the 576 columns: warp w owns columns 144w … 144w+143 for all 32 heads and all 32 tokens of a tile,
//                its Q fragments (2 m-tiles × 9 k-steps) stay in registers for the whole call, and every K fragment
//                it loads feeds 4 MMAs; the four partial score tiles go through shared memory, where 4 threads per
//                head row sum them, do the softmax and write P as bf16; each warp then owns 128 of the 512 output
//                columns for all 32 heads (V = c is the first 512 columns of the same K tile). Its combine pass loads
//                the splits' partial rows 8 at a time.
//   wgmma      — kernels/mla_decode_wgmma.h (Hopper's warpgroup MMA, sm_90a; compute capability 9.0 only, other devices
//                throw k3::Error): blocks of 64 heads, 64-token tiles, its own split count (one wave of 132 blocks,
//                never more splits than the others use, so the same workspace), then register_q's combine.
//   wgmma_alternating — kernels/mla_decode_wgmma_alternating.h (sm_90a, compute capability 9.0 only): wgmma's blocks,
//                splits, workspace and combine, with the score tiles (32 tokens) alternating between the two
//                warpgroups so that one's softmax overlaps the tensor work of the other; the automatic choice there
//                above 96 heads.
//   wgmma_cluster — kernels/mla_decode_wgmma_cluster.h (sm_90a, compute capability 9.0 only, at most 96 heads): cached
//                tokens as the wgmma M and the heads as N, each split shared by the two blocks of a cluster, block r
//                taking heads 48r … 48r + 47 (no padding, no exchange between the blocks), each 64-token tile copied
//                by TMA into both blocks at once (multicast); its own split count (the clusters the device runs at
//                once), never more than register_q's, so the same workspace and combine. The automatic choice on
//                compute capability 9.0 up to 96 heads (K3's).
// Each split writes its unnormalised output with its running max and sum; a combine pass merges them per
// (sequence, head). The number of splits depends only on the shape (batch, heads, max_context_tokens), so a
// captured launch serves every length; the tokens of a sequence are divided over the splits by its actual length,
// and a split with no tokens contributes nothing. With one split the block normalises and writes out directly (no
// workspace). The kernels' shared-memory attributes are set once per device, not on every call.
// History: shared_q (Q in shared memory, 16 × 16 score tiles per warp, so every ldmatrix fed 2 MMAs; 4x the score
// ldmatrix of register_q) measured on an H200: 1.15-1.25x slower than register_q; removed. L2 bulk prefetch of the
// cache tiles ahead of the wgmma algorithms' cp.async loads (ba0bd7d): 2-16 % slower past 8K; reverted.
// Faster (not done in register_q): 3 head groups of 32 each bring the same token rows from L2, and mma.sync
// cannot issue near the tensor peak; the wgmma algorithm is the step to the roofline.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace k3::kernels {

inline constexpr int kMlaDecodeLatentDim = 512;  // c: kv_lora_rank
inline constexpr int kMlaDecodeRopeDim = 64;     // k_r: qk_rope_head_dim
inline constexpr int kMlaDecodeCacheWidth = kMlaDecodeLatentDim + kMlaDecodeRopeDim;

// automatic: on a compute capability 9.0 device wgmma_cluster up to 96 heads where its clusters fit
// (mla_decode_wgmma_cluster_runs; the fastest there: at 96 heads, batch 1 and 1 M, 485 against wgmma_alternating's
// 622 µs, and 1.02–1.38× faster at every measured shape from 8 K to 1 M and batch 1 to 8;
// bench/results/2026-11-30-h200-kernels-14), else wgmma_alternating; register_q elsewhere.
enum class MlaDecodeAlgorithm { register_q, wgmma, wgmma_alternating, wgmma_cluster, automatic };

struct MlaDecodeShape {
  int batch;
  int heads;
  int page_tokens;
  int max_pages_per_sequence;
  int64_t max_context_tokens;  // ≤ max_pages_per_sequence · page_tokens and ≤ 2^30
};

// Splits of the context per sequence for this shape (1 for an invalid or empty shape); wgmma uses
// mla_decode_wgmma_num_splits, never more.
int mla_decode_num_splits(const MlaDecodeShape& shape);
// Workspace the launch needs (0 with one split or an invalid shape): per split, sequence and head the unnormalised
// 512-value output and its (max, sum). The same for every MlaDecodeAlgorithm.
size_t mla_decode_workspace_bytes(const MlaDecodeShape& shape);
// The splits that mla_decode_paged_bf16 divides each sequence's context into with `algorithm` (automatic resolved as
// the call resolves it on the current device); each algorithm has its own count, never more than
// mla_decode_num_splits.
int mla_decode_algorithm_splits(const MlaDecodeShape& shape, MlaDecodeAlgorithm algorithm);

cudaError_t mla_decode_paged_bf16(const __nv_bfloat16* q, const __nv_bfloat16* cache_pages, const int32_t* page_table,
                                  const int32_t* context_tokens, float scale, const MlaDecodeShape& shape, float* out,
                                  void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                  MlaDecodeAlgorithm algorithm = MlaDecodeAlgorithm::automatic);

}  // namespace k3::kernels
