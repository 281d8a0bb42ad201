// MXFP4 routed-expert GEMV against the CPU: random weights quantised with weights::mxfp4_quantize and
// dequantised with weights::mxfp4_dequantize, y = x Wᵀ in fp64. K3's expert shapes, an odd out, 1..16
// tokens, strided x, and the batched-experts entry with 16 experts.
#include "engine/weights/mx_format.h"
#include "gpu_harness.h"
#include "kernels/mxfp4_gemv.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace k3::gpu_test {
namespace {

// fp32 accumulation against fp64.
constexpr double kTolerance = 1e-5;

struct QuantizedMatrix {
  std::vector<uint8_t> packed;  // [out, in/2]
  std::vector<uint8_t> scales;  // [out, in/32]
  ref::MatrixD dequantized;     // [out, in]
};

// Uniform ±1 times a power of two per 32-element block (2^-6..2^6), so the scale bytes vary.
QuantizedMatrix random_quantized(int64_t out, int64_t in, std::mt19937& rng) {
  ref::Matrix w = random_matrix(out, in, rng);
  std::uniform_int_distribution<int> exponent(-6, 6);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t b = 0; b < in / 32; ++b) w.row(o).segment(b * 32, 32) *= std::ldexp(1.0f, exponent(rng));
  }
  QuantizedMatrix q;
  q.packed.resize(size_t(out * in / 2));
  q.scales.resize(size_t(out * in / 32));
  weights::mxfp4_quantize(w.data(), out * in, q.packed.data(), q.scales.data());
  ref::Matrix dequantized(out, in);
  weights::mxfp4_dequantize(q.packed.data(), q.scales.data(), out * in, dequantized.data());
  q.dequantized = dequantized.cast<double>();
  return q;
}

ref::Matrix to_float(const ref::MatrixD& m) { return m.cast<float>(); }

TEST(GpuMxfp4Gemv, MatchesFp64Reference) {
  struct Shape {
    int64_t out, in, x_pad;  // x_pad: extra elements per x row (a multiple of 8)
  };
  const Shape shapes[] = {{3072, 3584, 0}, {3584, 3072, 8}, {33, 64, 16}};
  std::mt19937 rng(20261203);
  for (const Shape& s : shapes) {
    const QuantizedMatrix w = random_quantized(s.out, s.in, rng);
    for (const int64_t tokens : {1, 4, 16}) {
      const std::string label = fmt::format("out={} in={} T={}", s.out, s.in, tokens);
      const int64_t x_stride = s.in + s.x_pad, y_stride = s.out + 1;
      const ref::Matrix x = round_to_bf16(random_matrix(tokens, x_stride, rng));
      const ref::MatrixD expected = x.leftCols(s.in).cast<double>() * w.dequantized.transpose();
      ASSERT_TRUE(expected.allFinite()) << label;
      K3_REQUIRE_GPU();
      DeviceBuffer<uint8_t> dpacked(w.packed), dscales(w.scales);
      DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
      DeviceBuffer<float> dy(tokens * y_stride);
      CUDA_CHECK(kernels::mxfp4_gemv_bf16(dpacked.get(), dscales.get(), s.out, s.in, dx.get(), x_stride, tokens,
                                          dy.get(), y_stride, nullptr));
      const ref::Matrix got = from_f32(dy.download(), tokens, y_stride).leftCols(s.out);
      EXPECT_LE(normalized_error(got, to_float(expected)), kTolerance) << label;
    }
  }
}

// A NaN scale (0xFF) makes its row NaN and leaves the other rows alone.
TEST(GpuMxfp4Gemv, NanScalePoisonsOnlyItsRow) {
  std::mt19937 rng(20261204);
  const int64_t out = 33, in = 64, tokens = 2;
  QuantizedMatrix w = random_quantized(out, in, rng);
  w.scales[5 * (in / 32) + 1] = weights::kE8m0Nan;  // row 5, second block
  const ref::Matrix x = round_to_bf16(random_matrix(tokens, in, rng));
  const ref::MatrixD expected = x.cast<double>() * w.dequantized.transpose();
  K3_REQUIRE_GPU();
  DeviceBuffer<uint8_t> dpacked(w.packed), dscales(w.scales);
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
  DeviceBuffer<float> dy(tokens * out);
  CUDA_CHECK(
      kernels::mxfp4_gemv_bf16(dpacked.get(), dscales.get(), out, in, dx.get(), in, tokens, dy.get(), out, nullptr));
  const ref::Matrix got = from_f32(dy.download(), tokens, out);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t o = 0; o < out; ++o) {
      if (o == 5) {
        EXPECT_TRUE(std::isnan(got(t, o))) << t;
      } else {
        EXPECT_NEAR(got(t, o), expected(t, o), 1e-5 * (1.0 + std::abs(expected(t, o)))) << t << "," << o;
      }
    }
  }
}

