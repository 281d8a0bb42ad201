// Dense GEMM through cuBLASLt against a CPU fp64 product: y = alpha · x Wᵀ + beta · y (+ bias) with x, W in bf16,
// y in bf16 or fp32, m = 1, 3, 17 over n, k multiples of 8 (the router's 896 × 7168 among them), strided rows; the
// alignment rule refused with a message; beta = 0 never reading the (NaN-poisoned) y; a warmed shape replayed
// from a CUDA graph.
#include "engine/runtime/gemm_cublaslt.h"
#include "gpu_harness.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

namespace k3::gpu_test {
namespace {

struct Case {
  int64_t m, n, k, x_pad, y_pad;  // pads: extra elements per row, multiples of 8
  bool bias;
  float alpha, beta;
};
const Case kCases[] = {
    {1, 40, 72, 0, 0, false, 1.0f, 0.0f},      {3, 264, 1032, 8, 8, true, 1.0f, 0.0f},
    {17, 896, 2048, 0, 0, false, 1.0f, 0.0f},  {17, 40, 72, 16, 8, true, 1.5f, 0.5f},
    {3, 896, 7168, 0, 0, false, 1.0f, 0.0f},   {1, 1024, 512, 0, 8, true, -0.5f, 1.0f},
};

// fp32 accumulation over k terms against fp64: the error grows like sqrt(k).
double f32_tolerance(int64_t k) { return tolerance_for<float>() * std::max(1.0, std::sqrt(double(k) / 2048.0)); }

struct Prepared {
  Case c;
  ref::Matrix x, w, bias, y0;  // bf16-representable; x and y0 padded to their strides
  ref::Matrix expected;        // [m, n]
};

Prepared prepare(const Case& c, std::mt19937& rng) {
  Prepared p{c, round_to_bf16(random_matrix(c.m, c.k + c.x_pad, rng)), round_to_bf16(random_matrix(c.n, c.k, rng)),
             round_to_bf16(random_matrix(1, c.n, rng)), round_to_bf16(random_matrix(c.m, c.n + c.y_pad, rng)), {}};
  ref::MatrixD y = double(c.alpha) * p.x.leftCols(c.k).cast<double>() * p.w.cast<double>().transpose();
  if (c.beta != 0.0f) y += double(c.beta) * p.y0.leftCols(c.n).cast<double>();
  if (c.bias) y.rowwise() += p.bias.row(0).cast<double>();
  p.expected = y.cast<float>();
  return p;
}

TEST(GpuGemm, MatchesFp64Product) {
  std::mt19937 rng(20261215);
  std::vector<Prepared> cases;
  for (const Case& c : kCases) cases.push_back(prepare(c, rng));
  for (const Prepared& p : cases) ASSERT_TRUE(p.expected.allFinite());
  K3_REQUIRE_GPU();
  runtime::GemmRunner gemm;
  for (const Prepared& p : cases) {
    const Case& c = p.c;
    const int64_t x_stride = c.k + c.x_pad, y_stride = c.n + c.y_pad;
    const std::string label = fmt::format("m={} n={} k={} bias={} alpha={} beta={}", c.m, c.n, c.k, c.bias, c.alpha,
                                          c.beta);
    DeviceBuffer<__nv_bfloat16> dx(to_bf16(p.x)), dw(to_bf16(p.w)), dbias_bf16(to_bf16(p.bias));
    DeviceBuffer<float> dbias_f32(to_f32(p.bias));
    {
      DeviceBuffer<__nv_bfloat16> dy(c.m * y_stride);  // NaN-poisoned: beta = 0 must not read it
      if (c.beta != 0.0f) dy.upload(to_bf16(p.y0));
      ASSERT_EQ(gemm.bf16_to_bf16(dx.get(), x_stride, dw.get(), c.bias ? dbias_bf16.get() : nullptr, c.alpha, c.beta,
                                  dy.get(), y_stride, c.m, c.n, c.k, nullptr),
                cudaSuccess)
          << label << ": " << gemm.last_error();
      const ref::Matrix got = from_bf16(dy.download(), c.m, y_stride).leftCols(c.n);
      EXPECT_LE(normalized_error(got, p.expected), tolerance_for<__nv_bfloat16>()) << label << " bf16 out";
    }
    {
      DeviceBuffer<float> dy(c.m * y_stride);
      if (c.beta != 0.0f) dy.upload(to_f32(p.y0));
      ASSERT_EQ(gemm.bf16_to_f32(dx.get(), x_stride, dw.get(), c.bias ? dbias_f32.get() : nullptr, c.alpha, c.beta,
                                 dy.get(), y_stride, c.m, c.n, c.k, nullptr),
                cudaSuccess)
          << label << ": " << gemm.last_error();
      const ref::Matrix got = from_f32(dy.download(), c.m, y_stride).leftCols(c.n);
      EXPECT_LE(normalized_error(got, p.expected), f32_tolerance(c.k)) << label << " fp32 out";
    }
  }
  EXPECT_EQ(gemm.cached_plans(), 2 * std::size(kCases));
}

TEST(GpuGemm, RefusesShapesOutsideTheAlignmentRule) {
  K3_REQUIRE_GPU();
  runtime::GemmRunner gemm(0);
  DeviceBuffer<__nv_bfloat16> x(64 * 64), w(64 * 64), y(64 * 64);
  struct Bad {
    int64_t x_stride, n, k;
    int x_offset;
    const char* rule;
  };
  const Bad bad[] = {{12, 16, 12, 0, "multiples of 8"},
                     {16, 20, 16, 0, "multiples of 8"},
                     {20, 16, 16, 0, "row strides"},
                     {16, 16, 16, 1, "16-byte aligned"}};
  for (const Bad& b : bad) {
    EXPECT_EQ(gemm.bf16_to_bf16(x.get() + b.x_offset, b.x_stride, w.get(), nullptr, 1.0f, 0.0f, y.get(), 32, 2, b.n,
                                b.k, nullptr),
              cudaErrorInvalidValue)
        << b.rule;
    EXPECT_NE(gemm.last_error().find(b.rule), std::string::npos) << gemm.last_error();
  }
  EXPECT_EQ(gemm.bf16_to_bf16(x.get(), 16, w.get(), nullptr, 1.0f, 0.0f, y.get(), 16, 0, 16, 16, nullptr),
            cudaSuccess);  // m = 0 does nothing
  EXPECT_EQ(gemm.cached_plans(), 0u);
}

TEST(GpuGemm, WarmedShapeReplaysFromAGraph) {
  std::mt19937 rng(20261216);
  const Case c{8, 896, 1024, 0, 0, false, 1.0f, 0.0f};
  const Prepared p = prepare(c, rng);
  K3_REQUIRE_GPU();
  runtime::GemmRunner gemm;
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(p.x)), dw(to_bf16(p.w));
  DeviceBuffer<float> dy(c.m * c.n);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  CUDA_CHECK(gemm.bf16_to_f32(dx.get(), c.k, dw.get(), nullptr, 1.0f, 0.0f, dy.get(), c.n, c.m, c.n, c.k, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaMemset(dy.get(), 0xFF, c.m * c.n * sizeof(float)));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(gemm.bf16_to_f32(dx.get(), c.k, dw.get(), nullptr, 1.0f, 0.0f, dy.get(), c.n, c.m, c.n, c.k, stream));
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_LE(normalized_error(from_f32(dy.download(), c.m, c.n), p.expected), f32_tolerance(c.k));
  EXPECT_EQ(gemm.cached_plans(), 1u);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace k3::gpu_test
