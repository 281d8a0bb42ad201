// A read-only memory map of a whole file (RAII, movable). Only the pages that are touched are read,
// so opening a 100 GB shard costs nothing until its tensors are used.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace k3::weights {

class MappedFile {
 public:
  // InputError naming the path when it cannot be opened, is not a regular file, or cannot be mapped.
  static MappedFile open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_bytes_}; }
  uint64_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }

 private:
  void release();

  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_bytes_ = 0;
};

}  // namespace k3::weights
