// MXFP4 and MXFP8 (engine/weights/mx_format): the input's bytes as element codes and scales, decoded; every
// finite decoded block must quantise and decode back to itself (the codes are exact in their own format).
#include "engine/weights/mx_format.h"
#include "fuzz_target.h"

#include <cmath>
#include <cstdlib>
#include <vector>

namespace {

// `a` and `b` agree where both are numbers, and are NaN at the same places.
bool same(const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i]) || (!std::isnan(a[i]) && a[i] != b[i])) return false;
  }
  return true;
}

}  // namespace

K3PERF_FUZZ_TARGET(mx_decode) {
  namespace w = k3::weights;
  // MXFP4: 17 bytes per block of 32 (16 packed, 1 scale); MXFP8: 33 (32 codes, 1 scale).
  const int64_t fp4_blocks = static_cast<int64_t>(data.size() / 17),
                fp8_blocks = static_cast<int64_t>(data.size() / 33);
  const int64_t n4 = fp4_blocks * w::kMxBlockElements, n8 = fp8_blocks * w::kMxBlockElements;
  std::vector<float> x4(n4), x8(n8);
  w::mxfp4_dequantize(data.data(), data.data() + n4 / 2, n4, x4.data());
  w::mxfp8_dequantize(data.data(), data.data() + n8, n8, x8.data());
  // Re-quantising a decoded block gives back its values when no element is NaN and its scale is the one the
  // quantiser would pick; check the property on the decoded values, not on the codes (a block's scale may differ).
  std::vector<uint8_t> packed(n4 / 2), scales4(fp4_blocks), codes(n8), scales8(fp8_blocks);
  std::vector<float> y4(n4), y8(n8);
  w::mxfp4_quantize(x4.data(), n4, packed.data(), scales4.data());
  w::mxfp4_dequantize(packed.data(), scales4.data(), n4, y4.data());
  w::mxfp8_quantize(x8.data(), n8, codes.data(), scales8.data());
  w::mxfp8_dequantize(codes.data(), scales8.data(), n8, y8.data());
  std::vector<float> z4(n4), z8(n8);
  w::mxfp4_quantize(y4.data(), n4, packed.data(), scales4.data());
  w::mxfp4_dequantize(packed.data(), scales4.data(), n4, z4.data());
  w::mxfp8_quantize(y8.data(), n8, codes.data(), scales8.data());
  w::mxfp8_dequantize(codes.data(), scales8.data(), n8, z8.data());
  if (!same(y4, z4) || !same(y8, z8)) std::abort();  // quantise . dequantise is not idempotent
}