TEST(GpuMxfp4Gemv, ExpertsMatchFp64Reference) {
  struct Shape {
    int64_t out, in;
  };
  const Shape shapes[] = {{200, 3584}, {33, 64}};
  constexpr int kExperts = kernels::kMxfp4GemvMaxExperts;
  constexpr int kPoolTokens = 16;  // rows of x the experts pick from
  std::mt19937 rng(20261205);
  // Pattern 0: token counts 0..16 (the general kernel); pattern 1: at most one token per expert
  // (the decode path with several rows per warp).
  for (int pattern = 0; pattern < 2; ++pattern)
  for (const Shape& s : shapes) {
    const std::string label = fmt::format("out={} in={} pattern={}", s.out, s.in, pattern);
    std::vector<QuantizedMatrix> matrices;
    for (int e = 0; e < kExperts; ++e) matrices.push_back(random_quantized(s.out, s.in, rng));
    const int64_t x_stride = s.in + 8, y_stride = s.out + 3;
    const ref::Matrix x = round_to_bf16(random_matrix(kPoolTokens, x_stride, rng));

    // List entry e uses matrix order[e]; token counts 0..16 (e·5 mod 17 covers every count once).
    std::vector<int> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    kernels::Mxfp4GemvExperts list;
    list.count = kExperts;
    for (int e = 0; e < kExperts; ++e) {
      list.token_count[e] = pattern == 0 ? (e * 5) % 17 : e % 2;
      std::vector<int32_t> pool(kPoolTokens);
      std::iota(pool.begin(), pool.end(), 0);
      std::shuffle(pool.begin(), pool.end(), rng);
      std::copy_n(pool.begin(), list.token_count[e], list.token_index[e]);
    }
    const int rows = list.output_rows();
    ref::MatrixD expected(rows, s.out);
    int row = 0;
    for (int e = 0; e < kExperts; ++e) {
      for (int j = 0; j < list.token_count[e]; ++j, ++row) {
        expected.row(row) =
            x.row(list.token_index[e][j]).leftCols(s.in).cast<double>() * matrices[order[e]].dequantized.transpose();
      }
    }
    ASSERT_TRUE(expected.allFinite()) << label;
    K3_REQUIRE_GPU();

    // All experts in one buffer, as a checkpoint's expert bank would be.
    const size_t packed_bytes = matrices[0].packed.size(), scale_bytes = matrices[0].scales.size();
    std::vector<uint8_t> packed_bank, scale_bank;
    for (const QuantizedMatrix& m : matrices) {
      packed_bank.insert(packed_bank.end(), m.packed.begin(), m.packed.end());
      scale_bank.insert(scale_bank.end(), m.scales.begin(), m.scales.end());
    }
    DeviceBuffer<uint8_t> dpacked(packed_bank), dscales(scale_bank);
    for (int e = 0; e < kExperts; ++e) {
      list.packed[e] = dpacked.get() + order[e] * packed_bytes;
      list.scales[e] = dscales.get() + order[e] * scale_bytes;
    }
    DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
    DeviceBuffer<float> dy(rows * y_stride);
    CUDA_CHECK(kernels::mxfp4_gemv_experts_bf16(list, s.out, s.in, dx.get(), x_stride, kPoolTokens, dy.get(), y_stride,
                                                nullptr));
    const ref::Matrix got = from_f32(dy.download(), rows, y_stride).leftCols(s.out);
    EXPECT_LE(normalized_error(got, to_float(expected)), kTolerance) << label;
  }
}

// Argument checks happen on the host before any launch, so they run without a GPU too.
TEST(GpuMxfp4Gemv, RejectsBadArguments) {
  alignas(16) static uint8_t packed[64], scales[64];
  alignas(16) static __nv_bfloat16 x[256];
  static float y[256];
  const auto gemv = [&](int64_t in, const __nv_bfloat16* xp, int64_t x_stride, int64_t tokens) {
    return kernels::mxfp4_gemv_bf16(packed, scales, 2, in, xp, x_stride, tokens, y, 2, nullptr);
  };
  EXPECT_EQ(gemv(48, x, 48, 1), cudaErrorInvalidValue);      // in not a multiple of 32
  EXPECT_EQ(gemv(32, x, 32, 17), cudaErrorInvalidValue);     // too many tokens
  EXPECT_EQ(gemv(32, x + 1, 32, 1), cudaErrorInvalidValue);  // x not 16-byte aligned
  EXPECT_EQ(gemv(32, x, 36, 1), cudaErrorInvalidValue);      // x stride not a multiple of 8
  EXPECT_EQ(kernels::mxfp4_gemv_bf16(packed + 1, scales, 2, 32, x, 32, 1, y, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(gemv(32, x, 32, 0), cudaSuccess);

  kernels::Mxfp4GemvExperts list;
  list.count = 1;
  list.packed[0] = packed;
  list.scales[0] = scales;
  list.token_count[0] = 1;
  list.token_index[0][0] = 4;  // x has 4 rows
  EXPECT_EQ(kernels::mxfp4_gemv_experts_bf16(list, 2, 32, x, 32, 4, y, 2, nullptr), cudaErrorInvalidValue);
  list.token_count[0] = 17;
  EXPECT_EQ(kernels::mxfp4_gemv_experts_bf16(list, 2, 32, x, 32, 4, y, 2, nullptr), cudaErrorInvalidValue);
  list.count = kernels::kMxfp4GemvMaxExperts + 1;
  EXPECT_EQ(kernels::mxfp4_gemv_experts_bf16(list, 2, 32, x, 32, 4, y, 2, nullptr), cudaErrorInvalidValue);
  list.count = 1;
  list.token_count[0] = 0;
  EXPECT_EQ(kernels::mxfp4_gemv_experts_bf16(list, 2, 32, x, 32, 4, y, 2, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
