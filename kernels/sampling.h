// sampling: the next token from the lm_head logits, fp32 [batch, vocab] dense (K3: vocab 163840; any vocab ≥ 1,
// top-p up to 2^23).
//   greedy  out[b] = argmax_i logits[b, i]; ties go to the lowest id; a NaN logit ranks as −∞.
//   top-p   x = logits / temperature; the nucleus is the shortest prefix of the tokens ordered by decreasing x
//           (ties: lower id first) whose probability mass reaches top_p; out[b] is drawn from the nucleus
//           renormalised, with the uniform number taken from a counter-based hash of (seed, *step, b)
//           (sampling_uniform_bits), so a replay with the same (seed, step) gives the same tokens and the step can
//           advance in device memory between replays of a CUDA graph. temperature > 0, top_p in (0, 1].
//           Where the largest x is not finite (every logit NaN or −∞, or x overflows), out[b] is the token of
//           largest x (ties: lowest id).
// Probability masses are fixed-point integers, m_i = ⌊exp(x_i − max x) · 2^40⌋ (the largest token has exactly
// 2^40), so every sum is exact and independent of the order of summation: the result is deterministic, and a
// token's probability is off by less than 2^-40 / Σm of the total. The nucleus reaches
// ⌈top_p · Σm⌉ (at least 1), so top_p → 0 gives the greedy token.
// Versions (greedy: SampleGreedyAlgorithm; every version returns the same token):
// sample_greedy_block_per_row — one 1024-thread block per row, a (value, id) max packed into 64 bits,
// read with 16-byte loads when the vocabulary is a multiple of 4 and the logits 16-byte aligned (one SM's bandwidth
// per row);
// sample_greedy_cluster_per_row — a cluster of kSampleGreedyClusterBlocks 1024-thread blocks per row (sm_90), each
// block the same packed max over its contiguous part of the row, then block 0 takes the max of the blocks' results
// through distributed shared memory: no workspace, one launch. `automatic` takes it on devices that launch clusters
// (compute capability ≥ 9.0) for rows of at least 8,192 logits and batches up to 32 (where one block per row leaves
// the GPU idle); else the block per row. Measurements: bench/results/kernel-notes.md (sampling).
// sample_top_p_radix_select — one 1024-thread block per row: max; masses and their sum; the threshold value of the
// nucleus found by a 4-pass radix select over the 32-bit order-preserving key of x (a 256-bin mass histogram per
// byte, integer atomics); then per-thread contiguous id ranges: nucleus mass and ties at the threshold, block
// scans, and the thread whose range holds the drawn point walks it. Seven passes over the row, all from L2 after
// the first. Faster (not done): split a row over several blocks (batch 1 uses one SM).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace k3::kernels {

// SplitMix64's finaliser (a bijective 64-bit mix).
__host__ __device__ inline uint64_t sampling_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The 64 random bits of batch row `sequence` at `step`: the finaliser chained over (seed, step, sequence). The
// drawn point in the nucleus is ⌊bits · nucleus_mass / 2^64⌋.
__host__ __device__ inline uint64_t sampling_uniform_bits(uint64_t seed, int64_t step, int64_t sequence) {
  return sampling_mix64(sampling_mix64(sampling_mix64(seed) ^ static_cast<uint64_t>(step)) ^
                        static_cast<uint64_t>(sequence));
}

inline constexpr int kSampleGreedyClusterBlocks = 8;  // the portable cluster size

enum class SampleGreedyAlgorithm { automatic, block_per_row, cluster_per_row };

// cluster_per_row on a device without cluster launch (or batch > 65,535) returns cudaErrorInvalidValue.
cudaError_t sample_greedy(const float* logits, int batch, int vocab, int32_t* out_tokens, cudaStream_t stream,
                          SampleGreedyAlgorithm algorithm = SampleGreedyAlgorithm::automatic);

// Workspace sample_top_p needs: none in this version (one block per row keeps everything in shared memory); the
// parameter keeps the signature for a version that splits a row over blocks.
size_t sample_top_p_workspace_bytes(int batch, int vocab);

cudaError_t sample_top_p(const float* logits, int batch, int vocab, float temperature, float top_p, uint64_t seed,
                         const int64_t* step, void* workspace, size_t workspace_bytes, int32_t* out_tokens,
                         cudaStream_t stream);

}  // namespace k3::kernels
