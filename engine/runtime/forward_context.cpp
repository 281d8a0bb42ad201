#include "engine/runtime/forward_context.h"

#include "core/error.h"
#include "engine/runtime/op_range_listener.h"
#include "kernels/situ_glu.h"

#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

namespace k3::runtime {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

OpRange::OpRange(const OpRef& op) : listener_(op_range_listener()) {
  const std::string name = op.name();
  if (listener_) listener_->push(name);  // counter mode (op_range_listener.h); null otherwise
  nvtxRangePushA(name.c_str());
}

OpRange::~OpRange() {
  nvtxRangePop();
  if (listener_) listener_->pop();
}

void ForwardContext::gemm(const bf16* x, int64_t x_stride, const bf16* w, bf16* y, int64_t y_stride, int64_t m,
                          int64_t n, int64_t k, float beta) const {
  if (gemm_runner.bf16_to_bf16(x, x_stride, w, nullptr, 1.0f, beta, y, y_stride, m, n, k, stream) != cudaSuccess) {
    throw Error(fmt::format("GEMM [{} x {}] x [{} x {}]ᵀ: {}", m, k, n, k, gemm_runner.last_error()));
  }
}

void ForwardContext::gemm_f32(const bf16* x, int64_t x_stride, const bf16* w, float* y, int64_t y_stride, int64_t m,
                              int64_t n, int64_t k) const {
  if (gemm_runner.bf16_to_f32(x, x_stride, w, nullptr, 1.0f, 0.0f, y, y_stride, m, n, k, stream) != cudaSuccess) {
    throw Error(fmt::format("GEMM [{} x {}] x [{} x {}]ᵀ (fp32 out): {}", m, k, n, k, gemm_runner.last_error()));
  }
}

void ForwardContext::glu(const float* gate_up, int64_t stride, bf16* out, int64_t rows, int64_t intermediate,
                         const char* what) const {
  const ModelConfig& c = config;
  const cudaError_t status =
      c.activation == Activation::situ
          ? kernels::situ_glu_bf16(gate_up, stride, float(c.situ_beta), float(c.situ_linear_beta), out, intermediate,
                                   rows, intermediate, stream)
          : kernels::silu_glu_bf16(gate_up, stride, out, intermediate, rows, intermediate, stream);
  check(status, what);
}

}  // namespace k3::runtime
