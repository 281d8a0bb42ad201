// MX formats (OCP Microscaling v1.0) against values worked out by hand from the spec, plus a
// brute-force nearest-value check on random blocks.
#include "engine/weights/mx_format.h"

#include "expect_input_error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace k3::weights {
namespace {

// E2M1 by code: sign in bit 3, magnitude index in bits 0-2.
constexpr std::array<float, 16> kE2m1ByCode{0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

TEST(MxE2m1, DecodesEveryCode) {
  for (int code = 0; code < 16; ++code) {
    EXPECT_EQ(e2m1_decode(static_cast<uint8_t>(code)), kE2m1ByCode[code]) << "code " << code;
    EXPECT_EQ(std::signbit(e2m1_decode(static_cast<uint8_t>(code))), code >= 8) << "code " << code;
  }
}

TEST(MxE2m1, EncodesEveryRepresentableValueToItsCode) {
  for (int code = 0; code < 16; ++code) EXPECT_EQ(e2m1_encode(kE2m1ByCode[code]), code) << kE2m1ByCode[code];
}

TEST(MxE2m1, RoundsToNearestWithTiesToEven) {
  struct Case {
    float value;
    uint8_t code;
  };
  const Case cases[] = {
      {0.25f, 0x0},  // tie 0 | 0.5: 0 has the even code
      {0.75f, 0x2},  // tie 0.5 | 1: 1.0 (mantissa 0)
      {1.25f, 0x2},  // tie 1 | 1.5 -> 1
      {1.75f, 0x4},  // tie 1.5 | 2 -> 2
      {2.5f, 0x4},   // tie 2 | 3 -> 2
      {3.5f, 0x6},   // tie 3 | 4 -> 4
      {5.0f, 0x6},   // tie 4 | 6 -> 4
      {-2.5f, 0xC},  // sign does not change the tie rule
      {0.3f, 0x1},   // nearer 0.5
      {0.2f, 0x0},   // nearer 0
      {2.6f, 0x5},   // nearer 3
      {4.9f, 0x6},   // nearer 4
      {5.1f, 0x7},   // nearer 6
  };
  for (const Case& c : cases) EXPECT_EQ(e2m1_encode(c.value), c.code) << c.value;
}

TEST(MxE2m1, SaturatesToSix) {
  EXPECT_EQ(e2m1_encode(7.0f), 0x7);
  EXPECT_EQ(e2m1_encode(100.0f), 0x7);
  EXPECT_EQ(e2m1_encode(-7.0f), 0xF);
  EXPECT_EQ(e2m1_encode(INFINITY), 0x7);
  EXPECT_EQ(e2m1_encode(-INFINITY), 0xF);
  EXPECT_EQ(e2m1_encode(NAN), 0x0);  // no NaN in E2M1
}

TEST(MxE4m3, DecodesHandPickedCodes) {
  EXPECT_EQ(e4m3_decode(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(e4m3_decode(0x80)));
  EXPECT_EQ(e4m3_decode(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_decode(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_decode(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_decode(0x38), 1.0f);                  // exponent field 7 = bias
  EXPECT_EQ(e4m3_decode(0x3A), 1.25f);
  EXPECT_EQ(e4m3_decode(0x77), 240.0f);  // 1.875 · 2^7
  EXPECT_EQ(e4m3_decode(0x7E), 448.0f);  // 1.75 · 2^8, the largest
  EXPECT_EQ(e4m3_decode(0xFE), -448.0f);
  EXPECT_EQ(e4m3_decode(0xB8), -1.0f);
  EXPECT_TRUE(std::isnan(e4m3_decode(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_decode(0xFF)));
}

TEST(MxE4m3, EncodesWithTiesToEvenSubnormalsAndSaturation) {
  EXPECT_EQ(e4m3_encode(448.0f), 0x7E);
  EXPECT_EQ(e4m3_encode(-448.0f), 0xFE);
  EXPECT_EQ(e4m3_encode(464.0f), 0x7E);  // tie 448 | 480: 448 (480 would be the NaN code anyway)
  EXPECT_EQ(e4m3_encode(500.0f), 0x7E);
  EXPECT_EQ(e4m3_encode(1e30f), 0x7E);
  EXPECT_EQ(e4m3_encode(INFINITY), 0x7E);
  EXPECT_EQ(e4m3_encode(-INFINITY), 0xFE);
  EXPECT_EQ(e4m3_encode(NAN), 0x7F);
  EXPECT_EQ(e4m3_encode(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(e4m3_encode(std::ldexp(1.0f, -10)), 0x00);      // tie 0 | 2^-9 -> 0
  EXPECT_EQ(e4m3_encode(std::ldexp(1.1f, -10)), 0x01);      // just above the tie
  EXPECT_EQ(e4m3_encode(3 * std::ldexp(1.0f, -10)), 0x02);  // tie 2^-9 | 2^-8 -> 2^-8 (even)
  EXPECT_EQ(e4m3_encode(std::ldexp(1.0f, -6)), 0x08);
  EXPECT_EQ(e4m3_encode(1.0625f), 0x38);  // tie 1 | 1.125 -> 1
  EXPECT_EQ(e4m3_encode(1.1875f), 0x3A);  // tie 1.125 | 1.25 -> 1.25
  EXPECT_EQ(e4m3_encode(-1.1875f), 0xBA);
  EXPECT_EQ(e4m3_encode(1.9375f), 0x40);  // tie 1.875 | 2 carries into the next binade
}

TEST(MxE4m3, EveryFiniteCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;
    EXPECT_EQ(e4m3_encode(e4m3_decode(static_cast<uint8_t>(code))), code) << "code " << code;
  }
}

TEST(MxE8m0, DecodesScaleBytes) {
  EXPECT_EQ(e8m0_decode(0), std::ldexp(1.0f, -127));
  EXPECT_GT(e8m0_decode(0), 0.0f);
  EXPECT_EQ(e8m0_decode(127), 1.0f);
  EXPECT_EQ(e8m0_decode(130), 8.0f);
  EXPECT_EQ(e8m0_decode(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_decode(255)));
}

TEST(Mxfp4, PacksTheEvenElementInTheLowNibble) {
  std::array<float, 32> x{};
  x[0] = 0.5f;   // code 0x1
  x[1] = -1.0f;  // code 0xA
  x[2] = 6.0f;   // code 0x7
  x[3] = 3.0f;   // code 0x5
  x[4] = -6.0f;  // code 0xF
  x[31] = 1.5f;  // code 0x3, high nibble of the last byte
  std::array<uint8_t, 16> packed{};
  uint8_t scale = 0;
  mxfp4_quantize(x.data(), 32, packed.data(), &scale);
  EXPECT_EQ(scale, 127);  // max 6: floor(log2 6) - 2 = 0
  std::array<uint8_t, 16> expected{};
  expected[0] = 0xA1;
  expected[1] = 0x57;
  expected[2] = 0x0F;
  expected[15] = 0x30;
  EXPECT_EQ(packed, expected);
  std::array<float, 32> back{};
  mxfp4_dequantize(packed.data(), &scale, 32, back.data());
  EXPECT_EQ(back, x);
}

TEST(Mxfp4, BlockWithMaxSixTimesPowerOfTwoIsExact) {
  for (const int k : {-130, -20, -3, 0, 5, 100}) {
    std::array<float, 32> x{};
    for (int i = 0; i < 32; ++i) x[i] = std::ldexp(kE2m1ByCode[(i * 7) % 16], k);  // every code appears
    x[5] = std::ldexp(6.0f, k);
    std::array<uint8_t, 16> packed{};
    uint8_t scale = 0;
    mxfp4_quantize(x.data(), 32, packed.data(), &scale);
    EXPECT_EQ(scale, std::max(127 + k, 0)) << "k " << k;  // below 2^-127 the scale clamps
    std::array<float, 32> back{};
    mxfp4_dequantize(packed.data(), &scale, 32, back.data());
    if (k >= -127) {
      EXPECT_EQ(back, x) << "k " << k;
    }
  }
}

TEST(Mxfp4, ScaleFollowsTheSpecAndClampsTheLargestElement) {
  std::array<float, 32> x{};
  x[0] = 7.0f;   // floor(log2 7) = 2 -> X = 1; 7 saturates to 6
  x[1] = 0.25f;  // tie 0 | 0.5 -> 0
  std::array<uint8_t, 16> packed{};
  uint8_t scale = 0;
  mxfp4_quantize(x.data(), 32, packed.data(), &scale);
  EXPECT_EQ(scale, 127);
  EXPECT_EQ(packed[0], 0x07);

  x = {};
  x[0] = 0.1f;    // floor(log2 0.1) = -4 -> X = 2^-6; 0.1·64 = 6.4 -> 6
  x[1] = -0.03f;  // -1.92 -> -2
  mxfp4_quantize(x.data(), 32, packed.data(), &scale);
  EXPECT_EQ(scale, 121);
  std::array<float, 32> back{};
  mxfp4_dequantize(packed.data(), &scale, 32, back.data());
  EXPECT_EQ(back[0], 6.0f / 64);
  EXPECT_EQ(back[1], -2.0f / 64);
}

TEST(Mxfp4, ZeroBlockGetsTheSmallestScale) {
  std::vector<float> x(64, 0.0f);
  x[40] = 12.0f;  // second block: floor(log2 12) - 2 = 1
  std::vector<uint8_t> packed(32, 0xEE), scales(2, 0xEE);
  mxfp4_quantize(x.data(), 64, packed.data(), scales.data());
  EXPECT_EQ(scales[0], 0);
  EXPECT_EQ(scales[1], 128);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(packed[i], 0);
  std::vector<float> back(64, -1.0f);
  mxfp4_dequantize(packed.data(), scales.data(), 64, back.data());
  EXPECT_EQ(back, x);
}

TEST(Mxfp4, NanOrInfinityGivesTheNanScaleAndANanBlock) {
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> x(64, 1.0f);
    x[3] = bad;
    std::vector<uint8_t> packed(32), scales(2);
    mxfp4_quantize(x.data(), 64, packed.data(), scales.data());
    EXPECT_EQ(scales[0], 0xFF);
    EXPECT_EQ(scales[1], 125);  // max 1: floor(log2 1) - 2 = -2
    std::vector<float> back(64);
    mxfp4_dequantize(packed.data(), scales.data(), 64, back.data());
    for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(back[i])) << i;
    for (int i = 32; i < 64; ++i) EXPECT_EQ(back[i], 1.0f) << i;
  }
  // A NaN scale written by someone else decodes its whole block to NaN too.
  const std::vector<uint8_t> zeros(16, 0);
  const uint8_t nan_scale = 0xFF;
  std::vector<float> back(32);
  mxfp4_dequantize(zeros.data(), &nan_scale, 32, back.data());
  for (const float v : back) EXPECT_TRUE(std::isnan(v));
  mxfp8_dequantize(std::vector<uint8_t>(32, 0x38).data(), &nan_scale, 32, back.data());
  for (const float v : back) EXPECT_TRUE(std::isnan(v));
}

TEST(Mxfp8, BlockWithMax448TimesPowerOfTwoIsExact) {
  std::array<float, 32> x{};
  const float values[] = {448.0f, -1.0f, 0.5f, std::ldexp(1.0f, -9), -240.0f, 1.125f, 0.0f, 3.5f};
  for (int i = 0; i < 32; ++i) x[i] = std::ldexp(values[i % 8], -4);
  std::array<uint8_t, 32> elements{};
  uint8_t scale = 0;
  mxfp8_quantize(x.data(), 32, elements.data(), &scale);
  EXPECT_EQ(scale, 127 - 4);  // floor(log2 28) - 8 = -4
  EXPECT_EQ(elements[0], 0x7E);
  EXPECT_EQ(elements[1], 0xB8);
  EXPECT_EQ(elements[3], 0x01);
  std::array<float, 32> back{};
  mxfp8_dequantize(elements.data(), &scale, 32, back.data());
  EXPECT_EQ(back, x);
}

TEST(Mxfp8, LargestElementAboveTheMaxNormalSaturates) {
  std::array<float, 32> x{};
  x[0] = 500.0f;   // floor(log2 500) = 8 -> X = 1; 500 -> 448
  x[1] = 1.0625f;  // tie -> 1
  std::array<uint8_t, 32> elements{};
  uint8_t scale = 0;
  mxfp8_quantize(x.data(), 32, elements.data(), &scale);
  EXPECT_EQ(scale, 127);
  EXPECT_EQ(elements[0], 0x7E);
  EXPECT_EQ(elements[1], 0x38);
}

TEST(MxBlocks, LengthMustBeAMultipleOfThirtyTwo) {
  std::vector<float> x(48, 1.0f), out(48);
  std::vector<uint8_t> codes(48), scales(2);
  test::expect_input_error([&] { mxfp4_quantize(x.data(), 48, codes.data(), scales.data()); }, {"48", "32"});
  test::expect_input_error([&] { mxfp4_dequantize(codes.data(), scales.data(), 33, out.data()); }, {"33"});
  test::expect_input_error([&] { mxfp8_quantize(x.data(), 40, codes.data(), scales.data()); }, {"40"});
  test::expect_input_error([&] { mxfp8_dequantize(codes.data(), scales.data(), -32, out.data()); }, {"-32"});
  mxfp4_quantize(x.data(), 0, codes.data(), scales.data());  // an empty tensor is fine
}

// Every representable magnitude of a format, built from its definition (not from the codec).
std::vector<double> e2m1_magnitudes() { return {0, 0.5, 1, 1.5, 2, 3, 4, 6}; }

std::vector<double> e4m3_magnitudes() {
  std::vector<double> values;
  for (int exponent_field = 0; exponent_field < 16; ++exponent_field) {
    for (int mantissa = 0; mantissa < 8; ++mantissa) {
      if (exponent_field == 15 && mantissa == 7) continue;  // NaN
      values.push_back(exponent_field == 0 ? mantissa * std::pow(2.0, -9)
                                           : (1 + mantissa / 8.0) * std::pow(2.0, exponent_field - 7));
    }
  }
  return values;
}

struct FormatUnderTest {
  const char* name;
  int emax;
  int mantissa_bits;
  int min_normal_exponent;
  double max_normal;
  std::vector<double> magnitudes;
};

// Quantise and dequantise with the format; returns the decoded values and the block scales.
std::vector<float> round_trip(const FormatUnderTest& f, const std::vector<float>& x, std::vector<uint8_t>& scales) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> back(x.size());
  scales.assign(x.size() / 32, 0);
  if (f.mantissa_bits == 1) {
    std::vector<uint8_t> packed(x.size() / 2);
    mxfp4_quantize(x.data(), n, packed.data(), scales.data());
    mxfp4_dequantize(packed.data(), scales.data(), n, back.data());
  } else {
    std::vector<uint8_t> elements(x.size());
    mxfp8_quantize(x.data(), n, elements.data(), scales.data());
    mxfp8_dequantize(elements.data(), scales.data(), n, back.data());
  }
  return back;
}

TEST(MxBlocks, RandomBlocksRoundToTheNearestValueWithinHalfAnUlp) {
  const FormatUnderTest formats[] = {
      {"MXFP4", 2, 1, 0, 6.0, e2m1_magnitudes()},
      {"MXFP8", 8, 3, -6, 448.0, e4m3_magnitudes()},
  };
  std::mt19937 rng(20240611);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> block_exponent(-30, 30);
  for (const FormatUnderTest& f : formats) {
    std::vector<float> x(32 * 200);
    for (size_t block = 0; block < x.size() / 32; ++block) {
      const int exponent = block_exponent(rng);
      for (size_t i = 0; i < 32; ++i) x[block * 32 + i] = std::ldexp(normal(rng), exponent);
    }
    std::vector<uint8_t> scales;
    const std::vector<float> back = round_trip(f, x, scales);
    int saturated = 0;
    for (size_t block = 0; block < scales.size(); ++block) {
      double max_magnitude = 0;
      for (size_t i = 0; i < 32; ++i) max_magnitude = std::max(max_magnitude, std::fabs(double(x[block * 32 + i])));
      const int scale_exponent = static_cast<int>(std::floor(std::log2(max_magnitude))) - f.emax;
      ASSERT_EQ(scales[block], scale_exponent + 127) << f.name << " block " << block;
      const double scale = std::pow(2.0, scale_exponent);
      // Half an ULP of the top binade [2^emax, 2^(emax+1)), at the block scale.
      const double block_half_ulp = scale * std::pow(2.0, f.emax - f.mantissa_bits - 1);
      for (size_t i = 0; i < 32; ++i) {
        const double v = x[block * 32 + i];
        const double scaled = std::fabs(v) / scale;
        const double error = std::fabs(double(back[block * 32 + i]) - v);
        if (scaled > f.max_normal) {  // saturation: the error is the distance to the largest value
          ++saturated;
          EXPECT_EQ(std::fabs(double(back[block * 32 + i])), f.max_normal * scale) << f.name;
          continue;
        }
        double nearest = INFINITY;
        for (const double m : f.magnitudes) nearest = std::min(nearest, std::fabs(m - scaled));
        EXPECT_LE(error, nearest * scale) << f.name << " value " << v;
        const int binade = std::max(static_cast<int>(std::floor(std::log2(scaled))), f.min_normal_exponent);
        EXPECT_LE(error, scale * std::pow(2.0, binade - f.mantissa_bits - 1)) << f.name << " value " << v;
        EXPECT_LE(error, block_half_ulp) << f.name << " value " << v;
      }
    }
    EXPECT_GT(saturated, 0) << f.name << ": the data should reach the saturation range";
  }
}

// mxfp4_quantize encodes by midpoint comparisons; they must agree with the general encoder
// everywhere: every tie and its neighbours, and a dense sweep over the whole E2M1 range.
TEST(MxFormat, E2m1MidpointEncoderEqualsExact) {
  for (float tie :
       {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f}) {
    for (float v : {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, 100.0f)}) {
      EXPECT_EQ(e2m1_encode_by_midpoints(v), e2m1_encode(v)) << v;
      EXPECT_EQ(e2m1_encode_by_midpoints(-v), e2m1_encode(-v)) << -v;
    }
  }
  for (int i = 0; i <= 800000; ++i) {
    const float v = -8.0f + 16.0f * float(i) / 800000.0f;
    ASSERT_EQ(e2m1_encode_by_midpoints(v), e2m1_encode(v)) << v;
  }
  EXPECT_EQ(e2m1_encode_by_midpoints(1e30f), e2m1_encode(1e30f));
}

}  // namespace
}  // namespace k3::weights
