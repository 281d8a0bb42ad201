// SiTU-GLU and SiLU-GLU on a fused gate|up row against ref::situ and ref::silu: fp32 and bf16 inputs (the variants),
// bf16 output, K3's widths and odd ones, strided rows, inputs wide enough to reach both tanh saturations. Four-element
// groups throughout (1, 3072), (17, 6144, padded input rows), (2, 33792) and more rows than one grid column holds
// (70000); one element at a time where a width or stride is not a multiple of four.
#include "engine/reference/basic_ops.h"
#include "kernels/situ_glu.h"
#include "tests/kernels/op_cases/cases.h"

namespace k3::gpu_test {
namespace {

constexpr float kBeta = 4.0f, kLinearBeta = 25.0f;

enum class InputType { f32, bf16 };

std::vector<Shape> glu_shapes() {
  const int64_t dims[][4] = {{1, 3072, 0, 0},  {3, 37, 5, 3},     {17, 6144, 8, 0}, {64, 1, 1, 1},
                             {2, 33792, 0, 0}, {70000, 12, 4, 0}, {5, 64, 2, 0}};
  std::vector<Shape> out;
  for (const auto& d : dims) {
    out.push_back(shape({{"tokens", d[0]}, {"intermediate", d[1]}, {"in_pad", d[2]}, {"out_pad", d[3]}}));
  }
  return out;
}

// One of the two activations: its reference and its kernel (either input type).
OpCase glu_case(bool situ) {
  OpCase c{situ ? "situ_glu_bf16" : "silu_glu_bf16", OpKind::elementwise};
  c.shapes = glu_shapes();
  c.variants = {variant(InputType::f32, "f32_in"), variant(InputType::bf16, "bf16_in")};
  c.test = [situ](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int64_t tokens = s["tokens"], inter = s["intermediate"];
    const int64_t in_stride = 2 * inter + s["in_pad"], out_stride = inter + s["out_pad"];
    const ref::Matrix gate_up = round_to_bf16(random_matrix(tokens, in_stride, rng, -30.0f, 30.0f));
    ref::Matrix expected(tokens, inter);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < inter; ++i) {
        const float a = gate_up(t, i), u = gate_up(t, inter + i);
        expected(t, i) = situ ? ref::situ(a, u, kBeta, kLinearBeta) : ref::silu(a) * u;
      }
    }
    cpu.expect(expected.allFinite(), "reference finite");
    return [=](const Variant& v, Checks& gpu) {
      DeviceBuffer<__nv_bfloat16> out(size_t(tokens * out_stride));
      const auto launch = [&](const auto* in) {
        return situ ? kernels::situ_glu_bf16(in, in_stride, kBeta, kLinearBeta, out.get(), out_stride, tokens, inter,
                                             nullptr)
                    : kernels::silu_glu_bf16(in, in_stride, out.get(), out_stride, tokens, inter, nullptr);
      };
      if (algorithm_of<InputType>(v) == InputType::f32) {
        DeviceBuffer<float> in(to_f32(gate_up));
        CUDA_CHECK(launch(in.get()));
      } else {
        DeviceBuffer<__nv_bfloat16> in(to_bf16(gate_up));
        CUDA_CHECK(launch(in.get()));
      }
      const ref::Matrix got = from_bf16(out.download(), tokens, out_stride).leftCols(inter);
      gpu.near("out", normalized_error(got, expected), tolerance_for<__nv_bfloat16>());
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> situ_glu_cases() { return {glu_case(true), glu_case(false)}; }

}  // namespace k3::gpu_test
