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
//     bf16, so the weights a GEMM reads were just written and mostly still sit in the L2), then GemmRunner's
//     cuBLASLt GEMM (bf16 products, fp32 accumulation) over the expert's contiguous slots. Every weight is decoded
//     once per call, where the in-kernel GEMMs decode each weight once per tile of slots; it pays once the experts
//     hold enough slots for cuBLASLt's tiles (kMxfp4DequantizedMinAverageSlots). On an H200, all 896 experts
//     active, 32768 tokens: w13 [6144, 3584] 54.9 ms (421 TFLOP/s, gathering x included) against the pipelined
//     GEMM's 93.8 ms, w2 [3584, 3072] 30.7 against 46.4 ms; the decode runs at about 3.3 TB/s (12.9 µs per expert
//     and projection on average) and the GEMMs at about 590 TFLOP/s. Tried and removed (…-kernels-13 run 17): decoding
//     expert e + 1 on a side stream into the other half of a two-expert scratch while expert e multiplies (events
//     ordering each GEMM after its decode); the same bits, and no faster — 54.7 against 55.3 ms for w13 and 30.8
//     against 30.7 ms for w2 at 32768 tokens, 0.9-1.5 ms slower at 2048-8192: cuBLASLt's GEMMs leave the decode no
//     room on the SMs.
// Faster (not done): a wgmma grouped GEMM whose producer warps decode each W tile into shared memory once per tile of
// slots, with no bf16 copy in memory (the in-kernel mma.sync GEMMs of mxfp4_grouped.h reach 158-250 TFLOP/s).
#pragma once

#include "kernels/gemm_cublaslt.h"
#include "kernels/mxfp4_grouped.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace k3::kernels {

// The engine dequantises while the routed slots average at least this many per expert (tokens · top_k ≥ this ·
// experts; K3: 7168 tokens). On an H200 at K3's shapes (bench/results/2026-11-30-h200-kernels-13, run 2), w13 + w2
// with every expert active took 49.8 ms this way against the pipelined GEMM's 54.2 ms at 146 slots per expert
// (8192 tokens), and 45.5 against 23.6 ms at 73 (4096 tokens); the two lines cross near 132.
inline constexpr int kMxfp4DequantizedMinAverageSlots = 128;

// out[o, i] = W_expert[o, i] as bf16, out row stride out_row_stride elements (a multiple of 8, ≥ in; out 16-byte
// aligned). cudaErrorInvalidValue for an expert outside [0, experts) or a violated shape rule.
cudaError_t mxfp4_dequantize_expert_bf16(const Mxfp4ExpertWeights& w, int expert, __nv_bfloat16* out,
                                         int64_t out_row_stride, cudaStream_t stream);

// host_expert_offsets: [experts + 1], non-decreasing, offsets[0] ≥ 0; the slots of expert e are rows
// [offsets[e], offsets[e + 1]) of x_by_slot and y. scratch holds scratch_elements ≥ out · in bf16. Shape rules: out a
// multiple of 8; x_row_stride ≥ in and a multiple of 8; y_row_stride ≥ out and a multiple of 4; x_by_slot, y and
// scratch 16-byte aligned; and mxfp4_dequantize_expert_bf16's. Rows of y outside the slots are not written.
// Errors: cudaErrorInvalidValue for a broken rule (before any launch), else the first failing launch's error
// (gemm.last_error() names a failing GEMM).
cudaError_t mxfp4_grouped_dequantized_bf16_to_f32(GemmRunner& gemm, const Mxfp4ExpertWeights& w,
                                                  const int32_t* host_expert_offsets, const __nv_bfloat16* x_by_slot,
                                                  int64_t x_row_stride, float* y, int64_t y_row_stride,
                                                  __nv_bfloat16* scratch, int64_t scratch_elements,
                                                  cudaStream_t stream);

}  // namespace k3::kernels
