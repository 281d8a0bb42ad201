#include "engine/weights/tensor_decode.h"

#include "core/error.h"
#include "engine/weights/mx_format.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace k3::weights {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

template <typename T>
T load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));  // tensor data in a mapping need not be aligned
  return value;
}

}  // namespace

float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

float f16_to_float(uint16_t bits) {
  const int exponent_field = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  float magnitude = 0.0f;
  if (exponent_field == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal: mantissa · 2^-24
  } else if (exponent_field == 0x1F) {
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<float>(1024 + mantissa), exponent_field - 25);
  }
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

bool decodes_to_float(TensorDtype dtype) { return dtype != TensorDtype::i32; }

std::vector<float> decode_to_float(TensorDtype dtype, std::span<const uint8_t> bytes) {
  const auto element_bytes = static_cast<size_t>(element_size_bytes(dtype));
  K3_CHECK(decodes_to_float(dtype), "{} does not decode to fp32", to_string(dtype));
  K3_CHECK(bytes.size() % element_bytes == 0, "{} bytes is not a whole number of {} elements", bytes.size(),
           to_string(dtype));
  std::vector<float> out(bytes.size() / element_bytes);
  const uint8_t* p = bytes.data();
  for (size_t i = 0; i < out.size(); ++i, p += element_bytes) {
    switch (dtype) {
      case TensorDtype::bf16: out[i] = bf16_to_float(load<uint16_t>(p)); break;
      case TensorDtype::f16: out[i] = f16_to_float(load<uint16_t>(p)); break;
      case TensorDtype::f32: out[i] = load<float>(p); break;
      case TensorDtype::u8: out[i] = static_cast<float>(*p); break;
      case TensorDtype::i8: out[i] = static_cast<float>(static_cast<int8_t>(*p)); break;
      case TensorDtype::f8_e4m3: out[i] = e4m3_decode(*p); break;
      case TensorDtype::i32: break;  // refused above
    }
  }
  return out;
}

}  // namespace k3::weights
