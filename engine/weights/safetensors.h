// Reads one safetensors file: an 8-byte little-endian header length N, N bytes of JSON
//   {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}
// (optionally padded with spaces), then the data; offsets count from the byte after the header.
// The file is memory-mapped; every header field is validated before any byte of data is handed out,
// so a hostile file produces an InputError naming the file and the tensor (or "header").
#pragma once

#include "core/limits.h"
#include "engine/weights/mapped_file.h"
#include "engine/weights/tensor_dtype.h"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace k3::weights {

// As the reference reader.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = static_cast<uint64_t>(limit::header_bytes.value);

struct TensorInfo {
  std::string name;
  TensorDtype dtype = TensorDtype::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // absolute file offsets of the data, [begin, end)
  uint64_t end = 0;

  int64_t elements() const;
  uint64_t size_bytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // In the order of their data in the file (by begin offset, then name).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  // Positions in tensors() in the order of the tensors' names.
  const std::vector<uint32_t>& order_by_name() const { return by_name_; }
  // The tensor's bytes inside the mapping; valid while this object lives. `info` must be one of tensors().
  std::span<const uint8_t> bytes(const TensorInfo& info) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<TensorInfo> tensors_;  // the entries of a header of a million tensors take about 150 MB
  std::vector<uint32_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace k3::weights
