#include "engine/weights/tensor_dtype.h"

#include "core/error.h"

#include <array>

namespace k3::weights {
namespace {

struct DtypeEntry {
  TensorDtype dtype;
  const char* name;
  int64_t size_bytes;
};

constexpr std::array<DtypeEntry, 7> kDtypes{{
    {TensorDtype::bf16, "BF16", 2},
    {TensorDtype::f16, "F16", 2},
    {TensorDtype::f32, "F32", 4},
    {TensorDtype::u8, "U8", 1},
    {TensorDtype::i8, "I8", 1},
    {TensorDtype::i32, "I32", 4},
    {TensorDtype::f8_e4m3, "F8_E4M3", 1},
}};

constexpr bool entries_follow_the_enum() {
  for (size_t i = 0; i < kDtypes.size(); ++i) {
    if (static_cast<size_t>(kDtypes[i].dtype) != i) return false;
  }
  return true;
}
static_assert(entries_follow_the_enum(), "kDtypes is indexed by TensorDtype");

const DtypeEntry& entry(TensorDtype dtype) {
  const auto index = static_cast<size_t>(dtype);
  K3_CHECK(index < kDtypes.size(), "unknown TensorDtype {}", index);
  return kDtypes[index];
}

}  // namespace

int64_t element_size_bytes(TensorDtype dtype) { return entry(dtype).size_bytes; }

std::string to_string(TensorDtype dtype) { return entry(dtype).name; }

bool parse_tensor_dtype(const std::string& name, TensorDtype* out) {
  for (const DtypeEntry& e : kDtypes) {
    if (name == e.name) {
      *out = e.dtype;
      return true;
    }
  }
  return false;
}

std::string known_tensor_dtype_names() {
  std::string names;
  for (const DtypeEntry& e : kDtypes) names += names.empty() ? e.name : fmt::format(", {}", e.name);
  return names;
}

std::optional<int64_t> element_count(std::span<const int64_t> shape) {
  int64_t count = 1;
  for (const int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(count, dim, &count)) return std::nullopt;
  }
  return count;
}

std::optional<int64_t> tensor_size_bytes(TensorDtype dtype, std::span<const int64_t> shape) {
  const std::optional<int64_t> count = element_count(shape);
  int64_t size_bytes = 0;
  if (!count || __builtin_mul_overflow(*count, element_size_bytes(dtype), &size_bytes)) return std::nullopt;
  return size_bytes;
}

}  // namespace k3::weights
