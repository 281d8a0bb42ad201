// Dense GEMM through cuBLASLt beside its op cases (tests/kernels/op_cases/gemm_cases.cpp: every shape against a CPU
// fp64 product): one plan per shape and output type in one runner, the alignment rule refused with a message, a warmed
// shape replayed from a CUDA graph.
#include "engine/runtime/gemm_cublaslt.h"
#include "gpu_harness.h"
#include "tests/kernels/op_cases/gemm_data.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

namespace k3::gpu_test {
namespace {

using namespace gemm;

// One runner keys a plan per shape and output type: every case shape through both outputs caches that many plans,
// and each result still matches (a plan reused for the wrong shape would not).
TEST(GpuGemm, OnePlanPerShapeAndOutput) {
  std::vector<Problem> problems;
  for (const Shape& s : shapes()) {
    std::mt19937 rng = case_rng("gemm_cublaslt", s);
    problems.push_back(problem(s, rng));
  }
  K3_REQUIRE_GPU();
  runtime::GemmRunner runner;
  for (const Problem& p : problems) {
    for (const Out out : {Out::bf16, Out::f32}) {
      ref::Matrix got;
      ASSERT_EQ(run(runner, p, out, got), cudaSuccess) << runner.last_error();
      EXPECT_LE(normalized_error(got, p.expected),
                out == Out::bf16 ? tolerance_for<__nv_bfloat16>() : f32_tolerance(p.k))
          << "m " << p.m << " n " << p.n << " k " << p.k;
    }
  }
  EXPECT_EQ(runner.cached_plans(), 2 * problems.size());
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
  const Bad bad[] = {{12, 16, 12, 0, "multiple of 8"},
                     {16, 0, 16, 0, "n ≥ 1"},
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
  const Shape s = shape({{"m", 8},
                         {"n", 896},
                         {"k", 1024},
                         {"x_pad", 0},
                         {"y_pad", 0},
                         {"bias", 0},
                         {"alpha_milli", 1000},
                         {"beta_milli", 0}});
  const Problem p = problem(s, rng);
  const Problem& c = p;
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
