// elementwise: the small glue ops between the engine's GEMMs and kernels (fp32 arithmetic):
//   add_bf16:              out = a + b                        (the residual partial sum p ← p + f(x))
//   sigmoid_gate_bf16:     out = x ⊙ sigmoid(gate)            (MLA output gate at prefill; gate has its own row stride)
//   convert_f32_to_bf16:   out = bf16(x) (round to nearest even)
//   increment_i32:         values[i] += 1                     (sequence lengths after a captured decode step)
// Shapes: dense row-major [rows, width] unless a row stride is given; out may alias a (add) or x (gate).
// Versions: grid-stride loops, one element per thread step.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

cudaError_t add_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int64_t n,
                     cudaStream_t stream);
cudaError_t sigmoid_gate_bf16(const __nv_bfloat16* x, const __nv_bfloat16* gate, int64_t gate_row_stride,
                              __nv_bfloat16* out, int64_t rows, int64_t width, cudaStream_t stream);
cudaError_t convert_f32_to_bf16(const float* x, __nv_bfloat16* out, int64_t n, cudaStream_t stream);
cudaError_t increment_i32(int32_t* values, int n, cudaStream_t stream);

}  // namespace k3::kernels
