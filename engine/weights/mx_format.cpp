#include "engine/weights/mx_format.h"

#include "core/error.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

namespace k3::weights {
namespace {

// A small float without infinities: sign | exponent field | mantissa; exponent field 0 is subnormal.
struct MiniFloat {
  int mantissa_bits;
  int exponent_bias;
  double max_normal;
};
constexpr MiniFloat kE2m1{1, 1, kE2m1MaxNormal};
constexpr MiniFloat kE4m3{3, 7, kE4m3MaxNormal};
constexpr int kE8m0Bias = 127;

double decode_magnitude(uint8_t code, MiniFloat format) {
  const int exponent_field = code >> format.mantissa_bits;
  const int mantissa = code & ((1 << format.mantissa_bits) - 1);
  if (exponent_field == 0) return std::ldexp(mantissa, 1 - format.exponent_bias - format.mantissa_bits);
  return std::ldexp((1 << format.mantissa_bits) + mantissa,
                    exponent_field - format.exponent_bias - format.mantissa_bits);
}

// Rounds to nearest, ties to even, written out so that it does not depend on the FP rounding mode.
double round_half_even(double x) {
  const double below = std::floor(x);
  const double fraction = x - below;
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(below, 2.0) != 0.0)) return below + 1.0;
  return below;
}

// Code (exponent field and mantissa, no sign) of the representable value nearest to `magnitude` >= 0.
uint8_t encode_magnitude(double magnitude, MiniFloat format) {
  const int min_normal_exponent = 1 - format.exponent_bias;
  double rounded = format.max_normal;  // saturation, also for +Inf
  if (magnitude < format.max_normal) {
    int exponent = 0;
    std::frexp(magnitude, &exponent);  // magnitude in [2^(exponent-1), 2^exponent)
    // Below the normal range the spacing stays that of the smallest binade (subnormals).
    const int binade = std::max(exponent - 1, min_normal_exponent);
    const double spacing = std::ldexp(1.0, binade - format.mantissa_bits);
    rounded = std::min(round_half_even(magnitude / spacing) * spacing, format.max_normal);
  }
  if (rounded < std::ldexp(1.0, min_normal_exponent)) {
    return static_cast<uint8_t>(rounded / std::ldexp(1.0, min_normal_exponent - format.mantissa_bits));
  }
  int exponent = 0;
  const double fraction = std::frexp(rounded, &exponent);  // in [0.5, 1)
  const int mantissa = static_cast<int>((2.0 * fraction - 1.0) * (1 << format.mantissa_bits));
  return static_cast<uint8_t>(((exponent - 1 + format.exponent_bias) << format.mantissa_bits) | mantissa);
}

void check_block_multiple(int64_t n) {
  if (n < 0 || n % kMxBlockElements != 0) {
    throw InputError(
        fmt::format("MX block format: {} elements, expected a non-negative multiple of {}", n, kMxBlockElements));
  }
}

// The shared scale of one block, as its E8M0 exponent (scale byte - 127), or nullopt for a block
// holding NaN or Inf.
std::optional<int> block_scale_exponent(const float* x, int emax) {
  float max_magnitude = 0.0f;
  for (int64_t i = 0; i < kMxBlockElements; ++i) {
    const float magnitude = std::fabs(x[i]);
    if (!std::isfinite(magnitude)) return std::nullopt;
    max_magnitude = std::max(max_magnitude, magnitude);
  }
  if (max_magnitude == 0.0f) return -kE8m0Bias;
  int exponent = 0;
  std::frexp(max_magnitude, &exponent);  // floor(log2 max) = exponent - 1, exact for subnormals too
  return std::clamp(exponent - 1 - emax, -kE8m0Bias, kE8m0Bias);
}

// Quantises every block: codes[i] = encode(x[i] / X), scales[b] = E8M0 byte.
template <typename Encode>
void quantize_blocks(const float* x, int64_t n, int emax, Encode encode, uint8_t* codes, uint8_t* scales) {
  check_block_multiple(n);
  for (int64_t block = 0; block < n / kMxBlockElements; ++block) {
    const float* values = x + block * kMxBlockElements;
    uint8_t* block_codes = codes + block * kMxBlockElements;
    const std::optional<int> scale_exponent = block_scale_exponent(values, emax);
    if (!scale_exponent) {
      scales[block] = kE8m0Nan;
      std::fill(block_codes, block_codes + kMxBlockElements, uint8_t{0});
      continue;
    }
    scales[block] = static_cast<uint8_t>(*scale_exponent + kE8m0Bias);
    const double inverse_scale = std::ldexp(1.0, -*scale_exponent);  // a power of two: products are exact
    for (int64_t i = 0; i < kMxBlockElements; ++i) {
      block_codes[i] = encode(static_cast<double>(values[i]) * inverse_scale);
    }
  }
}

