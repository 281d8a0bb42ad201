// Element types of safetensors tensors that k3perf reads and writes, and their byte sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace k3::weights {

// Names as in safetensors headers: "BF16", "F16", "F32", "U8", "I8", "I32", "F8_E4M3".
enum class TensorDtype { bf16, f16, f32, u8, i8, i32, f8_e4m3 };

int64_t element_size_bytes(TensorDtype dtype);
std::string to_string(TensorDtype dtype);
// False on an unknown name (callers produce the user-facing error).
bool parse_tensor_dtype(const std::string& name, TensorDtype* out);
std::string known_tensor_dtype_names();  // "BF16, F16, ..." for error messages

// Element count of a shape; nullopt when a dimension is negative or the product overflows int64.
std::optional<int64_t> element_count(std::span<const int64_t> shape);
// Bytes of a tensor; nullopt when element_count is nullopt or the byte count overflows int64.
std::optional<int64_t> tensor_size_bytes(TensorDtype dtype, std::span<const int64_t> shape);

}  // namespace k3::weights
