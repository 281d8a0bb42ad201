// kda_chunk_state: the state-pass launch of the KDA chunked prefill (kernels/kda_chunk_prefill.h; the kernel and its
// design: kernels/kda_chunk_state_f16.cu). Internal to kernels/kda_chunk_prefill.cu; device types, so it is included
// by .cu files only.
#pragma once

#include "kernels/kda_chunk_intra.h"

#include <cuda_runtime.h>

namespace k3::kernels::kda_chunk {

// Carries state [heads, 128, 128] (key index first) through `chunks` 64-token chunks of a workspace with fp16
// operands that phase 1 filled, writing out [tokens, heads·128]; the layouts of kda_chunk_prefill_f32state.
// Arguments are checked by the caller.
cudaError_t launch_state_pass_split_key_f16(WorkspaceF16 ws, float* state, float* out, int tokens, int heads,
                                            int chunks, cudaStream_t stream);

}  // namespace k3::kernels::kda_chunk
