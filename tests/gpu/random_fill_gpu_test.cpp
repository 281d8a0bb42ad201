// Seeded random fill against the header's host functions (random_normal and random_uniform are __host__ __device__):
// fp32 normals to a few ulp (host and device logf/cosf may differ in the last bits), bf16 normals the rounding of
// the device's fp32 normals, uniforms, the statistics of 10^6 normals (host and device), and the MXFP4 fill
// bit-identical to weights::mxfp4_quantize of the device's fp32 normals of the same key and stddev.
#include "engine/weights/mx_format.h"
#include "gpu_harness.h"
#include "kernels/random_fill.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

// 65536 blocks of 256 threads is the fill kernels' largest grid: a longer tensor exercises the grid-stride loop.
constexpr int64_t kOneGridElements = int64_t(65536) * 256;

using gpu_test::bits_of;  // the bf16 one (device_data.h), beside this overload
uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

std::vector<float> host_normals(uint64_t key, int64_t n) {
  std::vector<float> z(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) z[size_t(i)] = kernels::random_normal(key, uint64_t(i));
  return z;
}

// ---- Statistics ----

struct Moments {
  double mean = 0, variance = 0, within_one_sigma = 0, max_abs = 0;
};

Moments moments_of(const std::vector<float>& z) {
  Moments m;
  const double n = double(z.size());
  for (float v : z) m.mean += v;
  m.mean /= n;
  for (float v : z) {
    m.variance += (v - m.mean) * (v - m.mean);
    m.within_one_sigma += std::abs(v) < 1.0f ? 1.0 : 0.0;
    m.max_abs = std::max(m.max_abs, double(std::abs(v)));
  }
  m.variance /= n - 1;
  m.within_one_sigma /= n;
  return m;
}

// Standard-normal sample of n: the mean has σ = 1/√n, the sample variance σ = √(2/n), the fraction inside ±1
// σ = √(p(1 − p)/n) with p = erf(1/√2); every check allows 5σ (the values are fixed by the key, so no flakes).
// Box–Muller with a 24-bit u1 > 0 bounds |z| by √(−2 ln 2^−24) ≈ 5.77; in 10^6 draws some exceed 4 (expected 63).
void expect_standard_normal(const std::vector<float>& z, const std::string& label) {
  const double n = double(z.size());
  const Moments m = moments_of(z);
  const double p = std::erf(1.0 / std::sqrt(2.0));
  EXPECT_LE(std::abs(m.mean), 5.0 / std::sqrt(n)) << label;
  EXPECT_LE(std::abs(m.variance - 1.0), 5.0 * std::sqrt(2.0 / n)) << label;
  EXPECT_LE(std::abs(m.within_one_sigma - p), 5.0 * std::sqrt(p * (1 - p) / n)) << label;
  EXPECT_LE(m.max_abs, std::sqrt(-2.0 * std::log(std::ldexp(1.0, -24))) * (1 + 1e-6)) << label;
  EXPECT_GT(m.max_abs, 4.0) << label;
}

constexpr int64_t kStatisticsSamples = 1000000;

TEST(GpuRandomFill, NormalsHaveStandardStatistics) {
  const uint64_t keys[] = {1, 0x5EED5EED5EEDull};
  std::vector<std::vector<float>> host;
  for (uint64_t key : keys) {
    host.push_back(host_normals(key, kStatisticsSamples));
    expect_standard_normal(host.back(), "host key " + std::to_string(key));
  }
  // Two keys give independent streams: sample correlation within 5/√n of 0.
  double dot = 0;
  for (size_t i = 0; i < host[0].size(); ++i) dot += double(host[0][i]) * host[1][i];
  EXPECT_LE(std::abs(dot / double(kStatisticsSamples)), 5.0 / std::sqrt(double(kStatisticsSamples)));

  K3_REQUIRE_GPU();
  for (uint64_t key : keys) {
    DeviceBuffer<float> z(kStatisticsSamples);
    CUDA_CHECK(kernels::fill_normal_f32(z.get(), kStatisticsSamples, 0.0f, 1.0f, key, nullptr));
    expect_standard_normal(z.download(), "device key " + std::to_string(key));
  }
}

