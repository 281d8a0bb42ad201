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
#include <functional>
#include <map>
#include <span>
#include <string>
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
  std::string file;  // path of the file that holds the data

  int64_t elements() const;
  uint64_t size_bytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // In the order of their data in the file (by begin offset, then name).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;  // nullptr when absent
  // The tensor's bytes inside the mapping; valid while this object lives. `info` must come from this file.
  std::span<const uint8_t> bytes(const TensorInfo& info) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_by_name_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace k3::weights
