// RMSNorm kernel against ref::rmsnorm, bf16 and fp32 activations, odd widths and strided rows; the fp32 rows with
// every RmsNormF32Algorithm, fp32 and bf16 outputs, in place, vector and scalar paths (widths and strides that are
// and are not multiples of 4), up to and past the row-in-registers width limit.
#include "engine/reference/basic_ops.h"
#include "gpu_harness.h"
#include "kernels/rmsnorm.h"

#include <fmt/format.h>

namespace k3::gpu_test {
namespace {

struct Case {
  int64_t rows, width, stride_pad;
};
const Case kCases[] = {{1, 7168, 0}, {3, 4093, 5}, {17, 64, 0}, {2, 1, 3},    {64, 3584, 0}, {1, 3584, 0},
                       {5, 8192, 0}, {2, 8193, 0}, {3, 7, 0},   {4, 1000, 4}, {2, 996, 2},   {1, 12, 0}};

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
    using kernels::RmsNormF32Algorithm;
    for (const RmsNormF32Algorithm algorithm :
         {RmsNormF32Algorithm::automatic, RmsNormF32Algorithm::block_per_row, RmsNormF32Algorithm::row_in_registers}) {
      const std::string label = fmt::format("{}x{} stride {} algorithm {}", c.rows, c.width, stride, int(algorithm));
      DeviceBuffer<float> dx(to_f32(p.x)), dy(c.rows * stride);
      DeviceBuffer<__nv_bfloat16> dy16(c.rows * stride);
      if (algorithm == RmsNormF32Algorithm::row_in_registers && c.width > kernels::kRmsNormRowInRegistersMaxWidth) {
        EXPECT_EQ(kernels::rmsnorm_f32(dx.get(), stride, dw.get(), 1e-5f, dy.get(), stride, c.rows, c.width, nullptr,
                                       algorithm),
                  cudaErrorInvalidValue)
            << label;
        continue;
      }
      CUDA_CHECK(kernels::rmsnorm_f32(dx.get(), stride, dw.get(), 1e-5f, dy.get(), stride, c.rows, c.width, nullptr,
                                      algorithm));
      EXPECT_LE(normalized_error(from_f32(dy.download(), c.rows, stride).leftCols(c.width), p.expected),
                tolerance_for<float>())
          << label;
      CUDA_CHECK(kernels::rmsnorm_f32_to_bf16(dx.get(), stride, dw.get(), 1e-5f, dy16.get(), stride, c.rows, c.width,
                                              nullptr, algorithm));
      EXPECT_LE(normalized_error(from_bf16(dy16.download(), c.rows, stride).leftCols(c.width), p.expected),
                tolerance_for<__nv_bfloat16>())
          << label << " (bf16 out)";
      // In place, as the engine runs the MoE latent norm: the row padding must come back untouched.
      CUDA_CHECK(kernels::rmsnorm_f32(dx.get(), stride, dw.get(), 1e-5f, dx.get(), stride, c.rows, c.width, nullptr,
                                      algorithm));
      const ref::Matrix in_place = from_f32(dx.download(), c.rows, stride);
      EXPECT_LE(normalized_error(in_place.leftCols(c.width), p.expected), tolerance_for<float>())
          << label << " (in place)";
      if (c.stride_pad > 0) {
        EXPECT_EQ(in_place.rightCols(c.stride_pad), p.x.rightCols(c.stride_pad)) << label << " (padding)";
      }
    }
  }
}

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
