// Bytes read in chunks: the input of the trace reader (a file, a string, a gzip stream over either),
// so that a trace is parsed without ever holding its whole text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace k3::profiler {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Copies up to `capacity` (> 0) bytes to `out`; returns 0 only at the end of the data.
  virtual std::size_t read(char* out, std::size_t capacity) = 0;
};

class StringSource final : public ByteSource {
 public:
  // Each read returns at most `chunk_bytes` (tests feed the reader 1 byte at a time). `text` must outlive this.
  explicit StringSource(std::string_view text, std::size_t chunk_bytes = SIZE_MAX);
  std::size_t read(char* out, std::size_t capacity) override;

 private:
  std::string_view rest_;
  std::size_t chunk_bytes_;
};

class FileSource final : public ByteSource {
 public:
  explicit FileSource(const std::string& path);  // InputError naming the path when it cannot be opened
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  std::size_t read(char* out, std::size_t capacity) override;  // InputError naming the path on a read error
  // Before the first read: the first `bytes` of the file (fewer if it is shorter), which read() still returns.
  std::string_view peek(std::size_t bytes);

 private:
  std::size_t read_file(char* out, std::size_t capacity);
  std::string path_;
  std::FILE* file_;
  std::string peeked_;
  std::size_t peeked_read_ = 0;  // of peeked_, returned by read() so far
};

}  // namespace k3::profiler
