// The KDA gated output norm's argument checks; its comparison against ref::kda_layer's step 5 is a case of the op
// table (tests/kernels/op_cases/kda_output_cases.cpp).
#include "gpu_harness.h"
#include "kernels/kda_output_gate.h"

namespace k3::gpu_test {
namespace {

constexpr float kEps = 1e-5f;  // K3 rms_norm_eps

// Argument checks come before any launch, so they hold (and run) without a device.
TEST(GpuKdaOutputGate, RejectsBadArguments) {
  static float o[64], w[64];
  static __nv_bfloat16 gate[64], out[64];
  const auto call = [&](int tokens, int heads, int d, int64_t gate_stride) {
    return kernels::kda_output_gate_bf16(o, w, gate, gate_stride, kEps, out, tokens, heads, d, nullptr);
  };
  EXPECT_EQ(call(1, 2, 0, 2), cudaErrorInvalidValue);
  EXPECT_EQ(call(1, 1, 1025, 1025), cudaErrorInvalidValue);  // one block of d threads: d ≤ 1024
  EXPECT_EQ(call(1, 0, 16, 16), cudaErrorInvalidValue);
  EXPECT_EQ(call(-1, 2, 16, 32), cudaErrorInvalidValue);
  EXPECT_EQ(call(1, 2, 16, 31), cudaErrorInvalidValue);  // gate row stride below heads·d
  EXPECT_EQ(kernels::kda_output_gate_bf16(nullptr, w, gate, 32, kEps, out, 1, 2, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_output_gate_bf16(o, nullptr, gate, 32, kEps, out, 1, 2, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_output_gate_bf16(o, w, nullptr, 32, kEps, out, 1, 2, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_output_gate_bf16(o, w, gate, 32, kEps, nullptr, 1, 2, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(0, 2, 16, 32), cudaSuccess);
  EXPECT_EQ(kernels::kda_output_gate_bf16(o, w, gate, 32, kEps, out, 1, 2, 16, nullptr,
                                          static_cast<kernels::KdaOutputGateAlgorithm>(3)),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace k3::gpu_test
