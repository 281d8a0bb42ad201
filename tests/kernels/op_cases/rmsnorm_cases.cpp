// RMSNorm against ref::rmsnorm: bf16 and fp32 activations, odd widths and strided rows; the fp32 rows with every
// RmsNormF32Algorithm, fp32 and bf16 outputs, in place (the row padding left untouched), vector and scalar paths
// (widths and strides that are and are not multiples of 4), up to and past the row-in-registers width limit.
#include "engine/reference/basic_ops.h"
#include "kernels/rmsnorm.h"
#include "tests/kernels/op_cases/cases.h"

namespace k3::gpu_test {
namespace {

using kernels::RmsNormF32Algorithm;

std::vector<Shape> test_shapes() {
  const int64_t dims[][3] = {{1, 7168, 0}, {3, 4093, 5}, {17, 64, 0}, {2, 1, 3},    {64, 3584, 0}, {1, 3584, 0},
                             {5, 8192, 0}, {2, 8193, 0}, {3, 7, 0},   {4, 1000, 4}, {2, 996, 2},   {1, 12, 0}};
  std::vector<Shape> out;
  for (const auto& d : dims) out.push_back(shape({{"rows", d[0]}, {"width", d[1]}, {"pad", d[2]}}));
  return out;
}

// The CPU half every RMSNorm case shares: x [rows, width + pad] and w bf16-rounded, the reference of the first
// `width` columns.
struct Inputs {
  int64_t rows, width, stride;
  ref::Matrix x, w, expected;
};
Inputs prepare(const Shape& s, std::mt19937& rng, Checks& cpu) {
  Inputs in{s["rows"], s["width"], s["width"] + s["pad"], {}, {}, {}};
  in.x = round_to_bf16(random_matrix(in.rows, in.stride, rng, -3.0f, 3.0f));
  in.w = round_to_bf16(random_matrix(1, in.width, rng, 0.5f, 1.5f));
  in.expected = ref::rmsnorm(in.x.leftCols(in.width), in.w.row(0).transpose(), 1e-5);
  cpu.expect(in.expected.allFinite(), "reference finite");
  return in;
}

std::vector<Variant> f32_variants() {
  return {variant(RmsNormF32Algorithm::automatic, "automatic"),
          variant(RmsNormF32Algorithm::block_per_row, "block_per_row"),
          variant(RmsNormF32Algorithm::row_in_registers, "row_in_registers")};
}

// row_in_registers refuses rows past its width limit.
bool refused(const Inputs& in, RmsNormF32Algorithm algorithm) {
  return algorithm == RmsNormF32Algorithm::row_in_registers && in.width > kernels::kRmsNormRowInRegistersMaxWidth;
}

// The decode step's fp32 latent norm at K3's MoE latent width, T = 1 … 64 rows (latency-bound).
constexpr int64_t kLatentWidth = 3584;
std::vector<Shape> latent_perf_shapes() {
  return {shape({{"rows", 1}, {"width", kLatentWidth}}), shape({{"rows", 8}, {"width", kLatentWidth}}),
          shape({{"rows", 64}, {"width", kLatentWidth}})};
}
std::vector<Variant> f32_perf_variants() {
  return {variant(RmsNormF32Algorithm::block_per_row, "block_per_row"),
          variant(RmsNormF32Algorithm::row_in_registers, "row_in_registers")};
}

OpCase rmsnorm_bf16_case() {
  OpCase c{"rmsnorm_bf16", OpKind::rmsnorm};
  c.shapes = test_shapes();
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const Inputs in = prepare(s, rng, cpu);
    return [in](const Variant&, Checks& gpu) {
      DeviceBuffer<__nv_bfloat16> dw(to_bf16(in.w)), dx(to_bf16(in.x)), dy(in.rows * in.stride);
      CUDA_CHECK(
          kernels::rmsnorm_bf16(dx.get(), in.stride, dw.get(), 1e-5f, dy.get(), in.stride, in.rows, in.width, nullptr));
      gpu.near("y", normalized_error(from_bf16(dy.download(), in.rows, in.stride).leftCols(in.width), in.expected),
               tolerance_for<__nv_bfloat16>());
    };
  };
  // A prefill chunk's norm: 4096 tokens at K3's hidden width.
  c.perf_shapes = {shape({{"rows", 4096}, {"width", 7168}})};
  c.perf_variants = single_variant();
  c.perf_name = [](const Shape& s, const Variant&) { return fmt::format("rmsnorm_bf16 {}x{}", s["rows"], s["width"]); };
  // Each row read and written once in bf16, the weights once; 4 FLOPs an element (square, sum, scale, weight).
  c.cost = [](const Shape& s) {
    Cost cost;
    cost.bytes = 2.0 * s["rows"] * s["width"] * 2 + s["width"] * 2.0;
    cost.flops = 4.0 * s["rows"] * s["width"];
    cost.rotated_bytes = cost.bytes;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant&, int sets) -> Launch {
    const int64_t rows = s["rows"], width = s["width"];
    auto x = rotated(sets, [&](int) { return device_bytes<__nv_bfloat16>(size_t(rows * width), 0x3F); });
    auto y = rotated(sets, [&](int) { return device_bytes<__nv_bfloat16>(size_t(rows * width), 0); });
    auto w = device_bytes<__nv_bfloat16>(size_t(width), 0x3F);
    return [=](int set, cudaStream_t stream) {
      CUDA_CHECK(
          kernels::rmsnorm_bf16(x[set]->get(), width, w->get(), 1e-5f, y[set]->get(), width, rows, width, stream));
    };
  };
  return c;
}

OpCase rmsnorm_f32_case() {
  OpCase c{"rmsnorm_f32", OpKind::elementwise};  // the MoE latent norm: an elementwise op of the graph's moe_mlp
  c.shapes = test_shapes();
  c.variants = f32_variants();
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const Inputs in = prepare(s, rng, cpu);
    const int64_t pad = s["pad"];
    return [in, pad](const Variant& v, Checks& gpu) {
      const auto algorithm = algorithm_of<RmsNormF32Algorithm>(v);
      DeviceBuffer<__nv_bfloat16> dw(to_bf16(in.w));
      DeviceBuffer<float> dx(to_f32(in.x)), dy(in.rows * in.stride);
      const cudaError_t status = kernels::rmsnorm_f32(dx.get(), in.stride, dw.get(), 1e-5f, dy.get(), in.stride,
                                                      in.rows, in.width, nullptr, algorithm);
      if (refused(in, algorithm)) {
        gpu.equal("refused past the width limit", status, cudaErrorInvalidValue);
        return;
      }
      CUDA_CHECK(status);
      gpu.near("y", normalized_error(from_f32(dy.download(), in.rows, in.stride).leftCols(in.width), in.expected),
               tolerance_for<float>());
      // In place, as the engine runs the MoE latent norm: the row padding must come back untouched.
      CUDA_CHECK(kernels::rmsnorm_f32(dx.get(), in.stride, dw.get(), 1e-5f, dx.get(), in.stride, in.rows, in.width,
                                      nullptr, algorithm));
      const ref::Matrix in_place = from_f32(dx.download(), in.rows, in.stride);
      gpu.near("in place", normalized_error(in_place.leftCols(in.width), in.expected), tolerance_for<float>());
      if (pad > 0) gpu.expect(in_place.rightCols(pad) == in.x.rightCols(pad), "padding untouched");
    };
  };
  c.perf_shapes = latent_perf_shapes();
  c.perf_variants = f32_perf_variants();
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("rmsnorm_f32_{} in place {}x{}", v.name, s["rows"], s["width"]);
  };
  // fp32 rows read and written once, the bf16 weights once.
  c.cost = [](const Shape& s) {
    Cost cost;
    cost.bytes = s["rows"] * s["width"] * 8.0 + s["width"] * 2.0;
    cost.flops = 4.0 * s["rows"] * s["width"];
    cost.timing = Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int) -> Launch {
    const int64_t rows = s["rows"], width = s["width"];
    auto x = device_bytes<float>(size_t(rows * width), 0x3F);
    auto w = device_bytes<__nv_bfloat16>(size_t(width), 0x3F);
    const auto algorithm = algorithm_of<RmsNormF32Algorithm>(v);
    return [=](int, cudaStream_t stream) {
      CUDA_CHECK(
          kernels::rmsnorm_f32(x->get(), width, w->get(), 1e-5f, x->get(), width, rows, width, stream, algorithm));
    };
  };
  return c;
}

