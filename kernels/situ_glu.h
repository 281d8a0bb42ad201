// situ_glu: the gated activations of the K3 family on a fused gate|up GEMM output (K3-SPEC §5):
//   out[t, i] = act(a, u),   a = gate_up[t, i],  u = gate_up[t, intermediate + i]
//   SiTU (K3):          act(a, u) = β·tanh(a/β)·sigmoid(a) · β_lin·tanh(u/β_lin)     (K3: β = 4, β_lin = 25; ref::situ)
//   SiLU (Kimi Linear): act(a, u) = silu(a)·u = a·sigmoid(a)·u                        (ref::silu)
// Shapes: gate_up [tokens, 2·intermediate] fp32 (as a GEMM with fp32 output writes it) or bf16, row stride in
// elements ≥ 2·intermediate; out [tokens, intermediate] bf16 (the input of the down projection), row stride
// ≥ intermediate. fp32 arithmetic, rounded to nearest once on the store.
// Versions (chosen on the host): glu_vec4 — a 2D grid (blocks over the intermediate dimension × tokens, rows by a
// grid-stride loop), four consecutive elements per thread and step (16-byte fp32 / 8-byte bf16 loads, one 8-byte
// store), wherever intermediate, both row strides and both base addresses come in whole groups of four (K3's rows
// do; fewer, wider memory operations); glu_elementwise otherwise — the same grid, one element per thread and step.
// Both run the same arithmetic per element, so the same results bit for bit. Measurements:
// bench/results/kernel-notes.md (situ_glu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

cudaError_t situ_glu_bf16(const float* gate_up, int64_t gate_up_row_stride, float beta, float linear_beta,
                          __nv_bfloat16* out, int64_t out_row_stride, int64_t tokens, int64_t intermediate,
                          cudaStream_t stream);
cudaError_t situ_glu_bf16(const __nv_bfloat16* gate_up, int64_t gate_up_row_stride, float beta, float linear_beta,
                          __nv_bfloat16* out, int64_t out_row_stride, int64_t tokens, int64_t intermediate,
                          cudaStream_t stream);
cudaError_t silu_glu_bf16(const float* gate_up, int64_t gate_up_row_stride, __nv_bfloat16* out, int64_t out_row_stride,
                          int64_t tokens, int64_t intermediate, cudaStream_t stream);
cudaError_t silu_glu_bf16(const __nv_bfloat16* gate_up, int64_t gate_up_row_stride, __nv_bfloat16* out,
                          int64_t out_row_stride, int64_t tokens, int64_t intermediate, cudaStream_t stream);

}  // namespace k3::kernels
