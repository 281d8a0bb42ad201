// The engine's elementwise glue ops against plain CPU loops: add_bf16 (bit-exact), sigmoid_gate_bf16 (fp64
// x·sigmoid(g), strided gate with NaN padding), convert_f32_to_bf16 (bit-exact against a bit-level RNE incl. ties,
// subnormals, ±0, ±Inf, NaN and overflow) and increment_i32 (exact); add and the gate also in place. Lengths past
// one grid (65536 blocks of 256 threads) exercise the grid-stride loops.
#include "kernels/elementwise.h"
#include "tests/kernels/op_cases/cases.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace k3::gpu_test {
namespace {

constexpr int64_t kOneGridElements = int64_t(65536) * 256;

// Where the output goes: a buffer of its own, or over the first input (out == a, out == x).
enum class Placement { separate, in_place };
std::vector<Variant> placements() {
  return {variant(Placement::separate, "separate"), variant(Placement::in_place, "in_place")};
}

OpCase add_case() {
  OpCase c{"add_bf16", OpKind::elementwise};
  for (const int64_t n : {int64_t(1), int64_t(1001), kOneGridElements + 4099}) c.shapes.push_back(shape({{"n", n}}));
  c.variants = placements();
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    const size_t n = size_t(s["n"]);
    const std::vector<__nv_bfloat16> a = random_bf16(n, rng, -3.0f, 3.0f), b = random_bf16(n, rng, -3.0f, 3.0f);
    std::vector<uint16_t> want(n);  // the fp32 sum, rounded once to bf16
    for (size_t i = 0; i < n; ++i) {
      want[i] = bits_of(__float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i])));
    }
    return [a, b, want, n](const Variant& v, Checks& gpu) {
      DeviceBuffer<__nv_bfloat16> da(a), db(b), out(n);
      const bool in_place = algorithm_of<Placement>(v) == Placement::in_place;
      __nv_bfloat16* y = in_place ? da.get() : out.get();
      CUDA_CHECK(kernels::add_bf16(da.get(), db.get(), y, int64_t(n), nullptr));
      const std::vector<__nv_bfloat16> got = in_place ? da.download() : out.download();
      int64_t bad = 0;
      for (size_t i = 0; i < n; ++i) bad += bits_of(got[i]) != want[i] ? 1 : 0;
      gpu.none("sums equal the rounded fp32 sum, bit for bit", bad);
    };
  };
  return c;
}

OpCase sigmoid_gate_case() {
  OpCase c{"sigmoid_gate_bf16", OpKind::elementwise};
  const int64_t dims[][3] = {{1, 1, 0}, {5, 12288, 0}, {7, 4093, 35}, {3, 128, 1}, {1, kOneGridElements + 3, 2}};
  for (const auto& d : dims) c.shapes.push_back(shape({{"rows", d[0]}, {"width", d[1]}, {"gate_pad", d[2]}}));
  c.variants = placements();
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    const int64_t rows = s["rows"], width = s["width"], stride = width + s["gate_pad"];
    const std::vector<__nv_bfloat16> x = random_bf16(size_t(rows * width), rng, -3.0f, 3.0f);
    std::vector<__nv_bfloat16> gate = random_bf16(size_t(rows * stride), rng, -6.0f, 6.0f);  // the pad NaN
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = width; i < stride; ++i) {
        gate[size_t(r * stride + i)] = __float2bfloat16_rn(std::numeric_limits<float>::quiet_NaN());
      }
    }
    std::vector<double> want(size_t(rows * width));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < width; ++i) {
        const double xv = __bfloat162float(x[size_t(r * width + i)]);
        const double g = __bfloat162float(gate[size_t(r * stride + i)]);
        want[size_t(r * width + i)] = xv / (1.0 + std::exp(-g));
      }
    }
    return [=](const Variant& v, Checks& gpu) {
      DeviceBuffer<__nv_bfloat16> dx(x), dgate(gate), out(x.size());
      CUDA_CHECK(kernels::sigmoid_gate_bf16(dx.get(), dgate.get(), stride, out.get(), rows, width, nullptr));
      const std::vector<__nv_bfloat16> got = out.download();
      // One bf16 rounding (≤ 2^-8 relative) of an fp32 result within a few ulp (expf, the division) of the exact
      // value.
      int64_t bad = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const double tolerance = (std::ldexp(1.0, -8) + 1e-6) * std::abs(want[i]);
        bad += std::abs(double(__bfloat162float(got[i])) - want[i]) <= tolerance ? 0 : 1;
      }
      gpu.none("within one bf16 rounding of x·sigmoid(g)", bad);
      if (algorithm_of<Placement>(v) == Placement::in_place) {
        CUDA_CHECK(kernels::sigmoid_gate_bf16(dx.get(), dgate.get(), stride, dx.get(), rows, width, nullptr));
        const std::vector<__nv_bfloat16> got_in_place = dx.download();
        int64_t differ = 0;
        for (size_t i = 0; i < want.size(); ++i) differ += bits_of(got_in_place[i]) == bits_of(got[i]) ? 0 : 1;
        gpu.none("in place equals the separate output, bit for bit", differ);
      }
    };
  };
  return c;
}

