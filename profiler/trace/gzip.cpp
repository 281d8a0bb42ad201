#include "profiler/trace/gzip.h"

#include "core/error.h"
#include "core/limits.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

namespace k3::profiler {

namespace {
constexpr int kGzipWindowBits = 15 + 16;  // 32 KiB window, gzip header and trailer
// zlib counts in uInt; feed it slices that fit.
constexpr std::size_t kSlice = std::size_t{1} << 30;
constexpr std::size_t kCompressedChunkBytes = std::size_t{1} << 16;
constexpr double kInflationFloorBytes = limit::inflation_floor.value;
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
  StringSource compressed(data);
  GzipSource inflated(compressed, origin);
  std::string out(std::max<std::size_t>(data.size() * 4, 4096), '\0');
  std::size_t size = 0;
  while (true) {
    if (size == out.size()) out.resize(out.size() * 2);
    const std::size_t n = inflated.read(out.data() + size, std::min(kSlice, out.size() - size));
    if (n == 0) break;
    size += n;
  }
  out.resize(size);
  return out;
}

GzipSource::GzipSource(ByteSource& compressed, std::string origin)
    : compressed_(compressed),
      origin_(std::move(origin)),
      z_(std::make_unique<z_stream>()),
      in_(kCompressedChunkBytes) {
  K3_CHECK(inflateInit2(z_.get(), kGzipWindowBits) == Z_OK, "inflateInit2 failed");
}

GzipSource::~GzipSource() { inflateEnd(z_.get()); }

std::size_t GzipSource::read(char* out, std::size_t capacity) {
  z_stream& z = *z_;
  z.next_out = reinterpret_cast<Bytef*>(out);
  z.avail_out = static_cast<uInt>(std::min(kSlice, capacity));
  // Loops until some output is made: a read that returns 0 means the end.
  while (!ended_ && z.next_out == reinterpret_cast<Bytef*>(out)) {
    bool input_ended = false;
    if (z.avail_in == 0) {
      const std::size_t n = compressed_.read(in_.data(), in_.size());
      compressed_bytes_ += n;
      input_ended = n == 0;
      z.next_in = reinterpret_cast<Bytef*>(in_.data());
      z.avail_in = static_cast<uInt>(n);
    }
    const int status = inflate(&z, Z_NO_FLUSH);
    if (status == Z_STREAM_END) {
      ended_ = true;
    } else if (status == Z_BUF_ERROR && input_ended) {  // no input left, no stream end
      throw InputError(
          fmt::format("{}: truncated gzip data (the stream ends after {} bytes)", origin_, compressed_bytes_));
    } else if (status != Z_OK && status != Z_BUF_ERROR) {
      throw InputError(
          fmt::format("{}: corrupt gzip data: {}", origin_, z.msg ? z.msg : fmt::format("zlib status {}", status)));
    }
  }
  // A gzip bomb (a megabyte of zeros inflates a thousandfold) is refused before it costs gigabytes.
  const double allowed = kInflationFloorBytes + limit::inflation.value * double(compressed_bytes_);
  if (double(z.total_out) > allowed) {
    throw InputError(
        fmt::format("{}: gzip data inflates to more than {:.0f} bytes from {} compressed bytes (the "
                    "limit is {:.0f} bytes plus {:g} times the compressed size)",
                    origin_, allowed, compressed_bytes_, kInflationFloorBytes, limit::inflation.value));
  }
  return static_cast<std::size_t>(reinterpret_cast<char*>(z.next_out) - out);
}

}  // namespace k3::profiler
