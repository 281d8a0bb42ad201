// The dense GEMM case's problems (gemm_cases.cpp), shared with the plain GEMM tests beside it
// (tests/kernels/gemm_gpu_test.cpp): the shapes, random bf16 operands with their fp64 product, and one run.
#pragma once

#include "engine/runtime/gemm_cublaslt.h"
#include "tests/kernels/op_cases/op_case.h"

#include <random>
#include <vector>

namespace k3::gpu_test::gemm {

enum class Out { bf16, f32 };  // y's element type

struct Problem {
  int64_t m = 0, n = 0, k = 0, x_stride = 0, y_stride = 0;
  bool bias = false;
  float alpha = 1, beta = 0;
  ref::Matrix x, w, bias_row, y0;  // bf16-representable; x and y0 padded to their strides
  ref::Matrix expected;            // [m, n], fp64 product rounded to fp32
};

std::vector<Shape> shapes();
Problem problem(const Shape& s, std::mt19937& rng);
// fp32 accumulation over k terms against fp64: the error grows like sqrt(k).
double f32_tolerance(int64_t k);
// y of `p` through `runner` into `got` ([m, n]); the runner's status.
cudaError_t run(runtime::GemmRunner& runner, const Problem& p, Out out, ref::Matrix& got);

}  // namespace k3::gpu_test::gemm
