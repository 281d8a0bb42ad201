// attnres_mix: the Block AttnRes mixer (K3-SPEC §2) fused with the RMSNorm that follows it, per token t:
//   s_n    = Σ_i (V_n[t,i] / rms(V_n[t,:])) · γ_i · w_i      rms(v) = sqrt(mean(v²) + eps_mix)
//   mix    = Σ_n softmax(s)_n · V_n[t,:]                        (raw V; scores and softmax in fp32)
//   normed = mix / sqrt(mean(mix²) + eps_norm) · norm_weight
// Shapes: n = 1..9 candidates V_n, each [tokens, width] bf16 with its own row stride (the stored blocks,
// then the partial sum p); w (query, *_res_proj), γ (key_norm, *_res_norm), norm_weight [width] bf16;
// mix and normed [tokens, width] bf16. mix is the next residual input; normed feeds the sublayer.
// The norm reads mix as stored (bf16-rounded), as an unfused mix → rmsnorm pair would. The outputs must
// not overlap a candidate or each other.
// Versions (AttnResAlgorithm):
//   block_per_token — one block per token: Σv² and Σv·γw per candidate, one block reduction of 2n values, the
//     softmax, then mix and Σmix², then normed from the mix it wrote. Used where vec8 does not apply.
//   vec8_block_per_token — one thread per 8 consecutive elements with 16-byte loads, the mix kept in registers for
//     the norm; width a multiple of 8 up to 8192, every row 16-byte aligned.
//   vec8_cluster_per_token — compute capability ≥ 9.0 where vec8 applies: a cluster of kAttnResClusterBlocks blocks
//     per token, each a contiguous eighth of the row, the partial sums added through distributed shared memory in
//     rank order (every block derives the same softmax and norm), so a decode step's loads spread over eight SMs.
// automatic takes the cluster up to kAttnResClusterMaxTokens tokens (faster at decode sizes), vec8 above it (the
// cluster's extra blocks cost more than they spread once the tokens fill the SMs), the scalar version where vec8
// does not apply; an explicit version that does not apply returns cudaErrorInvalidValue.
// Measurements and history: bench/results/kernel-notes.md (attnres_mix).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kAttnResMaxCandidates = 9;  // 8 stored blocks + the current partial sum
inline constexpr int kAttnResClusterBlocks = 8;
// automatic's limit for the cluster version (measured crossover between 8 and 64 tokens on an H200).
inline constexpr int kAttnResClusterMaxTokens = 8;

enum class AttnResAlgorithm { automatic, block_per_token, vec8_block_per_token, vec8_cluster_per_token };

// Passed by value to the kernel. Entries [0, count) must be set.
struct AttnResCandidates {
  int count = 0;
  const __nv_bfloat16* rows[kAttnResMaxCandidates] = {};  // V_n: [tokens, width]
  int64_t row_stride[kAttnResMaxCandidates] = {};         // elements between consecutive tokens of V_n
};

cudaError_t attnres_mix_rmsnorm_bf16(const AttnResCandidates& candidates, const __nv_bfloat16* query,
                                     const __nv_bfloat16* key_norm, float eps_mix, const __nv_bfloat16* norm_weight,
                                     float eps_norm, __nv_bfloat16* mix, int64_t mix_row_stride, __nv_bfloat16* normed,
                                     int64_t normed_row_stride, int64_t tokens, int64_t width, cudaStream_t stream,
                                     AttnResAlgorithm algorithm = AttnResAlgorithm::automatic);

}  // namespace k3::kernels
