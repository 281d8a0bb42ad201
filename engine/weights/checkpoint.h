// A whole checkpoint: the safetensors shards of a Hugging Face model directory, seen as one set of
// named tensors. `open` accepts
//   - a directory with model.safetensors.index.json ("weight_map": tensor name -> shard file),
//   - a directory with a single model.safetensors,
//   - one .safetensors file.
// With an index, the index and the shards must agree exactly: every listed tensor is in its shard
// and every shard tensor is listed; errors name the index file and the key.
#pragma once

#include "engine/weights/safetensors.h"

#include <cstdint>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace k3::weights {

inline constexpr const char* kSafetensorsIndexFileName = "model.safetensors.index.json";
inline constexpr const char* kSingleSafetensorsFileName = "model.safetensors";

class Checkpoint {
 public:
  static Checkpoint open(const std::string& dir_or_file);

  const std::string& source() const { return source_; }  // what open() was given
  // Every shard's tensors, sorted by name (a view of them: the shards hold them).
  auto tensors() const {
    return std::views::transform(tensors_, [](const Entry& e) -> const TensorInfo& { return *e.info; });
  }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  // InputError naming the checkpoint when the tensor is absent; the span lives as long as this object.
  std::span<const uint8_t> bytes(const std::string& name) const;
  // BF16, F16, F32, F8_E4M3 (E4M3 codec of mx_format.h), I8 and U8 widened to fp32; InputError for I32.
  std::vector<float> to_float(const std::string& name) const;

 private:
  struct Entry {
    const TensorInfo* info;  // in shards_[shard]
    uint32_t shard;
  };
  const Entry* find_entry(std::string_view name) const;  // nullptr when absent
  const Entry& entry(const std::string& name) const;     // InputError when absent

  std::string source_;
  std::vector<SafetensorsFile> shards_;
  std::vector<Entry> tensors_;  // by name
};

}  // namespace k3::weights
