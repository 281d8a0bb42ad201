#include "engine/runtime/gemm_cublaslt.h"

#include "engine/runtime/cuda_check.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <map>
#include <tuple>
#include <utility>

namespace k3::runtime {

namespace {

constexpr uint32_t kMinAlignmentBytes = 16;

cudaError_t to_cuda_error(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return cudaSuccess;
    case CUBLAS_STATUS_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUBLAS_STATUS_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUBLAS_STATUS_ALLOC_FAILED: return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_EXECUTION_FAILED: return cudaErrorLaunchFailure;
    case CUBLAS_STATUS_ARCH_MISMATCH: return cudaErrorNoKernelImageForDevice;
    case CUBLAS_STATUS_NOT_INITIALIZED: return cudaErrorInitializationError;
    default: return cudaErrorUnknown;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The largest power of two ≤ 256 that divides the address (cuBLASLt picks its bias loads by the pointer's alignment).
int alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  int alignment = 1;
  while (alignment < 256 && address % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

struct PlanKey {
  int64_t m, n, k, x_row_stride, y_row_stride;
  int out_type;        // cudaDataType_t of y
  int bias_alignment;  // 0: no bias
  bool operator<(const PlanKey& o) const {
    return std::tie(m, n, k, x_row_stride, y_row_stride, out_type, bias_alignment) <
           std::tie(o.m, o.n, o.k, o.x_row_stride, o.y_row_stride, o.out_type, o.bias_alignment);
  }
  // Rows of y start this many bytes apart modulo 16: a narrow output (n < 8, e.g. one rank's 6 KDA beta heads) has
  // rows on 8- or 4-byte boundaries, and cuBLASLt is asked for kernels that need no more.
  uint32_t y_alignment() const {
    const int64_t row_bytes = y_row_stride * (out_type == CUDA_R_32F ? 4 : 2);
    uint32_t alignment = kMinAlignmentBytes;
    while (row_bytes % alignment != 0) alignment /= 2;
    return alignment;
  }
  std::string describe() const {
    return fmt::format("m={} n={} k={} x_row_stride={} y_row_stride={} y={} bias={}", m, n, k, x_row_stride,
                       y_row_stride, out_type == CUDA_R_32F ? "fp32" : "bf16", bias_alignment > 0 ? "yes" : "no");
  }
};

// One shape's descriptors and algorithm.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (y != nullptr) cublasLtMatrixLayoutDestroy(y);
    if (x != nullptr) cublasLtMatrixLayoutDestroy(x);
    if (w != nullptr) cublasLtMatrixLayoutDestroy(w);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

struct GemmRunner::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  std::string last_error;

  ~Impl() {
    plans.clear();
    if (workspace != nullptr) cudaFree(workspace);
    if (handle != nullptr) cublasLtDestroy(handle);
  }

  cudaError_t fail(cudaError_t error, std::string message) {
    last_error = std::move(message);
    return error;
  }
  cudaError_t fail(cublasStatus_t status, const char* call, const PlanKey& key) {
    return fail(to_cuda_error(status),
                fmt::format("{} failed with {} ({})", call, cublasLtGetStatusName(status), key.describe()));
  }

  // Descriptors and the heuristic's first algorithm for a new shape; host work only.
  cudaError_t make_plan(const PlanKey& key, const void* bias, std::unique_ptr<Plan>* out) {
    auto plan = std::make_unique<Plan>();
#define K3_CUBLASLT_TRY(call)                                                     \
  do {                                                                            \
    const cublasStatus_t k3_status_ = (call);                                     \
    if (k3_status_ != CUBLAS_STATUS_SUCCESS) return fail(k3_status_, #call, key); \
  } while (0)
    K3_CUBLASLT_TRY(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int32_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    K3_CUBLASLT_TRY(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
    K3_CUBLASLT_TRY(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
    if (bias != nullptr) {
      const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      K3_CUBLASLT_TRY(
          cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      K3_CUBLASLT_TRY(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    // Column-major views of the row-major operands: W [k, n] ld k, x [k, m] ld x_row_stride, y [n, m] ld y_row_stride.
    K3_CUBLASLT_TRY(cublasLtMatrixLayoutCreate(&plan->w, CUDA_R_16BF, uint64_t(key.k), uint64_t(key.n), key.k));
    K3_CUBLASLT_TRY(
        cublasLtMatrixLayoutCreate(&plan->x, CUDA_R_16BF, uint64_t(key.k), uint64_t(key.m), key.x_row_stride));
    K3_CUBLASLT_TRY(cublasLtMatrixLayoutCreate(&plan->y, static_cast<cudaDataType_t>(key.out_type), uint64_t(key.n),
                                               uint64_t(key.m), key.y_row_stride));
    cublasLtMatmulPreference_t preference = nullptr;
    K3_CUBLASLT_TRY(cublasLtMatmulPreferenceCreate(&preference));
    const uint64_t max_workspace = workspace_bytes;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                 &max_workspace, sizeof(max_workspace));
    const uint32_t y_alignment = key.y_alignment();
    for (const auto& [attribute, alignment] :
         {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, kMinAlignmentBytes},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, kMinAlignmentBytes},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, y_alignment},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, y_alignment}}) {
      if (status == CUBLAS_STATUS_SUCCESS) {
        status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof(alignment));
      }
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulAlgoGetHeuristic(handle, plan->op, plan->w, plan->x, plan->y, plan->y, preference, 1,
                                              &result, &found);
    }
    cublasLtMatmulPreferenceDestroy(preference);
    K3_CUBLASLT_TRY(status);
#undef K3_CUBLASLT_TRY
    if (found == 0) return fail(cudaErrorNotSupported, "cuBLASLt has no algorithm for " + key.describe());
    plan->algo = result.algo;
    *out = std::move(plan);
    return cudaSuccess;
  }

  cudaError_t run(const __nv_bfloat16* x, int64_t x_row_stride, const __nv_bfloat16* weight, const void* bias,
                  float alpha, float beta, void* y, int64_t y_row_stride, int64_t m, int64_t n, int64_t k,
                  cudaDataType_t out_type, size_t out_bytes, cudaStream_t stream) {
    const PlanKey key{m, n, k, x_row_stride, y_row_stride, out_type, bias != nullptr ? alignment_of(bias) : 0};
    if (m < 0 || n < 1 || k < 1 || k % 8 != 0) {
      return fail(cudaErrorInvalidValue, "GEMM needs m ≥ 0, n ≥ 1 and k a positive multiple of 8: " + key.describe());
    }
    if (x_row_stride < k || x_row_stride % 8 != 0 || y_row_stride < n) {
      return fail(cudaErrorInvalidValue,
                  "GEMM row strides must cover the rows, x's a multiple of 16 bytes: " + key.describe());
    }
    if (x == nullptr || weight == nullptr || y == nullptr || !aligned16(x) || !aligned16(weight) || !aligned16(y) ||
        (bias != nullptr && !aligned16(bias))) {
      return fail(cudaErrorInvalidValue, "GEMM operands must be non-null and 16-byte aligned: " + key.describe());
    }
    if (m == 0) return cudaSuccess;
    auto found = plans.find(key);
    if (found == plans.end()) {
      std::unique_ptr<Plan> plan;
      if (const cudaError_t error = make_plan(key, bias, &plan); error != cudaSuccess) return error;
      found = plans.emplace(key, std::move(plan)).first;
    }
    Plan& plan = *found->second;
    if (bias != nullptr) {
      const cublasStatus_t status =
          cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
      if (status != CUBLAS_STATUS_SUCCESS) return fail(status, "cublasLtMatmulDescSetAttribute(bias)", key);
    }
    const cublasStatus_t status = cublasLtMatmul(handle, plan.op, &alpha, weight, plan.w, x, plan.x, &beta, y, plan.y,
                                                 y, plan.y, &plan.algo, workspace, workspace_bytes, stream);
    if (status != CUBLAS_STATUS_SUCCESS) return fail(status, "cublasLtMatmul", key);
    return cudaGetLastError();
  }
};

GemmRunner::GemmRunner(size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  const cublasStatus_t status = cublasLtCreate(&impl_->handle);
  K3_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasLtCreate failed with {}", cublasLtGetStatusName(status));
  impl_->workspace_bytes = workspace_bytes;
  if (workspace_bytes > 0) CUDA_CHECK(cudaMalloc(&impl_->workspace, workspace_bytes));
}

GemmRunner::~GemmRunner() = default;

cudaError_t GemmRunner::bf16_to_bf16(const __nv_bfloat16* x, int64_t x_row_stride, const __nv_bfloat16* weight,
                                     const __nv_bfloat16* bias, float alpha, float beta, __nv_bfloat16* y,
                                     int64_t y_row_stride, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  return impl_->run(x, x_row_stride, weight, bias, alpha, beta, y, y_row_stride, m, n, k, CUDA_R_16BF,
                    sizeof(__nv_bfloat16), stream);
}

cudaError_t GemmRunner::bf16_to_f32(const __nv_bfloat16* x, int64_t x_row_stride, const __nv_bfloat16* weight,
                                    const float* bias, float alpha, float beta, float* y, int64_t y_row_stride,
                                    int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  return impl_->run(x, x_row_stride, weight, bias, alpha, beta, y, y_row_stride, m, n, k, CUDA_R_32F, sizeof(float),
                    stream);
}

const std::string& GemmRunner::last_error() const { return impl_->last_error; }

size_t GemmRunner::cached_plans() const { return impl_->plans.size(); }

}  // namespace k3::runtime