TEST(GpuRandomFill, UniformsHaveUniformStatistics) {
  const int64_t n = kStatisticsSamples;
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float u = kernels::random_uniform(7, uint64_t(i));
    ASSERT_TRUE(u >= 0.0f && u < 1.0f) << i;
    sum += u;
    sum_sq += double(u) * u;
  }
  // U(0, 1): mean 1/2 (σ of the sample mean √(1/12n)), E[u²] = 1/3 (σ √(4/45n)).
  EXPECT_LE(std::abs(sum / double(n) - 0.5), 5.0 * std::sqrt(1.0 / (12.0 * double(n))));
  EXPECT_LE(std::abs(sum_sq / double(n) - 1.0 / 3.0), 5.0 * std::sqrt(4.0 / (45.0 * double(n))));
}

// ---- Element values against the host functions ----

struct FillCase {
  int64_t n;
  float mean, stddev;
  uint64_t key;
};
const FillCase kFillCases[] = {
    {1, 0.0f, 1.0f, 3},
    {257, 0.0f, 1.0f, 0xFFFFFFFFFFFFFFFFull},
    {100003, 0.25f, 0.02f, 42},
    {kOneGridElements + 4099, 0.0f, 1.0f, 20261207},
};

std::string describe(const FillCase& c) {
  return "n " + std::to_string(c.n) + " mean " + std::to_string(c.mean) + " stddev " + std::to_string(c.stddev) +
         " key " + std::to_string(c.key);
}

// Host and device logf and cosf are each within a few ulp of the exact value; a sample differs from the host's by
// ≤ ~5 fp32 ulp of |stddev·z| (≤ 6e-7 relative), and mean + stddev·z adds at most one rounding of each term.
TEST(GpuRandomFill, NormalF32MatchesHostFunction) {
  std::vector<std::vector<double>> expected;  // every host value first: that side runs without a GPU
  for (const FillCase& c : kFillCases) {
    const std::vector<float> z = host_normals(c.key, c.n);
    std::vector<double> e(z.size());
    for (size_t i = 0; i < z.size(); ++i) e[i] = double(c.mean) + double(c.stddev) * z[i];
    expected.push_back(std::move(e));
  }
  K3_REQUIRE_GPU();
  for (size_t k = 0; k < std::size(kFillCases); ++k) {
    const FillCase& c = kFillCases[k];
    DeviceBuffer<float> out(static_cast<size_t>(c.n));
    CUDA_CHECK(kernels::fill_normal_f32(out.get(), c.n, c.mean, c.stddev, c.key, nullptr));
    const std::vector<float> got = out.download();
    int64_t bad = 0, first_bad = -1;
    for (int64_t i = 0; i < c.n; ++i) {
      const double want = expected[k][size_t(i)];
      const double tolerance = 1e-6 * (std::abs(double(c.mean)) + std::abs(want - double(c.mean)));
      if (!(std::abs(double(got[size_t(i)]) - want) <= tolerance)) {
        if (bad++ == 0) first_bad = i;
      }
    }
    EXPECT_EQ(bad, 0) << describe(c) << ": first at " << first_bad;
  }
}

// The bf16 fill is the bf16 rounding (RNE) of the fp32 fill's value, bit for bit.
TEST(GpuRandomFill, NormalBf16IsTheRoundingOfF32) {
  K3_REQUIRE_GPU();
  for (const FillCase& c : kFillCases) {
    DeviceBuffer<float> f32(static_cast<size_t>(c.n));
    DeviceBuffer<__nv_bfloat16> bf16(static_cast<size_t>(c.n));
    CUDA_CHECK(kernels::fill_normal_f32(f32.get(), c.n, c.mean, c.stddev, c.key, nullptr));
    CUDA_CHECK(kernels::fill_normal_bf16(bf16.get(), c.n, c.mean, c.stddev, c.key, nullptr));
    const std::vector<float> want = f32.download();
    const std::vector<__nv_bfloat16> got = bf16.download();
    int64_t bad = 0, first_bad = -1;
    for (int64_t i = 0; i < c.n; ++i) {
      if (bits_of(got[size_t(i)]) != bits_of(__float2bfloat16_rn(want[size_t(i)]))) {
        if (bad++ == 0) first_bad = i;
      }
    }
    EXPECT_EQ(bad, 0) << describe(c) << ": first at " << first_bad;
  }
}

