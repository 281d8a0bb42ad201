// Widening of stored tensor elements to fp32 (little-endian storage, unaligned bytes allowed).
#pragma once

#include "engine/weights/tensor_dtype.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace k3::weights {

float bf16_to_float(uint16_t bits);
float f16_to_float(uint16_t bits);  // IEEE binary16 incl. subnormals, Inf and NaN

bool decodes_to_float(TensorDtype dtype);  // every dtype but I32, which fp32 cannot hold exactly
// `bytes` must hold a whole number of elements; F8_E4M3 uses the MX E4M3 codec (mx_format.h).
std::vector<float> decode_to_float(TensorDtype dtype, std::span<const uint8_t> bytes);

}  // namespace k3::weights
