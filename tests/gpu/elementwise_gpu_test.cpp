// The engine's elementwise glue ops against plain CPU loops: add_bf16 (bit-exact, also in place), sigmoid_gate_bf16
// (fp64 x·sigmoid(g), strided gate, also in place), convert_f32_to_bf16 (bit-exact against a bit-level RNE incl.
// ties, subnormals, ±0, ±Inf, NaN and overflow), increment_i32 (exact), and argument rejection.
#include "gpu_harness.h"
#include "kernels/elementwise.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

// 65536 blocks of 256 threads is the largest grid: a longer array exercises the grid-stride loop.
constexpr int64_t kOneGridElements = int64_t(65536) * 256;


std::vector<__nv_bfloat16> random_bf16(int64_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<__nv_bfloat16> v(static_cast<size_t>(n));
  for (auto& x : v) x = __float2bfloat16_rn(dist(rng));
  return v;
}

// ---- add_bf16 ----

TEST(GpuElementwise, AddMatchesCpuAndWorksInPlace) {
  std::mt19937 rng(20261208);
  for (const int64_t n : {int64_t(1), int64_t(1001), kOneGridElements + 4099}) {
    const std::vector<__nv_bfloat16> a = random_bf16(n, rng, -3.0f, 3.0f), b = random_bf16(n, rng, -3.0f, 3.0f);
    std::vector<uint16_t> want(static_cast<size_t>(n));  // the fp32 sum, rounded once to bf16
    for (int64_t i = 0; i < n; ++i) {
      want[size_t(i)] = bits_of(__float2bfloat16_rn(__bfloat162float(a[size_t(i)]) + __bfloat162float(b[size_t(i)])));
    }
    K3_REQUIRE_GPU();
    DeviceBuffer<__nv_bfloat16> da(a), db(b), out(static_cast<size_t>(n));
    CUDA_CHECK(kernels::add_bf16(da.get(), db.get(), out.get(), n, nullptr));
    CUDA_CHECK(kernels::add_bf16(da.get(), db.get(), da.get(), n, nullptr));  // out == a
    const std::vector<__nv_bfloat16> got = out.download(), got_in_place = da.download();
    int64_t bad = 0, bad_in_place = 0;
    for (int64_t i = 0; i < n; ++i) {
      bad += bits_of(got[size_t(i)]) != want[size_t(i)] ? 1 : 0;
      bad_in_place += bits_of(got_in_place[size_t(i)]) != want[size_t(i)] ? 1 : 0;
    }
    EXPECT_EQ(bad, 0) << "n " << n;
    EXPECT_EQ(bad_in_place, 0) << "n " << n << " in place";
  }
}

// ---- sigmoid_gate_bf16 ----

struct GateCase {
  int64_t rows, width, gate_pad;
};
const GateCase kGateCases[] = {{1, 1, 0}, {5, 12288, 0}, {7, 4093, 35}, {3, 128, 1}, {1, kOneGridElements + 3, 2}};

TEST(GpuElementwise, SigmoidGateMatchesCpuAndWorksInPlace) {
  std::mt19937 rng(20261209);
  struct Prepared {
    GateCase c;
    std::vector<__nv_bfloat16> x, gate;  // gate [rows, width + pad], the pad NaN
    std::vector<double> want;            // [rows, width]
  };
  std::vector<Prepared> cases;
  for (const GateCase& c : kGateCases) {
    const int64_t stride = c.width + c.gate_pad;
    Prepared p{c, random_bf16(c.rows * c.width, rng, -3.0f, 3.0f), random_bf16(c.rows * stride, rng, -6.0f, 6.0f), {}};
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t i = c.width; i < stride; ++i) {
        p.gate[size_t(r * stride + i)] = __float2bfloat16_rn(std::numeric_limits<float>::quiet_NaN());
      }
    }
    p.want.resize(static_cast<size_t>(c.rows * c.width));
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t i = 0; i < c.width; ++i) {
        const double x = __bfloat162float(p.x[size_t(r * c.width + i)]);
        const double g = __bfloat162float(p.gate[size_t(r * stride + i)]);
        p.want[size_t(r * c.width + i)] = x / (1.0 + std::exp(-g));
      }
    }
    cases.push_back(std::move(p));
  }
  K3_REQUIRE_GPU();
  for (const Prepared& p : cases) {
    const GateCase& c = p.c;
    const std::string label =
        std::to_string(c.rows) + "x" + std::to_string(c.width) + " pad " + std::to_string(c.gate_pad);
    DeviceBuffer<__nv_bfloat16> x(p.x), gate(p.gate), out(p.x.size());
    CUDA_CHECK(
        kernels::sigmoid_gate_bf16(x.get(), gate.get(), c.width + c.gate_pad, out.get(), c.rows, c.width, nullptr));
    CUDA_CHECK(kernels::sigmoid_gate_bf16(x.get(), gate.get(), c.width + c.gate_pad, x.get(), c.rows, c.width,
                                          nullptr));  // out == x
    const std::vector<__nv_bfloat16> got = out.download(), got_in_place = x.download();
    // One bf16 rounding (≤ 2^-8 relative) of an fp32 result within a few ulp (expf, the division) of the exact value.
    int64_t bad = 0;
    for (size_t i = 0; i < p.want.size(); ++i) {
      const double tolerance = (std::ldexp(1.0, -8) + 1e-6) * std::abs(p.want[i]);
      bad += std::abs(double(__bfloat162float(got[i])) - p.want[i]) <= tolerance ? 0 : 1;
      bad += bits_of(got_in_place[i]) == bits_of(got[i]) ? 0 : 1;
    }
    EXPECT_EQ(bad, 0) << label;
  }
}

