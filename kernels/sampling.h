// sampling: the next token from the lm_head logits, fp32 [batch, vocab] dense (K3: vocab 163840; any vocab ≥ 1):
//   greedy  out[b] = argmax_i logits[b, i]; ties go to the lowest id; a NaN logit ranks as −∞.
// Versions (SampleGreedyAlgorithm; every version returns the same token):
// sample_greedy_block_per_row — one 1024-thread block per row, a (value, id) max packed into 64 bits,
// read with 16-byte loads when the vocabulary is a multiple of 4 and the logits 16-byte aligned (one SM's bandwidth
// per row);
// sample_greedy_cluster_per_row — a cluster of kSampleGreedyClusterBlocks 1024-thread blocks per row (sm_90), each
// block the same packed max over its contiguous part of the row, then block 0 takes the max of the blocks' results
// through distributed shared memory: no workspace, one launch. `automatic` takes it on devices that launch clusters
// (compute capability ≥ 9.0) for rows of at least 8,192 logits and batches up to 32 (where one block per row leaves
// the GPU idle); else the block per row. Measurements: bench/results/kernel-notes.md (sampling).
// Top-p sampling is an experiment outside the library (bench/lab/sample_top_p.cu): the engine samples greedily.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kSampleGreedyClusterBlocks = 8;  // the portable cluster size

enum class SampleGreedyAlgorithm { automatic, block_per_row, cluster_per_row };

// cluster_per_row on a device without cluster launch (or batch > 65,535) returns cudaErrorInvalidValue.
cudaError_t sample_greedy(const float* logits, int batch, int vocab, int32_t* out_tokens, cudaStream_t stream,
                          SampleGreedyAlgorithm algorithm = SampleGreedyAlgorithm::automatic);

}  // namespace k3::kernels
