// gemm_cublaslt: the engine's dense GEMMs through cuBLASLt, in its row-major convention:
//   y[m, n] = alpha · Σ_k x[m, k] · W[n, k] + beta · y[m, n] (+ bias[n])
// x bf16 [m, k] (row stride x_row_stride); W bf16 [n, k] dense (a PyTorch/safetensors Linear weight, row-major);
// y bf16 or fp32 [m, n] (row stride y_row_stride); fp32 accumulation and scaling (CUBLAS_COMPUTE_32F). beta == 0
// never reads y. bias is optional (null = none) and has y's element type (cuBLASLt's bias epilogue takes the
// output type: bf16 for bf16_to_bf16, fp32 for bf16_to_f32).
// Alignment rule (checked; a violation returns cudaErrorInvalidValue and names the rule in last_error()): x, W, y
// and bias start on 16-byte boundaries; k is a multiple of 8 (n any ≥ 1); x_row_stride is a multiple of 8 and ≥ k;
// y_row_stride ≥ n. m is any size ≥ 0 (0 does nothing). y's rows may sit on 4- or 8-byte boundaries (one rank's
// 6 beta heads: n = y_row_stride = 6); cuBLASLt is then asked for kernels with that output alignment.
// Row-major y = x·Wᵀ is column-major yᵀ = W_cm^T · x_cm, so the call is cuBLASLt's "TN" GEMM with A = W
// ([k, n] column-major, transposed), B = x ([k, m] column-major), D = y ([n, m] column-major).
// Versions: gemm_cublaslt_heuristic — the first algorithm of cublasLtMatmulAlgoGetHeuristic for the shape, with
// 16-byte minimum alignments (y's: what its row stride allows) and the runner's workspace; chosen once per (m, n, k,
// strides, output type, bias) and cached with its descriptors. GemmRunner owns the cuBLASLt handle (for the device
// current at construction) and the workspace; after a shape has run once its run is graph-capturable (warm every shape
// before capture: the first run of a shape builds its plan on the host). One runner serves one stream at a time (the
// workspace is shared) and one host thread. Errors: cuBLAS statuses map to cudaError_t (INVALID_VALUE →
// cudaErrorInvalidValue, NOT_SUPPORTED or no algorithm → cudaErrorNotSupported, ALLOC_FAILED →
// cudaErrorMemoryAllocation, EXECUTION_FAILED → cudaErrorLaunchFailure, ARCH_MISMATCH →
// cudaErrorNoKernelImageForDevice, others → cudaErrorUnknown) and last_error() keeps the cuBLAS call, its status name
// and the shape; the constructor throws k3::Error naming the cuBLAS or CUDA status.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace k3::runtime {

class GemmRunner {
 public:
  explicit GemmRunner(size_t workspace_bytes = 32 << 20);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  cudaError_t bf16_to_bf16(const __nv_bfloat16* x, int64_t x_row_stride, const __nv_bfloat16* weight,
                           const __nv_bfloat16* bias, float alpha, float beta, __nv_bfloat16* y, int64_t y_row_stride,
                           int64_t m, int64_t n, int64_t k, cudaStream_t stream);
  cudaError_t bf16_to_f32(const __nv_bfloat16* x, int64_t x_row_stride, const __nv_bfloat16* weight, const float* bias,
                          float alpha, float beta, float* y, int64_t y_row_stride, int64_t m, int64_t n, int64_t k,
                          cudaStream_t stream);

  // What the last failed call reported ("" when none failed).
  const std::string& last_error() const;
  // Shapes planned so far.
  size_t cached_plans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::runtime
