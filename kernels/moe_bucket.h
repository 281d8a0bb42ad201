// moe_bucket: token→expert bucketing for a grouped expert GEMM, and the weighted combine of the expert outputs
// (K3-SPEC §5.2: Σ_e w_e · y_e per token). Everything runs on the device from sizes known on the host: no host
// synchronisation, so the launches can be captured in a CUDA graph.
//
// Slots are the tokens·top_k (token, choice) pairs p = token·top_k + choice, ordered expert-major: by expert id,
// then token, then choice (a stable counting sort of p by expert_ids[p]). Outputs (MoeBuckets, all dense):
//   expert_offsets [experts + 1] int32  exclusive prefix sum of slots per expert: expert e owns slots
//                                       [offsets[e], offsets[e + 1]); offsets[experts] = the slots filled
//   slot_token     [tokens·top_k] int32 the x row (token) of each slot
//   slot_weight    [tokens·top_k] fp32  the router weight of each slot
//   slot_of        [tokens, top_k] int32 the slot each (token, choice) went to, for the combine
//   active_experts [experts] int32      ids of the experts with ≥ 1 slot, ascending; the rest of the array is −1
//   active_count   [1] int32            how many experts are active
// An expert id outside [0, experts) gets no slot: its slot_of is −1, and the slots past offsets[experts] are left
// unwritten (a correct router never produces one). 1 ≤ experts ≤ 1024; tokens·top_k < 2^31.
//
// combine: y[t, :] = Σ_c weight[t, c] · expert_out[slot_of[t, c], :], summed in fp32 in the order c = 0, 1, …
// (deterministic: no atomics); a slot_of of −1 adds nothing. expert_out [slots, width] fp32 or bf16 dense,
// weight [tokens, top_k] fp32 (the router weights), y [tokens, width] fp32 dense; top_k ≤ 32.
//
// Versions: moe_bucket_warp_chunks — three launches: (1) each warp counts the experts of a chunk of 512 pairs in
// shared memory (__match_any_sync groups equal ids, the group's last lane adds its size); (2) one 1024-thread block
// turns the [chunks, experts] counts into per-expert offsets (a scan down each expert's column, then a block scan
// over experts) and the active list; (3) each warp walks its chunk again and places every pair at its expert's
// cursor plus its rank among equal ids in the 32-pair round. moe_bucket_single_block — up to
// kMoeBucketSingleBlockPairs pairs (a decode step's): one launch of one 1024-thread block, a thread per pair and per
// expert: each warp's counts per expert in shared memory (one byte each), the offsets and the active list by two
// block scans, each pair's slot from its expert's offset, the counts of the warps before it and its rank in its warp;
// `automatic` takes it where it applies (one launch instead of three at decode). moe_combine_thread_per_column — one
// thread per (token, column), the token's width spread over blocks (one block per token leaves decode on a few
// SMs); at most 65535 tokens. Measurements: bench/results/kernel-notes.md (moe_bucket).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace k3::kernels {

inline constexpr int kMoeBucketMaxExperts = 1024;
inline constexpr int kMoeBucketSingleBlockPairs = 1024;
inline constexpr int kMoeCombineMaxTopK = 32;

enum class MoeBucketAlgorithm { automatic, warp_chunks, single_block };

struct MoeBuckets {
  int32_t* expert_offsets;  // [experts + 1]
  int32_t* slot_token;      // [tokens · top_k]
  float* slot_weight;       // [tokens · top_k]
  int32_t* slot_of;         // [tokens, top_k]
  int32_t* active_experts;  // [experts]
  int32_t* active_count;    // [1]
};

// Device workspace moe_bucket_by_expert needs (per-chunk expert counts); 0 when tokens·top_k is 0.
size_t moe_bucket_workspace_bytes(int tokens, int top_k, int experts);

// single_block with more than kMoeBucketSingleBlockPairs pairs returns cudaErrorInvalidValue.
cudaError_t moe_bucket_by_expert(const int32_t* expert_ids, const float* weights, int tokens, int top_k, int experts,
                                 const MoeBuckets& out, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                 MoeBucketAlgorithm algorithm = MoeBucketAlgorithm::automatic);

cudaError_t moe_combine_f32(const float* expert_out, const int32_t* slot_of, const float* slot_weight_by_choice,
                            int tokens, int top_k, int width, float* y, cudaStream_t stream);
cudaError_t moe_combine_bf16(const __nv_bfloat16* expert_out, const int32_t* slot_of,
                             const float* slot_weight_by_choice, int tokens, int top_k, int width, float* y,
                             cudaStream_t stream);

}  // namespace k3::kernels
