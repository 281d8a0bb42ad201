// RMSNorm kernel against ref::rmsnorm, bf16 and fp32 activations, odd widths and strided rows.
#include "engine/reference/basic_ops.h"
#include "gpu_harness.h"
#include "kernels/rmsnorm.h"

namespace k3::gpu_test {
namespace {

struct Case {
  int64_t rows, width, stride_pad;
};
const Case kCases[] = {{1, 7168, 0}, {3, 4093, 5}, {17, 64, 0}, {2, 1, 3}, {64, 3584, 0}};

TEST(GpuRmsNorm, MatchesReference) {
  std::mt19937 rng(20261130);
  struct Prepared {
    Case c;
    ref::Matrix x, w, expected;
  };
  std::vector<Prepared> cases;  // every CPU reference first: that side runs without a GPU too
  for (const Case& c : kCases) {
    const int64_t stride = c.width + c.stride_pad;
    Prepared p{c, round_to_bf16(random_matrix(c.rows, stride, rng, -3.0f, 3.0f)),
               round_to_bf16(random_matrix(1, c.width, rng, 0.5f, 1.5f)), {}};
    p.expected = ref::rmsnorm(p.x.leftCols(c.width), p.w.row(0).transpose(), 1e-5);
    ASSERT_TRUE(p.expected.allFinite());
    cases.push_back(std::move(p));
  }
  K3_REQUIRE_GPU();
  for (const Prepared& p : cases) {
    const Case& c = p.c;
    const int64_t stride = c.width + c.stride_pad;
    DeviceBuffer<__nv_bfloat16> dw(to_bf16(p.w));
    {
      DeviceBuffer<__nv_bfloat16> dx(to_bf16(p.x)), dy(c.rows * stride);
      CUDA_CHECK(kernels::rmsnorm_bf16(dx.get(), stride, dw.get(), 1e-5f, dy.get(), stride, c.rows, c.width, nullptr));
      const ref::Matrix got = from_bf16(dy.download(), c.rows, stride).leftCols(c.width);
      EXPECT_LE(normalized_error(got, p.expected), tolerance_for<__nv_bfloat16>()) << c.rows << "x" << c.width;
    }
    {
      DeviceBuffer<float> dx(to_f32(p.x)), dy(c.rows * stride);
      CUDA_CHECK(kernels::rmsnorm_f32(dx.get(), stride, dw.get(), 1e-5f, dy.get(), stride, c.rows, c.width, nullptr));
      const ref::Matrix got = from_f32(dy.download(), c.rows, stride).leftCols(c.width);
      EXPECT_LE(normalized_error(got, p.expected), tolerance_for<float>()) << c.rows << "x" << c.width;
    }
  }
}

}  // namespace
}  // namespace k3::gpu_test
