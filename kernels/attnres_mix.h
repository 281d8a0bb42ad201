// attnres_mix: the Block AttnRes mixer (K3-SPEC §2) fused with the RMSNorm that follows it, per token t:
//   s_n    = Σ_i (V_n[t,i] / rms(V_n[t,:])) · γ_i · w_i      rms(v) = sqrt(mean(v²) + eps_mix)
//   mix    = Σ_n softmax(s)_n · V_n[t,:]                        (raw V; scores and softmax in fp32)
//   normed = mix / sqrt(mean(mix²) + eps_norm) · norm_weight
// Shapes: n = 1..9 candidates V_n, each [tokens, width] bf16 with its own row stride (the stored blocks,
// then the partial sum p); w (query, *_res_proj), γ (key_norm, *_res_norm), norm_weight [width] bf16;
// mix and normed [tokens, width] bf16. mix is the next residual input; normed feeds the sublayer.
// The norm reads mix as stored (bf16-rounded), as an unfused mix → rmsnorm pair would. The outputs must
// not overlap a candidate or each other.
// Versions: attnres_mix_block_per_token — one thread block per token. Pass 1: each thread strides over
// the row and accumulates Σv² and Σv·γw for every candidate; one block reduction of 2n values. Every
// thread then takes the softmax of the n scores. Pass 2: mix (fp32 sum, stored bf16) and Σmix².
// Pass 3: re-reads the mix it wrote (the same thread, the same elements) and writes normed.
// attnres_mix_vec8_block_per_token (used when width is a multiple of 8 up to 8192 and every row is
// 16-byte aligned): one thread per 8 consecutive elements with 16-byte loads, the mix kept in
// registers for the norm — at decode (a few tokens, one block each) the scalar version ran ~24 µs per
// mixer at K3's width on an H200.
// attnres_mix_vec8_cluster_per_token (compute capability ≥ 9.0, where vec8 applies): a cluster of
// kAttnResClusterBlocks blocks per token, each a contiguous eighth of the row in 16-byte units with its
// candidates' values kept in registers; the blocks' partial sums (2n, then Σmix²) are added through distributed
// shared memory in rank order, so every block derives the same softmax and norm. One block per token leaves a
// decode step's mixer on one SM; the cluster spreads its loads over eight.
// AttnResAlgorithm::automatic takes the cluster up to kAttnResClusterMaxTokens tokens, vec8 else, the scalar
// version where vec8 does not apply; an explicit version that does not apply returns cudaErrorInvalidValue.
// Faster: several tokens per block for small widths, and at prefill a chunked layout that reads each
// block bank row once for both mixers of a layer.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

inline constexpr int kAttnResMaxCandidates = 9;  // 8 stored blocks + the current partial sum
inline constexpr int kAttnResClusterBlocks = 8;
// automatic's limit for the cluster version: per launch in a CUDA graph on an H200 at K3's width (3 / 9 candidates;
// bench/results/2026-12-01-h200-kernels-20 run 1) it took 5.2 / 7.4 µs at 1 token and 5.3 / 7.5 at 8 against vec8's
// 6.4 / 10.7 and 6.5 / 10.8, but 10.9 / 15.4 against 6.6 / 11.1 at 64.
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
