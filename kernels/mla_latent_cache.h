// mla_latent_cache: writing and reading the paged MLA latent cache (K3-SPEC §4; 576 values per token for K3).
// mla_cache_append_bf16 — for each new token t: row = [RMSNorm_r(kv[t, 0:r]) · w | kv[t, r:r+dr]] (k_r cached as
//   projected: NoPE) written to its sequence's page: page = page_table[seq · max_pages + pos / page_tokens],
//   slot pos % page_tokens, where seq = sequence_rows ? sequence_rows[t] : 0 and pos = positions ? positions[t] :
//   first_position + t. positions and sequence_rows live in device memory, so a captured decode step
//   appends at each sequence's current length.
//   kv [tokens, r + dr] bf16 (kv_a_proj output, its own row stride); w [r] bf16; pages [*, page_tokens, r + dr] bf16.
// mla_cache_gather_bf16 — the first `tokens` cached rows of one sequence (page_table_row: its page ids) copied
//   to a dense [tokens, r + dr] buffer, for the expanded (prefill) form.
// Versions: one block per token; a block-wide sum of squares for the norm (append); one block per token copy
// (gather), 16-byte vectors when r + dr is a multiple of 8.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

cudaError_t mla_cache_append_bf16(const __nv_bfloat16* kv, int64_t kv_row_stride, const __nv_bfloat16* norm_weight,
                                  float eps, int latent_rank, int rope_dim, int tokens, const int32_t* positions,
                                  int64_t first_position, const int32_t* sequence_rows, const int32_t* page_table,
                                  int max_pages_per_sequence, int page_tokens, __nv_bfloat16* pages,
                                  cudaStream_t stream);

cudaError_t mla_cache_gather_bf16(const __nv_bfloat16* pages, const int32_t* page_table_row, int page_tokens, int width,
                                  int64_t tokens, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace k3::kernels
