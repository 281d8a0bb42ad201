// OCP Microscaling (MX) v1.0 formats, as K3's routed experts store them (K3-SPEC §6).
//   A block of 32 elements shares one E8M0 scale X = 2^(byte - 127); byte 0xFF is NaN.
//   MXFP4: E2M1 elements, values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}; nibble = sign (bit 3) | magnitude index.
//          Two per byte, the even element in the low nibble.
//   MXFP8: E4M3 elements (bias 7, max 448, subnormals down to 2^-9, no infinities, 0x7F/0xFF NaN).
// Quantisation follows the spec: X = 2^(floor(log2 max|v|) - emax) with emax 2 (E2M1) or 8 (E4M3),
// clamped to [2^-127, 2^127]; an all-zero block gets byte 0. Elements are v/X rounded to nearest, ties
// to even, and saturated to the largest normal. A block holding NaN or ±Inf gets the NaN scale
// (its element codes are 0), and a NaN scale decodes the whole block to NaN.
#pragma once

#include <cstdint>

namespace k3::weights {

inline constexpr int64_t kMxBlockElements = 32;
inline constexpr int kE2m1Emax = 2;  // exponent of the largest E2M1 binade, [4, 8)
inline constexpr int kE4m3Emax = 8;  // [256, 512)
inline constexpr float kE2m1MaxNormal = 6.0f;
inline constexpr float kE4m3MaxNormal = 448.0f;
inline constexpr uint8_t kE8m0Nan = 0xFF;

float e2m1_decode(uint8_t nibble);  // the upper four bits are ignored
// RNE and saturation to ±6. E2M1 has no NaN: NaN encodes as +0 (quantisation marks such blocks
// with the NaN scale instead); -0 and negatives that round to zero keep their sign bit.
uint8_t e2m1_encode(float value);
uint8_t e2m1_encode_by_midpoints(float value);  // the same result by midpoint comparisons (the fast path)

float e4m3_decode(uint8_t code);   // NaN for 0x7F and 0xFF
uint8_t e4m3_encode(float value);  // RNE incl. subnormals, saturates to ±448 (±Inf too), NaN -> 0x7F

float e8m0_decode(uint8_t scale);  // 2^(scale - 127); NaN for 0xFF

// n must be a non-negative multiple of 32 (InputError otherwise).
// packed holds n/2 bytes (low nibble = even element), scales n/32 bytes.
void mxfp4_quantize(const float* x, int64_t n, uint8_t* packed, uint8_t* scales);
void mxfp4_dequantize(const uint8_t* packed, const uint8_t* scales, int64_t n, float* out);
// elements holds n E4M3 codes, scales n/32 bytes.
void mxfp8_quantize(const float* x, int64_t n, uint8_t* elements, uint8_t* scales);
void mxfp8_dequantize(const uint8_t* elements, const uint8_t* scales, int64_t n, float* out);

}  // namespace k3::weights
