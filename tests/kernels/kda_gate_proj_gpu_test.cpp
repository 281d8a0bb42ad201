// kda_gate_proj's argument checks; its comparison against the fp64 GEMM path it replaces is a case of the op table
// (tests/kernels/op_cases/kda_cases.cpp).
#include "gpu_harness.h"
#include "kernels/kda_gate_proj.h"

#include <cstdint>

namespace k3::gpu_test {
namespace {

TEST(GpuKdaGateProj, RejectsUnsupportedShapes) {
  // Argument checks come before any launch, so they hold (and run) without a device. Aligned fake pointers: the
  // kernel never dereferences them when it refuses.
  const auto* p = reinterpret_cast<const __nv_bfloat16*>(uintptr_t(256));
  auto* fa = reinterpret_cast<__nv_bfloat16*>(uintptr_t(512));
  auto* out = reinterpret_cast<float*>(uintptr_t(1024));
  struct Bad {
    int tokens, hidden, rank, projection, heads;
    int64_t x_stride;
    const char* why;
  };
  const Bad bad[] = {{0, 64, 16, 32, 2, 64, "no tokens"},        {9, 64, 16, 32, 2, 64, "tokens above 8"},
                     {1, 60, 16, 32, 2, 64, "hidden not % 8"},   {1, 64, 12, 32, 2, 64, "rank not % 8"},
                     {1, 64, 264, 32, 2, 64, "rank above 256"},  {1, 64, 16, 0, 2, 64, "no projection"},
                     {1, 64, 16, 32, 0, 64, "no heads"},         {2, 64, 16, 32, 2, 60, "x stride below hidden"},
                     {2, 64, 16, 32, 2, 68, "x stride not % 8"}, {8, 16384, 16, 32, 2, 16384, "x above shared memory"}};
  for (const Bad& c : bad) {
    EXPECT_FALSE(
        kernels::kda_gate_proj_supported(p, c.x_stride, p, p, p, c.tokens, c.hidden, c.rank, c.projection, c.heads))
        << c.why;
    EXPECT_EQ(kernels::kda_gate_proj_bf16(p, c.x_stride, p, p, p, c.tokens, c.hidden, c.rank, c.projection, c.heads, fa,
                                          out, out, nullptr),
              cudaErrorInvalidValue)
        << c.why;
  }
  EXPECT_FALSE(kernels::kda_gate_proj_supported(p + 1, 64, p, p, p, 1, 64, 16, 32, 2)) << "x not 16-byte aligned";
  EXPECT_FALSE(kernels::kda_gate_proj_supported(p, 64, p, p + 4, p, 1, 64, 16, 32, 2)) << "W_fb not 16-byte aligned";
  EXPECT_TRUE(kernels::kda_gate_proj_supported(p, 64, p, p, p, 8, 64, 16, 32, 2));
}

}  // namespace
}  // namespace k3::gpu_test
