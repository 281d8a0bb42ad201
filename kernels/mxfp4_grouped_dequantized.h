// mxfp4_grouped_dequantized: the routed-expert products of one MoE projection (the product of mxfp4_grouped.h) for
// prefill, by dequantising each active expert's MXFP4 weights to bf16 once and handing the product to cuBLASLt:
//   for every expert e with slots [offsets[e], offsets[e+1]):  y[s, o] = Σ_i W_e[o, i] · x_by_slot[s, i]
// Shapes: the weights as mxfp4_grouped.h stacks them (packed u8 [experts, out, in/2], E8M0 scales u8
// [experts, out, in/32]); x_by_slot bf16 [slots, in], row s the input of slot s (the tokens already gathered into
// the bucketing's expert-major slot order); y fp32 [slots, out]; row strides in elements. The routing's offsets are
// on the host (one device-to-host copy per MoE layer, so the caller synchronises and the sequence of launches
// depends on the routing: not for a decode graph).
// Versions:
//   mxfp4_dequantize_expert_bf16 — each thread decodes 4 words of 8 elements (4 packed bytes each, 256 words apart so
//     a warp's loads and 16-byte stores are contiguous) by byte lookup (mxfp4_grouped_device.h) into bf16,
//     W_e[o, i] = E2M1 · 2^(scale − 127) bit for bit the CPU decode (weights::mxfp4_dequantize: exact in bf16; a NaN
//     scale gives NaN over its block, 6 · 2^127 overflows to ±Inf as in fp32). Weights in the tiled layout
//     (Mxfp4Layout::tiled16, kernels/mxfp4_tiled.h): a block of 8 warps per 8 units (16 rows × 2 blocks) of a tile,
//     each lane's 16 bytes decoded as the tiled GEMV decodes them into a shared 16 × 512 tile, written out 1 KiB per
//     row; the same bf16 values.
//   mxfp4_grouped_dequantized_bf16_to_f32 — per active expert in id order: W_e into `scratch` (one expert's out·in
//     bf16, so the weights a GEMM reads were just written and mostly still sit in the L2), then the caller's
//     dense GEMM (the engine's cuBLASLt GemmRunner: bf16 products, fp32 accumulation) over the expert's contiguous
//     slots. Every weight is decoded once per call, where the in-kernel GEMMs decode each weight once per tile of
//     slots; it pays once the experts hold enough slots for cuBLASLt's tiles (kMxfp4DequantizedMinAverageSlots).
// Measurements and the overlap tried: bench/results/kernel-notes.md (mxfp4_grouped_dequantized).
#pragma once

#include "kernels/mxfp4_grouped.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

// The engine dequantises while the routed slots average at least this many per expert (tokens · top_k ≥ this ·
// experts; K3: 7168 tokens): the measured crossover with the pipelined GEMM on an H200.
inline constexpr int kMxfp4DequantizedMinAverageSlots = 128;

// out[o, i] = W_expert[o, i] as bf16, out row stride out_row_stride elements (a multiple of 8, ≥ in; out 16-byte
// aligned). cudaErrorInvalidValue for an expert outside [0, experts) or a violated shape rule.
cudaError_t mxfp4_dequantize_expert_bf16(const Mxfp4ExpertWeights& w, int expert, __nv_bfloat16* out,
                                         int64_t out_row_stride, cudaStream_t stream);

// The argument rules of mxfp4_grouped_dequantized_bf16_to_f32: host_expert_offsets [experts + 1], non-decreasing,
// offsets[0] ≥ 0; scratch_elements ≥ out · in; out a multiple of 8; x_row_stride ≥ in and a multiple of 8;
// y_row_stride ≥ out and a multiple of 4; x_by_slot, y and scratch 16-byte aligned; and
// mxfp4_dequantize_expert_bf16's. cudaErrorInvalidValue where one is broken.
cudaError_t mxfp4_grouped_dequantized_check(const Mxfp4ExpertWeights& w, const int32_t* host_expert_offsets,
                                            const __nv_bfloat16* x_by_slot, int64_t x_row_stride, const float* y,
                                            int64_t y_row_stride, const __nv_bfloat16* scratch,
                                            int64_t scratch_elements);

// The slots of expert e are rows [offsets[e], offsets[e + 1]) of x_by_slot and y; scratch holds one expert's
// out · in bf16. `gemm` is the caller's dense GEMM: gemm.bf16_to_f32(x, x_row_stride, weight, bias, alpha, beta, y,
// y_row_stride, m, n, k, stream) → cudaError_t, y[m, n] = alpha · x Wᵀ + beta · y (the engine's GemmRunner,
// engine/runtime/gemm_cublaslt.h). Rows of y outside the slots are not written. Errors: cudaErrorInvalidValue for a
// broken rule (before any launch), else the first failing launch's error.
template <class Gemm>
cudaError_t mxfp4_grouped_dequantized_bf16_to_f32(Gemm& gemm, const Mxfp4ExpertWeights& w,
                                                  const int32_t* host_expert_offsets, const __nv_bfloat16* x_by_slot,
                                                  int64_t x_row_stride, float* y, int64_t y_row_stride,
                                                  __nv_bfloat16* scratch, int64_t scratch_elements,
                                                  cudaStream_t stream) {
  if (const cudaError_t status = mxfp4_grouped_dequantized_check(w, host_expert_offsets, x_by_slot, x_row_stride, y,
                                                                 y_row_stride, scratch, scratch_elements);
      status != cudaSuccess) {
    return status;
  }
  for (int e = 0; e < w.experts; ++e) {
    const int64_t first = host_expert_offsets[e], rows = host_expert_offsets[e + 1] - first;
    if (rows == 0) continue;
    if (const cudaError_t status = mxfp4_dequantize_expert_bf16(w, e, scratch, w.in_features, stream);
        status != cudaSuccess) {
      return status;
    }
    if (const cudaError_t status =
            gemm.bf16_to_f32(x_by_slot + first * x_row_stride, x_row_stride, scratch, nullptr, 1.0f, 0.0f,
                             y + first * y_row_stride, y_row_stride, rows, w.out_features, w.in_features, stream);
        status != cudaSuccess) {
      return status;
    }
  }
  return cudaSuccess;
}

}  // namespace k3::kernels
