// gzip (RFC 1952) in memory through zlib, for .json.gz traces. The member written carries no file
// name and a zero modification time, so the same trace gives the same bytes.
#pragma once

#include <string>

namespace k3::profiler {

bool is_gzip(const std::string& data);  // starts with the gzip magic bytes 1f 8b
// level: 1 (fastest) .. 9 (smallest), or -1 for zlib's default (6).
std::string gzip_compress(const std::string& data, int level = -1);
// Throws InputError naming `origin` when the data is not a complete gzip stream.
std::string gzip_decompress(const std::string& data, const std::string& origin);

}  // namespace k3::profiler
