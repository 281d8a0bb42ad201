// The elementwise glue ops beside their op cases (tests/kernels/op_cases/elementwise_cases.cpp: add, sigmoid gate,
// convert and increment against CPU loops): argument rejection.
#include "gpu_harness.h"
#include "kernels/elementwise.h"

#include <cstdint>

namespace k3::gpu_test {
namespace {

// Argument checks come before any launch, so they hold (and run) without a device.
TEST(GpuElementwise, RejectsBadArguments) {
  static __nv_bfloat16 a[8], b[8], out[8];
  static float f[8];
  static int32_t values[8];
  EXPECT_EQ(kernels::add_bf16(a, b, out, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::add_bf16(nullptr, b, out, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::add_bf16(a, nullptr, out, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::add_bf16(a, b, nullptr, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::add_bf16(nullptr, nullptr, nullptr, 0, nullptr), cudaSuccess);

  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, b, 4, out, 2, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, b, 3, out, 2, 4, nullptr), cudaErrorInvalidValue);  // stride < width
  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, b, 4, out, -1, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(nullptr, b, 4, out, 2, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, nullptr, 4, out, 2, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, b, 4, nullptr, 2, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(nullptr, nullptr, 4, nullptr, 0, 4, nullptr), cudaSuccess);

  EXPECT_EQ(kernels::convert_f32_to_bf16(f, out, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::convert_f32_to_bf16(nullptr, out, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::convert_f32_to_bf16(f, nullptr, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::convert_f32_to_bf16(nullptr, nullptr, 0, nullptr), cudaSuccess);

  EXPECT_EQ(kernels::increment_i32(values, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::increment_i32(nullptr, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::increment_i32(nullptr, 0, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