OpCase rmsnorm_f32_to_bf16_case() {
  OpCase c{"rmsnorm_f32_to_bf16", OpKind::elementwise};  // the latent norm writing the up projection's bf16 input
  c.shapes = test_shapes();
  c.variants = f32_variants();
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const Inputs in = prepare(s, rng, cpu);
    return [in](const Variant& v, Checks& gpu) {
      const auto algorithm = algorithm_of<RmsNormF32Algorithm>(v);
      DeviceBuffer<__nv_bfloat16> dw(to_bf16(in.w)), dy(in.rows * in.stride);
      DeviceBuffer<float> dx(to_f32(in.x));
      const cudaError_t status = kernels::rmsnorm_f32_to_bf16(dx.get(), in.stride, dw.get(), 1e-5f, dy.get(), in.stride,
                                                              in.rows, in.width, nullptr, algorithm);
      if (refused(in, algorithm)) {
        gpu.equal("refused past the width limit", status, cudaErrorInvalidValue);
        return;
      }
      CUDA_CHECK(status);
      gpu.near("y (bf16)",
               normalized_error(from_bf16(dy.download(), in.rows, in.stride).leftCols(in.width), in.expected),
               tolerance_for<__nv_bfloat16>());
    };
  };
  c.perf_shapes = latent_perf_shapes();
  c.perf_variants = f32_perf_variants();
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("rmsnorm_f32_to_bf16_{} {}x{}", v.name, s["rows"], s["width"]);
  };
  // fp32 rows read, bf16 rows written, the bf16 weights once.
  c.cost = [](const Shape& s) {
    Cost cost;
    cost.bytes = s["rows"] * s["width"] * 6.0 + s["width"] * 2.0;
    cost.flops = 4.0 * s["rows"] * s["width"];
    cost.timing = Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int) -> Launch {
    const int64_t rows = s["rows"], width = s["width"];
    auto x = device_bytes<float>(size_t(rows * width), 0x3F);
    auto y = device_bytes<__nv_bfloat16>(size_t(rows * width), 0);
    auto w = device_bytes<__nv_bfloat16>(size_t(width), 0x3F);
    const auto algorithm = algorithm_of<RmsNormF32Algorithm>(v);
    return [=](int, cudaStream_t stream) {
      CUDA_CHECK(kernels::rmsnorm_f32_to_bf16(x->get(), width, w->get(), 1e-5f, y->get(), width, rows, width, stream,
                                              algorithm));
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> rmsnorm_cases() { return {rmsnorm_bf16_case(), rmsnorm_f32_case(), rmsnorm_f32_to_bf16_case()}; }

}  // namespace k3::gpu_test
