// RMSNorm's argument checks; its comparisons against ref::rmsnorm are cases of the op table
// (tests/kernels/op_cases/rmsnorm_cases.cpp).
#include "gpu_harness.h"
#include "kernels/rmsnorm.h"

namespace k3::gpu_test {
namespace {

TEST(GpuRmsNorm, F32RejectsInvalidShapes) {
  K3_REQUIRE_GPU();
  DeviceBuffer<float> x(64), y(64);
  DeviceBuffer<__nv_bfloat16> w(64);
  EXPECT_EQ(kernels::rmsnorm_f32(x.get(), 8, w.get(), 1e-5f, y.get(), 8, 1, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::rmsnorm_f32(x.get(), 8, w.get(), 1e-5f, y.get(), 8, -1, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::rmsnorm_f32(x.get(), 8, w.get(), 1e-5f, y.get(), 8, 0, 8, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
