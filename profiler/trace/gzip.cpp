#include "profiler/trace/gzip.h"

#include "core/error.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

namespace k3::profiler {

namespace {
constexpr int kGzipWindowBits = 15 + 16;  // 32 KiB window, gzip header and trailer
// zlib counts in uInt; feed it slices that fit.
constexpr std::size_t kSlice = std::size_t{1} << 30;
}  // namespace

bool is_gzip(const std::string& data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b;
}

std::string gzip_compress(const std::string& data, int level) {
  K3_CHECK(level == -1 || (level >= 1 && level <= 9), "gzip level {} is not in 1..9 (or -1)", level);
  z_stream z{};
  K3_CHECK(deflateInit2(&z, level, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit2 failed");
  std::string out;
  out.resize(
      deflateBound(&z, static_cast<uLong>(std::min<std::size_t>(data.size(), std::numeric_limits<uLong>::max()))) + 64);
  std::size_t in_pos = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (z.avail_in == 0 && in_pos < data.size()) {
      const std::size_t n = std::min(kSlice, data.size() - in_pos);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + in_pos));
      z.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    if (z.total_out + 1024 > out.size()) out.resize(out.size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + z.total_out);
    z.avail_out = static_cast<uInt>(std::min(kSlice, out.size() - z.total_out));
    status = deflate(&z, in_pos == data.size() ? Z_FINISH : Z_NO_FLUSH);
    K3_CHECK(status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR, "deflate failed: {}", status);
  }
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string gzip_decompress(const std::string& data, const std::string& origin) {
  z_stream z{};
  K3_CHECK(inflateInit2(&z, kGzipWindowBits) == Z_OK, "inflateInit2 failed");
  std::string out(std::max<std::size_t>(data.size() * 4, 4096), '\0');
  std::size_t in_pos = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (z.avail_in == 0 && in_pos < data.size()) {
      const std::size_t n = std::min(kSlice, data.size() - in_pos);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + in_pos));
      z.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    if (z.total_out == out.size()) out.resize(out.size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + z.total_out);
    z.avail_out = static_cast<uInt>(std::min(kSlice, out.size() - z.total_out));
    status = inflate(&z, Z_NO_FLUSH);
    if (status == Z_BUF_ERROR && z.avail_in == 0 && in_pos == data.size()) {  // no input left, no stream end
      inflateEnd(&z);
      throw InputError(fmt::format("{}: truncated gzip data (the stream ends after {} bytes)", origin, data.size()));
    }
    if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
      const std::string why = z.msg ? z.msg : fmt::format("zlib status {}", status);
      inflateEnd(&z);
      throw InputError(fmt::format("{}: corrupt gzip data: {}", origin, why));
    }
  }
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

}  // namespace k3::profiler