// u = (h mod 2^24)/2^24 is exact in fp32, so on [0, 1) the fill equals the host value bit for bit; on another
// range lo + (hi − lo)·u is within two roundings (≤ 2 ulp of max(|lo|, |hi|)) of the exact value, inside [lo, hi].
TEST(GpuRandomFill, UniformMatchesHostFunction) {
  struct Range {
    int64_t n;
    float lo, hi;
    uint64_t key;
  };
  const Range ranges[] = {{1, 0.0f, 1.0f, 9},
                          {100003, 0.0f, 1.0f, 11},
                          {kOneGridElements + 17, 0.0f, 1.0f, 13},
                          {4099, -0.3f, 0.7f, 15},
                          {65537, 2.0f, 2.5f, 17}};
  std::vector<std::vector<double>> expected;
  for (const Range& r : ranges) {
    std::vector<double> e(static_cast<size_t>(r.n));
    for (int64_t i = 0; i < r.n; ++i) {
      e[size_t(i)] = double(r.lo) + (double(r.hi) - double(r.lo)) * kernels::random_uniform(r.key, uint64_t(i));
    }
    expected.push_back(std::move(e));
  }
  K3_REQUIRE_GPU();
  for (size_t k = 0; k < std::size(ranges); ++k) {
    const Range& r = ranges[k];
    const std::string label =
        "n " + std::to_string(r.n) + " [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + ")";
    DeviceBuffer<float> out(static_cast<size_t>(r.n));
    CUDA_CHECK(kernels::fill_uniform_f32(out.get(), r.n, r.lo, r.hi, r.key, nullptr));
    const std::vector<float> got = out.download();
    const bool exact = r.lo == 0.0f && r.hi == 1.0f;
    const double tolerance = 2.0 * std::ldexp(1.0, -23) * std::max(std::abs(r.lo), std::abs(r.hi));
    int64_t bad = 0, first_bad = -1;
    for (int64_t i = 0; i < r.n; ++i) {
      const float g = got[size_t(i)];
      const double want = expected[k][size_t(i)];
      const bool ok = exact ? bits_of(g) == bits_of(float(want))
                            : (g >= r.lo && g <= r.hi && std::abs(double(g) - want) <= tolerance);
      if (!ok && bad++ == 0) first_bad = i;
    }
    EXPECT_EQ(bad, 0) << label << ": first at " << first_bad;
  }
}

// ---- MXFP4 ----

struct Mxfp4Case {
  int64_t rows, cols;
  float stddev;
  uint64_t key;
};
// Odd row counts, one block per row (cols 32), K3's latent width 3584, and a whole K3 expert matrix (3072 × 3584).
const Mxfp4Case kMxfp4Cases[] = {
    {1, 32, 1.0f, 1}, {7, 32, 0.02f, 2}, {13, 3584, 0.02f, 3}, {3, 3584, 5e-4f, 4}, {3072, 3584, 0.0173f, 5},
};

std::string describe(const Mxfp4Case& c) {
  return std::to_string(c.rows) + "x" + std::to_string(c.cols) + " stddev " + std::to_string(c.stddev) + " key " +
         std::to_string(c.key);
}

struct Quantized {
  std::vector<uint8_t> packed, scales;
};

Quantized quantize_on_host(const std::vector<float>& values) {
  const auto n = int64_t(values.size());
  Quantized q{std::vector<uint8_t>(static_cast<size_t>(n / 2)),
              std::vector<uint8_t>(static_cast<size_t>(n / weights::kMxBlockElements))};
  weights::mxfp4_quantize(values.data(), n, q.packed.data(), q.scales.data());
  return q;
}

// Blocks (of 32 elements) whose scale or any packed byte differs.
int64_t differing_blocks(const Quantized& a, const Quantized& b) {
  int64_t count = 0;
  for (size_t block = 0; block < a.scales.size(); ++block) {
    const bool same =
        a.scales[block] == b.scales[block] && std::memcmp(&a.packed[block * 16], &b.packed[block * 16], 16) == 0;
    count += same ? 0 : 1;
  }
  return count;
}