// Round to nearest, ties to even, on the bit pattern: the reference the kernel's __float2bfloat16_rn must equal.
uint16_t bf16_bits_rne(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if (std::isnan(v)) return uint16_t((u >> 16) | 0x0040);  // quiet NaN, sign kept
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

OpCase convert_case() {
  OpCase c{"convert_f32_to_bf16", OpKind::elementwise};
  c.shapes = {shape({{"n", 100003}})};  // 17 hand-made values, then random ones over the exponent range
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> x = {0.0f,
                            -0.0f,
                            1.0f,
                            1.0f + std::ldexp(1.0f, -8),                          // tie, even below: 1
                            1.0f + 3 * std::ldexp(1.0f, -8),                      // tie, even above: 1 + 2^-6
                            1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20),  // just above the tie: up
                            -(1.0f + 3 * std::ldexp(1.0f, -8)),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            std::ldexp(1.0f, -130) * 1.75f,  // subnormal
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max(),  // rounds up to +Inf
                            -std::numeric_limits<float>::max(),
                            inf,
                            -inf,
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN()};
    const size_t special_values = x.size();
    std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-140, 120);
    while (x.size() < size_t(s["n"])) x.push_back(std::ldexp(mantissa(rng), exponent(rng)));
    std::vector<uint16_t> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = bf16_bits_rne(x[i]);
    // The reference itself, on the hand-made cases.
    cpu.equal("tie rounds to even below", want[3], uint16_t(0x3F80));
    cpu.equal("tie rounds to even above", want[4], uint16_t(0x3F82));
    cpu.equal("above the tie rounds up", want[5], uint16_t(0x3F81));
    cpu.equal("max float rounds to +Inf", want[11], uint16_t(0x7F80));
    return [x, want, special_values](const Variant&, Checks& gpu) {
      DeviceBuffer<float> dx(x);
      DeviceBuffer<__nv_bfloat16> out(x.size());
      CUDA_CHECK(kernels::convert_f32_to_bf16(dx.get(), out.get(), int64_t(x.size()), nullptr));
      const std::vector<__nv_bfloat16> got = out.download();
      int64_t bad = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const bool ok = std::isnan(x[i]) ? std::isnan(__bfloat162float(got[i])) : bits_of(got[i]) == want[i];
        if (i < special_values) {
          gpu.expect(ok, fmt::format("value {}", x[i]),
                     fmt::format("got {:#06x} want {:#06x}", bits_of(got[i]), want[i]));
        } else {
          bad += ok ? 0 : 1;
        }
      }
      gpu.none("random values", bad);
    };
  };
  return c;
}

OpCase increment_case() {
  OpCase c{"increment_i32", OpKind::elementwise};
  for (const int n : {1, 97, 70001}) c.shapes.push_back(shape({{"n", n}}));
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    std::uniform_int_distribution<int32_t> value(-1000000, 1000000);
    std::vector<int32_t> v(static_cast<size_t>(s["n"]));
    for (auto& x : v) x = value(rng);
    std::vector<int32_t> want = v;
    for (auto& x : want) x += 2;
    return [v, want](const Variant&, Checks& gpu) {
      DeviceBuffer<int32_t> d(v);
      CUDA_CHECK(kernels::increment_i32(d.get(), int(v.size()), nullptr));
      CUDA_CHECK(kernels::increment_i32(d.get(), int(v.size()), nullptr));
      gpu.expect(d.download() == want, "two increments add 2 to every value");
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> elementwise_cases() { return {add_case(), sigmoid_gate_case(), convert_case(), increment_case()}; }

}  // namespace k3::gpu_test