// ---- convert_f32_to_bf16 ----

// Round to nearest, ties to even, on the bit pattern: the reference the kernel's __float2bfloat16_rn must equal.
uint16_t bf16_bits_rne(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if (std::isnan(v)) return uint16_t((u >> 16) | 0x0040);  // quiet NaN, sign kept
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

TEST(GpuElementwise, ConvertRoundsToNearestEven) {
  std::mt19937 rng(20261210);
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
  while (x.size() < 100003) x.push_back(std::ldexp(mantissa(rng), exponent(rng)));
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = bf16_bits_rne(x[i]);
  // The reference itself, on the hand-made cases.
  EXPECT_EQ(want[3], 0x3F80);
  EXPECT_EQ(want[4], 0x3F82);
  EXPECT_EQ(want[5], 0x3F81);
  EXPECT_EQ(want[11], 0x7F80);
  K3_REQUIRE_GPU();
  DeviceBuffer<float> dx(x);
  DeviceBuffer<__nv_bfloat16> out(x.size());
  CUDA_CHECK(kernels::convert_f32_to_bf16(dx.get(), out.get(), int64_t(x.size()), nullptr));
  const std::vector<__nv_bfloat16> got = out.download();
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool ok = std::isnan(x[i]) ? std::isnan(__bfloat162float(got[i])) : bits_of(got[i]) == want[i];
    if (i < special_values) {
      EXPECT_TRUE(ok) << "value " << x[i] << ": got 0x" << std::hex << bits_of(got[i]) << " want 0x" << want[i];
    } else {
      bad += ok ? 0 : 1;
    }
  }
  EXPECT_EQ(bad, 0) << "random values";
}

// ---- increment_i32 ----

TEST(GpuElementwise, IncrementAddsOne) {
  std::mt19937 rng(20261211);
  std::uniform_int_distribution<int32_t> value(-1000000, 1000000);
  for (const int n : {1, 97, 70001}) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = value(rng);
    std::vector<int32_t> want = v;
    for (auto& x : want) x += 2;
    K3_REQUIRE_GPU();
    DeviceBuffer<int32_t> d(v);
    CUDA_CHECK(kernels::increment_i32(d.get(), n, nullptr));
    CUDA_CHECK(kernels::increment_i32(d.get(), n, nullptr));
    EXPECT_TRUE(d.download() == want) << "n " << n;
  }
}

// Argument checks come before any launch, so they hold (and run) without a device.
TEST(GpuElementwise, RejectsBadArguments) {
  static __nv_bfloat16 a[8], b[8], out[8];
  static float f[8];
  static int32_t values[8];
  EXPECT_EQ(kernels::add_bf16(a, b, out, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::add_bf16(nullptr, b, out, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::add_bf16(a, nullptr, out, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::add_bf16(a, b, nullptr, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::add_bf16(nullptr, nullptr, nullptr, 0, nullptr), cudaSuccess);

  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, b, 4, out, 2, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, b, 3, out, 2, 4, nullptr), cudaErrorInvalidValue);  // stride < width
  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, b, 4, out, -1, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(nullptr, b, 4, out, 2, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, nullptr, 4, out, 2, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(a, b, 4, nullptr, 2, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sigmoid_gate_bf16(nullptr, nullptr, 4, nullptr, 0, 4, nullptr), cudaSuccess);

  EXPECT_EQ(kernels::convert_f32_to_bf16(f, out, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::convert_f32_to_bf16(nullptr, out, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::convert_f32_to_bf16(f, nullptr, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::convert_f32_to_bf16(nullptr, nullptr, 0, nullptr), cudaSuccess);

  EXPECT_EQ(kernels::increment_i32(values, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::increment_i32(nullptr, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::increment_i32(nullptr, 0, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
