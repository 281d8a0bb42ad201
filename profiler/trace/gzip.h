// gzip (RFC 1952) through zlib, for .json.gz traces: in memory, and as a stream inflated in chunks. The
// member written carries no file name and a zero modification time, so the same trace gives the same bytes.
#pragma once

#include "profiler/trace/byte_source.h"

#include <memory>
#include <string>
#include <vector>

struct z_stream_s;

namespace k3::profiler {

bool is_gzip(const std::string& data);  // starts with the gzip magic bytes 1f 8b
// level: 1 (fastest) .. 9 (smallest), or -1 for zlib's default (6).
std::string gzip_compress(const std::string& data, int level = -1);
// Throws InputError naming `origin` when the data is not a complete gzip stream.
std::string gzip_decompress(const std::string& data, const std::string& origin);

// The inflated bytes of the gzip stream read from `compressed`, up to the end of its first member;
// InputError naming `origin` when the stream is truncated or corrupt.
class GzipSource final : public ByteSource {
 public:
  GzipSource(ByteSource& compressed, std::string origin);
  ~GzipSource() override;
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;
  std::size_t read(char* out, std::size_t capacity) override;

 private:
  ByteSource& compressed_;
  std::string origin_;
  std::unique_ptr<z_stream_s> z_;
  std::vector<char> in_;              // compressed bytes read ahead
  std::size_t compressed_bytes_ = 0;  // read from `compressed` so far
  bool ended_ = false;
};

}  // namespace k3::profiler
