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
// Algorithms (MlaDecodeAlgorithm; all share the splits' workspace and the combine pass, and give the same results up
// to fp32 summation order):
//   register_q — mla_decode_split_kv (the choice off compute capability 9.0): one block of 4 warps per (sequence,
//                split of the context, group of 32 heads), heads as the M dimension of mma.sync m16n8k16 bf16 tiles
//                (fp32 accumulation), cached tokens in tiles of 32, online softmax in base 2, cp.async
//                double-buffered loads of the 576-wide token rows (page lookup per token, rows past the context
//                zero-filled, never read) into XOR-swizzled shared memory. Warp w owns score columns 144w … 144w+143
//                for all 32 heads (its Q fragments in registers for the whole call, every K fragment feeding 4 MMAs);
//                the four partial score tiles are summed in shared memory, where 4 threads per head row do the
//                softmax and write P as bf16; each warp then owns 128 of the 512 output columns. Its combine pass
//                loads the splits' partial rows 8 at a time.
//   wgmma_alternating — kernels/mla_decode_wgmma_alternating.h (Hopper's warpgroup MMA, sm_90a, compute capability 9.0
//                only): heads as the wgmma M in blocks of 64, score tiles of 32 tokens alternating between two
//                warpgroups so one's softmax overlaps the other's tensor work; the choice on compute capability 9.0
//                up to 64 heads (a TP16 … TP2 rank's 6 … 48), above 96 or where wgmma_cluster's clusters do not fit.
//   wgmma_cluster — kernels/mla_decode_wgmma_cluster.h (sm_90a, compute capability 9.0 only, at most 96 heads): cached
//                tokens as the wgmma M and the heads as N, each split shared by the two blocks of a cluster (48 heads
//                each, no padding), each 64-token tile copied by TMA into both blocks at once (multicast); the choice
//                on compute capability 9.0 from 65 to 96 heads (K3's 96), the fastest at every measured 96-head shape.
// Each split writes its unnormalised output with its running max and sum; a combine pass merges them per
// (sequence, head). The number of splits depends only on the shape (batch, heads, max_context_tokens) and the
// device's SM count, so a captured launch serves every length; the tokens of a sequence are divided over the splits
// by its actual length, and a split with no tokens contributes nothing. With one split the block normalises and
// writes out directly (no workspace). The kernels' shared-memory attributes are set once per device.
// Measurements, the variants tried and removed: bench/results/kernel-notes.md (mla_decode).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace k3::kernels {

inline constexpr int kMlaDecodeLatentDim = 512;  // c: kv_lora_rank
inline constexpr int kMlaDecodeRopeDim = 64;     // k_r: qk_rope_head_dim
inline constexpr int kMlaDecodeCacheWidth = kMlaDecodeLatentDim + kMlaDecodeRopeDim;

// automatic: on a compute capability 9.0 device wgmma_cluster from 65 to 96 heads where its clusters fit
// (mla_decode_wgmma_cluster_runs), else wgmma_alternating; register_q elsewhere.
enum class MlaDecodeAlgorithm { register_q, wgmma_alternating, wgmma_cluster, automatic };

struct MlaDecodeShape {
  int batch;
  int heads;
  int page_tokens;
  int max_pages_per_sequence;
  int64_t max_context_tokens;  // ≤ max_pages_per_sequence · page_tokens and ≤ 2^30
};

// Splits of the context per sequence for this shape: enough for two register_q blocks per SM of the current device
// (an H200's 132 without a device; 1 for an invalid or empty shape); the wgmma algorithms use their own counts,
// never more.
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
