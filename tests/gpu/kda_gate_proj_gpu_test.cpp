// kda_gate_proj against a CPU computation in fp64 of the GEMM path it replaces: fa = bf16(x · W_faᵀ),
// f = fa · W_fbᵀ (fp32), b = x · W_bᵀ (fp32), on fresh random bf16 inputs at odd sizes and K3's.
#include "gpu_harness.h"
#include "kernels/kda_gate_proj.h"

#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

using Eigen::Index;

struct GateProjCase {
  int tokens, hidden, rank, projection, heads;
  int64_t x_stride;
};
// K3 at 1 and 8 tokens; odd sizes: rank 72 (9 chunks: groups of 16 lanes with 7 idle), rank 256 (32-lane groups),
// rank 8 (one lane per row), heads and projections that leave partial blocks, rows of x with padding.
const GateProjCase kCases[] = {{1, 7168, 128, 12288, 96, 7168}, {8, 7168, 128, 12288, 96, 7168},
                               {3, 200, 24, 100, 5, 208},       {3, 96, 72, 130, 9, 96},
                               {2, 1032, 256, 515, 3, 1040},    {1, 8, 8, 1, 1, 8},
                               {7, 520, 40, 333, 7, 536}};

std::string describe(const GateProjCase& c) {
  return "tokens " + std::to_string(c.tokens) + " hidden " + std::to_string(c.hidden) + " rank " +
         std::to_string(c.rank) + " projection " + std::to_string(c.projection) + " heads " + std::to_string(c.heads);
}

struct GateProjData {
  GateProjCase c;
  ref::Matrix x_padded, w_fa, w_fb, w_b;  // bf16 values; x [tokens, x_stride]
  ref::Matrix fa, f, b;                   // reference
};

// Products in fp64 of the bf16-valued inputs; fa rounded once to bf16 as the GEMM's bf16 output is.
ref::Matrix product(const ref::Matrix& a, const ref::Matrix& w) {
  return (a.cast<double>() * w.cast<double>().transpose()).cast<float>();
}

GateProjData make_case(const GateProjCase& c, std::mt19937& rng) {
  GateProjData d{c,
                 round_to_bf16(random_matrix(c.tokens, Index(c.x_stride), rng)),
                 round_to_bf16(random_matrix(c.rank, c.hidden, rng, -0.05f, 0.05f)),
                 round_to_bf16(random_matrix(c.projection, c.rank, rng, -0.2f, 0.2f)),
                 round_to_bf16(random_matrix(c.heads, c.hidden, rng, -0.05f, 0.05f)),
                 {},
                 {},
                 {}};
  const ref::Matrix x = d.x_padded.leftCols(c.hidden);
  d.fa = round_to_bf16(product(x, d.w_fa));
  d.f = product(d.fa, d.w_fb);
  d.b = product(x, d.w_b);
  return d;
}

TEST(GpuKdaGateProj, MatchesTheGemmPath) {
  std::mt19937 rng(20261130);
  std::vector<GateProjData> cases;
  for (const GateProjCase& c : kCases) {
    cases.push_back(make_case(c, rng));
    // CPU side: the outputs are far from zero, so a kernel that wrote nothing (or zeros) fails.
    EXPECT_GT(cases.back().f.norm(), 1e-3) << describe(c);
    EXPECT_GT(cases.back().b.norm(), 1e-3) << describe(c);
  }

  K3_REQUIRE_GPU();
  for (const GateProjData& d : cases) {
    const GateProjCase& c = d.c;
    DeviceBuffer<__nv_bfloat16> x(to_bf16(d.x_padded)), w_fa(to_bf16(d.w_fa)), w_fb(to_bf16(d.w_fb)),
        w_b(to_bf16(d.w_b));
    DeviceBuffer<__nv_bfloat16> fa(size_t(c.tokens) * c.rank);
    DeviceBuffer<float> f(size_t(c.tokens) * c.projection), b(size_t(c.tokens) * c.heads);
    ASSERT_TRUE(kernels::kda_gate_proj_supported(x.get(), c.x_stride, w_fa.get(), w_fb.get(), w_b.get(), c.tokens,
                                                 c.hidden, c.rank, c.projection, c.heads))
        << describe(c);
    CUDA_CHECK(kernels::kda_gate_proj_bf16(x.get(), c.x_stride, w_fa.get(), w_fb.get(), w_b.get(), c.tokens, c.hidden,
                                           c.rank, c.projection, c.heads, fa.get(), f.get(), b.get(), nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());
    const ref::Matrix got_fa = from_bf16(fa.download(), c.tokens, c.rank);
    const ref::Matrix got_f = from_f32(f.download(), c.tokens, c.projection);
    const ref::Matrix got_b = from_f32(b.download(), c.tokens, c.heads);
    // fa may differ from the fp64 rounding by one bf16 step where the fp32 sum lands beside a rounding boundary;
    // f is checked at fp32 precision against the fa the kernel wrote, and at bf16 precision end to end.
    EXPECT_LE(normalized_error(got_fa, d.fa), tolerance_for<__nv_bfloat16>()) << "fa " << describe(c);
    EXPECT_LE(normalized_error(got_f, product(got_fa, d.w_fb)), tolerance_for<float>()) << "f " << describe(c);
    EXPECT_LE(normalized_error(got_f, d.f), tolerance_for<__nv_bfloat16>()) << "f end to end " << describe(c);
    EXPECT_LE(normalized_error(got_b, d.b), tolerance_for<float>()) << "b " << describe(c);
  }
}

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
