// Seeded random fill beside its op cases (tests/kernels/op_cases/random_fill_cases.cpp: normals, uniforms and the MXFP4
// fill against the header's host functions): the statistics of 10^6 normals (host and device) and uniforms, and
// argument rejection.
#include "gpu_harness.h"
#include "kernels/random_fill.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

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
