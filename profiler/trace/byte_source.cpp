#include "profiler/trace/byte_source.h"

#include "core/error.h"

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

namespace k3::profiler {

StringSource::StringSource(std::string_view text, std::size_t chunk_bytes) : rest_(text), chunk_bytes_(chunk_bytes) {
  K3_CHECK(chunk_bytes > 0, "chunks of 0 bytes");
}

std::size_t StringSource::read(char* out, std::size_t capacity) {
  const std::size_t n = std::min({capacity, chunk_bytes_, rest_.size()});
  std::memcpy(out, rest_.data(), n);
  rest_.remove_prefix(n);
  return n;
}

FileSource::FileSource(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "rb")) {
  if (!file_) throw InputError(fmt::format("{}: cannot open file ({})", path, std::strerror(errno)));
}

FileSource::~FileSource() { std::fclose(file_); }

std::string_view FileSource::peek(std::size_t bytes) {
  while (peeked_.size() < bytes) {
    char c;
    if (read_file(&c, 1) == 0) break;
    peeked_ += c;
  }
  return std::string_view(peeked_).substr(0, bytes);
}

std::size_t FileSource::read(char* out, std::size_t capacity) {
  if (peeked_read_ < peeked_.size()) {
    const std::size_t n = std::min(capacity, peeked_.size() - peeked_read_);
    std::memcpy(out, peeked_.data() + peeked_read_, n);
    peeked_read_ += n;
    return n;
  }
  return read_file(out, capacity);
}

std::size_t FileSource::read_file(char* out, std::size_t capacity) {
  const std::size_t n = std::fread(out, 1, capacity, file_);
  if (n == 0 && std::ferror(file_))
    throw InputError(fmt::format("{}: cannot read file ({})", path_, std::strerror(errno)));
  return n;
}

}  // namespace k3::profiler
