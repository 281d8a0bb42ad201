// SiTU-GLU and SiLU-GLU on a fused gate|up row against ref::situ and ref::silu: fp32 and bf16 inputs, bf16 output,
// K3's widths and odd ones, strided rows, inputs wide enough to reach both tanh saturations.
#include "engine/reference/basic_ops.h"
#include "gpu_harness.h"
#include "kernels/situ_glu.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace k3::gpu_test {
namespace {

constexpr float kBeta = 4.0f, kLinearBeta = 25.0f;

struct Case {
  int64_t tokens, intermediate, in_pad, out_pad;
};
// Four-element groups throughout (1, 3072), (17, 6144, padded input rows), (2, 33792) and more rows than one grid
// column holds (70000); one element at a time where a width or stride is not a multiple of four.
const Case kCases[] = {{1, 3072, 0, 0},  {3, 37, 5, 3},     {17, 6144, 8, 0}, {64, 1, 1, 1},
                       {2, 33792, 0, 0}, {70000, 12, 4, 0}, {5, 64, 2, 0}};

TEST(GpuSituGlu, MatchesReference) {
  std::mt19937 rng(20261209);
  struct Prepared {
    Case c;
    ref::Matrix gate_up, situ, silu;
  };
  std::vector<Prepared> cases;
  for (const Case& c : kCases) {
    const int64_t in_stride = 2 * c.intermediate + c.in_pad;
    Prepared p{c, round_to_bf16(random_matrix(c.tokens, in_stride, rng, -30.0f, 30.0f)), {}, {}};
    p.situ.resize(c.tokens, c.intermediate);
    p.silu.resize(c.tokens, c.intermediate);
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t i = 0; i < c.intermediate; ++i) {
        const float a = p.gate_up(t, i), u = p.gate_up(t, c.intermediate + i);
        p.situ(t, i) = ref::situ(a, u, kBeta, kLinearBeta);
        p.silu(t, i) = ref::silu(a) * u;
      }
    }
    ASSERT_TRUE(p.situ.allFinite() && p.silu.allFinite());
    cases.push_back(std::move(p));
  }
  K3_REQUIRE_GPU();
  for (const Prepared& p : cases) {
    const Case& c = p.c;
    const int64_t in_stride = 2 * c.intermediate + c.in_pad, out_stride = c.intermediate + c.out_pad;
    const std::string label = fmt::format("T={} I={}", c.tokens, c.intermediate);
    DeviceBuffer<float> in_f32(to_f32(p.gate_up));
    DeviceBuffer<__nv_bfloat16> in_bf16(to_bf16(p.gate_up));
    const auto check = [&](DeviceBuffer<__nv_bfloat16>& out, const ref::Matrix& expected, const char* what) {
      const ref::Matrix got = from_bf16(out.download(), c.tokens, out_stride).leftCols(c.intermediate);
      EXPECT_LE(normalized_error(got, expected), tolerance_for<__nv_bfloat16>()) << label << " " << what;
    };
    {
      DeviceBuffer<__nv_bfloat16> out(c.tokens * out_stride);
      CUDA_CHECK(kernels::situ_glu_bf16(in_f32.get(), in_stride, kBeta, kLinearBeta, out.get(), out_stride, c.tokens,
                                        c.intermediate, nullptr));
      check(out, p.situ, "situ, fp32 in");
    }
    {
      DeviceBuffer<__nv_bfloat16> out(c.tokens * out_stride);
      CUDA_CHECK(kernels::situ_glu_bf16(in_bf16.get(), in_stride, kBeta, kLinearBeta, out.get(), out_stride, c.tokens,
                                        c.intermediate, nullptr));
      check(out, p.situ, "situ, bf16 in");
    }
    {
      DeviceBuffer<__nv_bfloat16> out(c.tokens * out_stride);
      CUDA_CHECK(kernels::silu_glu_bf16(in_f32.get(), in_stride, out.get(), out_stride, c.tokens, c.intermediate,
                                        nullptr));
      check(out, p.silu, "silu, fp32 in");
    }
    {
      DeviceBuffer<__nv_bfloat16> out(c.tokens * out_stride);
      CUDA_CHECK(kernels::silu_glu_bf16(in_bf16.get(), in_stride, out.get(), out_stride, c.tokens, c.intermediate,
                                        nullptr));
      check(out, p.silu, "silu, bf16 in");
    }
  }
}

TEST(GpuSituGlu, FourElementGroupsEqualOneElementAtATimeBitForBit) {
  // The same rows laid out with a stride of 2I (four-element groups) and of 2I + 1 (one element at a time) must give
  // the same bf16 outputs, every bit: both paths run the same arithmetic per element.
  constexpr int64_t kTokens = 9, kIntermediate = 3072;
  std::mt19937 rng(20261130);
  const ref::Matrix rows = round_to_bf16(random_matrix(kTokens, 2 * kIntermediate, rng, -30.0f, 30.0f));
  ref::Matrix padded = ref::Matrix::Zero(kTokens, 2 * kIntermediate + 1);
  padded.leftCols(2 * kIntermediate) = rows;
  K3_REQUIRE_GPU();
  DeviceBuffer<float> grouped(to_f32(rows)), single(to_f32(padded));
  DeviceBuffer<__nv_bfloat16> out_grouped(kTokens * kIntermediate), out_single(kTokens * kIntermediate);
  for (const bool situ : {true, false}) {
    const auto run = [&](const DeviceBuffer<float>& in, int64_t stride, DeviceBuffer<__nv_bfloat16>& out) {
      return situ ? kernels::situ_glu_bf16(in.get(), stride, kBeta, kLinearBeta, out.get(), kIntermediate, kTokens,
                                           kIntermediate, nullptr)
                  : kernels::silu_glu_bf16(in.get(), stride, out.get(), kIntermediate, kTokens, kIntermediate, nullptr);
    };
    CUDA_CHECK(run(grouped, 2 * kIntermediate, out_grouped));
    CUDA_CHECK(run(single, 2 * kIntermediate + 1, out_single));
    const std::vector<__nv_bfloat16> a = out_grouped.download(), b = out_single.download();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(__nv_bfloat16)), 0) << (situ ? "situ" : "silu");
  }
}

TEST(GpuSituGlu, RejectsInvalidArguments) {
  K3_REQUIRE_GPU();
  DeviceBuffer<float> in(64);
  DeviceBuffer<__nv_bfloat16> out(64);
  EXPECT_EQ(kernels::situ_glu_bf16(in.get(), 8, 0.0f, kLinearBeta, out.get(), 4, 1, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::situ_glu_bf16(in.get(), 7, kBeta, kLinearBeta, out.get(), 4, 1, 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::silu_glu_bf16(in.get(), 8, out.get(), 3, 1, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::silu_glu_bf16(in.get(), 8, out.get(), 4, 0, 4, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
