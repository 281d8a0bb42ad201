#include "kernels/kda_chunk_prefill.h"

#include "kernels/kda_chunk_intra.h"
#include "kernels/kda_chunk_state.h"

#include <cuda_fp16.h>

#include <cstdint>

namespace k3::kernels {

namespace {

using kda_chunk::kChunk;  // the chunk geometry and the workspace: kernels/kda_chunk_intra.h
using kda_chunk::kD;
// Diagonal tiles referenced to their middle token see exponents up to 8·|lb| (row factors) and 7·|lb| (column
// factors); the masked-out upper entries multiply both, up to e^{15·|lb|}·128 terms, which for lb ≥ -5 stays below
// fp32's (and fp16-rounded operands') 3.4e38. Steeper bounds take the exact per-pair path.
constexpr float kTensorDiagonalMinLowerBound = -5.0f;

using kda_chunk::kFloatsPerBlock;

// Which launches a call makes.
struct Launches {
  bool intra, state_pass;
};

cudaError_t run(const float* q, const float* k, const float* v, const float* g, const float* beta, float* state,
                float* out, int tokens, int heads, int head_dim, float gate_lower_bound, void* workspace,
                size_t workspace_bytes, cudaStream_t stream, Launches which);

}  // namespace

size_t kda_chunk_prefill_workspace_bytes(int tokens, int heads, int head_dim) {
  if (tokens < 1 || heads < 1 || head_dim != kD) return 0;
  const int64_t chunks = (int64_t(tokens) + kChunk - 1) / kChunk;
  return size_t(chunks) * size_t(heads) * size_t(kFloatsPerBlock) * sizeof(float);
}

size_t kda_chunk_prefill_workspace_traffic_bytes(int tokens, int heads, int head_dim) {
  const size_t fp32_bytes = kda_chunk_prefill_workspace_bytes(tokens, heads, head_dim);
  // U and e^{G_last} in fp32, W, Qg, Kd and A_qk in fp16 (kernels/kda_chunk_intra.h).
  constexpr size_t kBlockBytes = (kda_chunk::kRowsBlock + kD) * sizeof(float) +
                                 (3 * kda_chunk::kRowsBlock + kda_chunk::kScoreBlock) * sizeof(__half);
  return fp32_bytes / (kFloatsPerBlock * sizeof(float)) * kBlockBytes;
}

namespace {

cudaError_t run(const float* q, const float* k, const float* v, const float* g, const float* beta, float* state,
                float* out, int tokens, int heads, int head_dim, float gate_lower_bound, void* workspace,
                size_t workspace_bytes, cudaStream_t stream, Launches which) {
  if (tokens < 1 || heads < 1 || heads > 65535 || head_dim != kD) return cudaErrorInvalidValue;
  if (!(gate_lower_bound <= 0.0f)) return cudaErrorInvalidValue;  // also rejects NaN
  if (!q || !k || !v || !g || !beta || !state || !out || !workspace) return cudaErrorInvalidValue;
  if (workspace_bytes < kda_chunk_prefill_workspace_bytes(tokens, heads, head_dim)) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) return cudaErrorInvalidValue;
  const int chunks = int((int64_t(tokens) + kChunk - 1) / kChunk);
  const kda_chunk::WorkspaceF16 ws{static_cast<float*>(workspace), int64_t(chunks) * heads};
  const bool tensor_diagonal = gate_lower_bound < 0.0f && gate_lower_bound >= kTensorDiagonalMinLowerBound;
  if (which.intra) {
    const cudaError_t status =
        kda_chunk::launch_intra_factored(q, k, v, g, beta, tokens, heads, chunks, ws, tensor_diagonal, stream);
    if (status != cudaSuccess) return status;
  }
  return which.state_pass ? kda_chunk::launch_state_pass_split_key_f16(ws, state, out, tokens, heads, chunks, stream)
                          : cudaSuccess;
}

}  // namespace

cudaError_t kda_chunk_prefill_f32state(const float* q, const float* k, const float* v, const float* g,
                                       const float* beta, float* state, float* out, int tokens, int heads, int head_dim,
                                       float gate_lower_bound, void* workspace, size_t workspace_bytes,
                                       cudaStream_t stream) {
  return run(q, k, v, g, beta, state, out, tokens, heads, head_dim, gate_lower_bound, workspace, workspace_bytes,
             stream, Launches{true, true});
}

cudaError_t kda_chunk_prefill_phase_for_bench(KdaChunkPhase phase, const float* q, const float* k, const float* v,
                                              const float* g, const float* beta, float* state, float* out, int tokens,
                                              int heads, int head_dim, float gate_lower_bound, void* workspace,
                                              size_t workspace_bytes, cudaStream_t stream) {
  if (phase != KdaChunkPhase::intra_chunk && phase != KdaChunkPhase::state_pass) return cudaErrorInvalidValue;
  const Launches which{phase == KdaChunkPhase::intra_chunk, phase == KdaChunkPhase::state_pass};
  return run(q, k, v, g, beta, state, out, tokens, heads, head_dim, gate_lower_bound, workspace, workspace_bytes,
             stream, which);
}

}  // namespace k3::kernels