// The kernel's values are stddev·random_normal(key, i), bit for bit what fill_normal_f32 with mean 0 writes, except
// the sign of a zero: z = ±0 exactly when u1 = 1 (once in 2^24 elements; the 3072 × 3584 case has one), and
// 0 + stddev·(−0) is +0 while the kernel encodes −0 as the nibble 8. So the exact check quantises the device's own
// fp32 normals on the host with each zero replaced by the host's stddev·z (u1 = 1 is an integer condition, the same
// on both sides). Against normals computed on the host a block can differ only where a few-ulp difference crosses an
// E2M1 rounding midpoint or the block maximum crosses a power of two: at most 1 % of the blocks, or one (in practice
// none).
TEST(GpuRandomFill, Mxfp4FillEqualsHostQuantizer) {
  std::vector<Quantized> from_host_normals;
  for (const Mxfp4Case& c : kMxfp4Cases) {
    std::vector<float> values = host_normals(c.key, c.rows * c.cols);
    for (float& v : values) v *= c.stddev;
    from_host_normals.push_back(quantize_on_host(values));
    // CPU side: MXFP4 keeps a normal sample to within 25 % (normalised error), so the reference is meaningful.
    std::vector<float> dequantized(values.size());
    weights::mxfp4_dequantize(from_host_normals.back().packed.data(), from_host_normals.back().scales.data(),
                              int64_t(values.size()), dequantized.data());
    double err = 0, norm = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      err += (double(dequantized[i]) - values[i]) * (double(dequantized[i]) - values[i]);
      norm += double(values[i]) * values[i];
    }
    EXPECT_LE(std::sqrt(err / norm), 0.25) << describe(c);
  }
  K3_REQUIRE_GPU();
  for (size_t k = 0; k < std::size(kMxfp4Cases); ++k) {
    const Mxfp4Case& c = kMxfp4Cases[k];
    const int64_t n = c.rows * c.cols;
    DeviceBuffer<float> values(static_cast<size_t>(n));
    DeviceBuffer<uint8_t> packed(static_cast<size_t>(n / 2)), scales(static_cast<size_t>(n / 32));
    CUDA_CHECK(kernels::fill_normal_f32(values.get(), n, 0.0f, c.stddev, c.key, nullptr));
    CUDA_CHECK(kernels::mxfp4_fill_normal(packed.get(), scales.get(), c.rows, c.cols, c.stddev, c.key, nullptr));
    const Quantized got{packed.download(), scales.download()};
    std::vector<float> device_values = values.download();
    for (size_t i = 0; i < device_values.size(); ++i) {
      if (device_values[i] == 0.0f) device_values[i] = c.stddev * kernels::random_normal(c.key, i);
    }
    const Quantized want = quantize_on_host(device_values);
    EXPECT_EQ(differing_blocks(got, want), 0) << describe(c);
    EXPECT_LE(differing_blocks(got, from_host_normals[k]), std::max<int64_t>(1, int64_t(want.scales.size()) / 100))
        << describe(c);
  }
}

// Argument checks come before any launch, so they hold (and run) without a device.
TEST(GpuRandomFill, RejectsBadArguments) {
  alignas(16) static uint8_t packed[64 + 16];
  static uint8_t scales[8];
  static float f32[4];
  static __nv_bfloat16 bf16[4];
  EXPECT_EQ(kernels::mxfp4_fill_normal(packed, scales, 2, 48, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_fill_normal(packed, scales, 2, 33, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_fill_normal(packed, scales, -1, 32, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_fill_normal(packed, scales, 1, -32, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_fill_normal(nullptr, scales, 1, 32, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_fill_normal(packed, nullptr, 1, 32, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_fill_normal(packed + 1, scales, 1, 32, 1.0f, 1, nullptr), cudaErrorMisalignedAddress);
  EXPECT_EQ(kernels::mxfp4_fill_normal(packed + 8, scales, 1, 32, 1.0f, 1, nullptr), cudaErrorMisalignedAddress);
  EXPECT_EQ(kernels::mxfp4_fill_normal(packed, scales, 0, 64, 1.0f, 1, nullptr), cudaSuccess);

  EXPECT_EQ(kernels::fill_normal_f32(f32, -1, 0.0f, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::fill_normal_f32(nullptr, 4, 0.0f, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::fill_normal_f32(nullptr, 0, 0.0f, 1.0f, 1, nullptr), cudaSuccess);
  EXPECT_EQ(kernels::fill_normal_bf16(bf16, -1, 0.0f, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::fill_normal_bf16(nullptr, 4, 0.0f, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::fill_normal_bf16(nullptr, 0, 0.0f, 1.0f, 1, nullptr), cudaSuccess);
  EXPECT_EQ(kernels::fill_uniform_f32(f32, -1, 0.0f, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::fill_uniform_f32(nullptr, 4, 0.0f, 1.0f, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::fill_uniform_f32(nullptr, 0, 0.0f, 1.0f, 1, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