uint8_t encode_e2m1_exact(double v) {
  return static_cast<uint8_t>((std::signbit(v) ? 0x8 : 0x0) | encode_magnitude(std::fabs(v), kE2m1));
}

// The same E2M1 rounding by comparisons with the midpoints between neighbouring codes
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}; a tie goes to the even code (">" keeps the lower code when it is
// even, ">=" takes the upper one when that is even); above 5 it saturates at 6. Much faster than the general encoder;
// mxfp4_quantize uses it and MxFormat.E2m1MidpointEncoderEqualsExact checks the two agree.
uint8_t encode_e2m1_midpoints(double v) {
  const double a = std::fabs(v);
  // Count the midpoints passed; branch-free, since random data would defeat a branch predictor.
  const int code = (a > 0.25) + (a >= 0.75) + (a > 1.25) + (a >= 1.75) + (a > 2.5) + (a >= 3.5) + (a > 5.0);
  return static_cast<uint8_t>((std::signbit(v) ? 0x8 : 0x0) | code);
}

uint8_t encode_e4m3_exact(double v) {
  return static_cast<uint8_t>((std::signbit(v) ? 0x80 : 0x00) | encode_magnitude(std::fabs(v), kE4m3));
}

}  // namespace

float e2m1_decode(uint8_t nibble) {
  const auto magnitude = static_cast<float>(decode_magnitude(nibble & 0x7, kE2m1));
  return (nibble & 0x8) != 0 ? -magnitude : magnitude;
}

uint8_t e2m1_encode(float value) { return std::isnan(value) ? 0 : encode_e2m1_exact(value); }

uint8_t e2m1_encode_by_midpoints(float value) { return std::isnan(value) ? 0 : encode_e2m1_midpoints(value); }

float e4m3_decode(uint8_t code) {
  if ((code & 0x7F) == 0x7F) return std::numeric_limits<float>::quiet_NaN();
  const auto magnitude = static_cast<float>(decode_magnitude(code & 0x7F, kE4m3));
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

uint8_t e4m3_encode(float value) { return std::isnan(value) ? 0x7F : encode_e4m3_exact(value); }

float e8m0_decode(uint8_t scale) {
  if (scale == kE8m0Nan) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, scale - kE8m0Bias);  // 2^-127 is an fp32 subnormal, still exact
}

void mxfp4_quantize(const float* x, int64_t n, uint8_t* packed, uint8_t* scales) {
  check_block_multiple(n);
  std::array<uint8_t, kMxBlockElements> nibbles{};
  for (int64_t block = 0; block < n / kMxBlockElements; ++block) {
    quantize_blocks(x + block * kMxBlockElements, kMxBlockElements, kE2m1Emax, encode_e2m1_midpoints, nibbles.data(),
                    scales + block);
    uint8_t* block_packed = packed + block * kMxBlockElements / 2;
    for (int64_t i = 0; i < kMxBlockElements / 2; ++i) {
      block_packed[i] = static_cast<uint8_t>(nibbles[2 * i] | (nibbles[2 * i + 1] << 4));
    }
  }
}

void mxfp4_dequantize(const uint8_t* packed, const uint8_t* scales, int64_t n, float* out) {
  check_block_multiple(n);
  for (int64_t i = 0; i < n; ++i) {
    const float scale = e8m0_decode(scales[i / kMxBlockElements]);
    const uint8_t nibble = (i % 2 == 0) ? (packed[i / 2] & 0x0F) : (packed[i / 2] >> 4);
    out[i] = e2m1_decode(nibble) * scale;  // NaN scale -> NaN; power-of-two product is exact
  }
}

void mxfp8_quantize(const float* x, int64_t n, uint8_t* elements, uint8_t* scales) {
  quantize_blocks(x, n, kE4m3Emax, encode_e4m3_exact, elements, scales);
}

void mxfp8_dequantize(const uint8_t* elements, const uint8_t* scales, int64_t n, float* out) {
  check_block_multiple(n);
  for (int64_t i = 0; i < n; ++i) out[i] = e4m3_decode(elements[i]) * e8m0_decode(scales[i / kMxBlockElements]);
}

}  // namespace k3::weights
