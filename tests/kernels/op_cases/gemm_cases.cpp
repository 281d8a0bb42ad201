// Dense GEMM through cuBLASLt (engine/runtime/gemm_cublaslt.h) against a CPU fp64 product: y = alpha · x Wᵀ + beta · y
// (+ bias) with x, W in bf16 and y in bf16 or fp32 (the variants), m = 1, 3, 17 over k multiples of 8 (the
// router's 896 × 7168 among them, and narrow outputs: one TP16 rank's 6 beta heads, n = 5 rows on 2-byte
// boundaries), strided rows; beta = 0 never reading the (NaN-poisoned) y.
#include "engine/runtime/gemm_cublaslt.h"
#include "tests/kernels/op_cases/cases.h"
#include "tests/kernels/op_cases/gemm_data.h"

#include <cmath>

namespace k3::gpu_test {
namespace gemm {

double f32_tolerance(int64_t k) { return tolerance_for<float>() * std::max(1.0, std::sqrt(double(k) / 2048.0)); }

std::vector<Shape> shapes() {
  // m, n, k, x_pad (a multiple of 8), y_pad (extra elements per row), bias, alpha and beta in thousandths
  const int64_t dims[][8] = {
      {1, 40, 72, 0, 0, 0, 1000, 0},     {3, 264, 1032, 8, 8, 1, 1000, 0}, {17, 896, 2048, 0, 0, 0, 1000, 0},
      {17, 40, 72, 16, 8, 1, 1500, 500}, {3, 896, 7168, 0, 0, 0, 1000, 0}, {1, 1024, 512, 0, 8, 1, -500, 1000},
      {17, 6, 7168, 0, 0, 0, 1000, 0},   {3, 5, 72, 8, 0, 1, 1000, 500},
  };
  std::vector<Shape> out;
  for (const auto& d : dims) {
    out.push_back(shape({{"m", d[0]},
                         {"n", d[1]},
                         {"k", d[2]},
                         {"x_pad", d[3]},
                         {"y_pad", d[4]},
                         {"bias", d[5]},
                         {"alpha_milli", d[6]},
                         {"beta_milli", d[7]}}));
  }
  return out;
}

Problem problem(const Shape& s, std::mt19937& rng) {
  Problem p;
  p.m = s["m"], p.n = s["n"], p.k = s["k"];
  p.x_stride = p.k + s["x_pad"], p.y_stride = p.n + s["y_pad"];
  p.bias = s["bias"] != 0;
  p.alpha = float(s["alpha_milli"]) / 1000.0f, p.beta = float(s["beta_milli"]) / 1000.0f;
  p.x = round_to_bf16(random_matrix(p.m, p.x_stride, rng));
  p.w = round_to_bf16(random_matrix(p.n, p.k, rng));
  p.bias_row = round_to_bf16(random_matrix(1, p.n, rng));
  p.y0 = round_to_bf16(random_matrix(p.m, p.y_stride, rng));
  ref::MatrixD y = double(p.alpha) * p.x.leftCols(p.k).cast<double>() * p.w.cast<double>().transpose();
  if (p.beta != 0.0f) y += double(p.beta) * p.y0.leftCols(p.n).cast<double>();
  if (p.bias) y.rowwise() += p.bias_row.row(0).cast<double>();
  p.expected = y.cast<float>();
  return p;
}

cudaError_t run(runtime::GemmRunner& runner, const Problem& p, Out out, ref::Matrix& got) {
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(p.x)), dw(to_bf16(p.w)), dbias_bf16(to_bf16(p.bias_row));
  DeviceBuffer<float> dbias_f32(to_f32(p.bias_row));
  cudaError_t status;
  if (out == Out::bf16) {
    DeviceBuffer<__nv_bfloat16> dy(size_t(p.m * p.y_stride));  // NaN-poisoned: beta = 0 must not read it
    if (p.beta != 0.0f) dy.upload(to_bf16(p.y0));
    status = runner.bf16_to_bf16(dx.get(), p.x_stride, dw.get(), p.bias ? dbias_bf16.get() : nullptr, p.alpha, p.beta,
                                 dy.get(), p.y_stride, p.m, p.n, p.k, nullptr);
    if (status == cudaSuccess) got = from_bf16(dy.download(), p.m, p.y_stride).leftCols(p.n);
  } else {
    DeviceBuffer<float> dy(size_t(p.m * p.y_stride));
    if (p.beta != 0.0f) dy.upload(to_f32(p.y0));
    status = runner.bf16_to_f32(dx.get(), p.x_stride, dw.get(), p.bias ? dbias_f32.get() : nullptr, p.alpha, p.beta,
                                dy.get(), p.y_stride, p.m, p.n, p.k, nullptr);
    if (status == cudaSuccess) got = from_f32(dy.download(), p.m, p.y_stride).leftCols(p.n);
  }
  return status;
}

}  // namespace gemm

namespace {

OpCase gemm_case() {
  OpCase c{"gemm_cublaslt", OpKind::gemm};
  c.shapes = gemm::shapes();
  c.variants = {variant(gemm::Out::bf16, "bf16_out"), variant(gemm::Out::f32, "f32_out")};
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const gemm::Problem p = gemm::problem(s, rng);
    cpu.expect(p.expected.allFinite(), "reference finite");
    return [p](const Variant& v, Checks& gpu) {
      runtime::GemmRunner runner;
      ref::Matrix got;
      const auto out = algorithm_of<gemm::Out>(v);
      const cudaError_t status = gemm::run(runner, p, out, got);
      gpu.expect(status == cudaSuccess, "accepted", runner.last_error());
      if (status != cudaSuccess) return;
      gpu.near("y", normalized_error(got, p.expected),
               out == gemm::Out::bf16 ? tolerance_for<__nv_bfloat16>() : gemm::f32_tolerance(p.k));
      gpu.equal("one plan cached", runner.cached_plans(), size_t(1));
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> gemm_cases() { return {gemm_case()}; }

}  // namespace k3::gpu_test
