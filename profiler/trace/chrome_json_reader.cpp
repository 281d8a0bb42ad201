// Reading Chrome trace-event JSON as a stream: bytes in chunks, nlohmann-json's SAX parser, and
// ChromeTraceHandler filling the Trace as events close.
#include "core/error.h"
#include "profiler/trace/chrome_json.h"
#include "profiler/trace/chrome_trace_handler.h"
#include "profiler/trace/gzip.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <istream>
#include <streambuf>
#include <vector>

namespace k3::profiler {

namespace {

constexpr std::size_t kChunkBytes = std::size_t{1} << 18;

class SourceBuffer : public std::streambuf {
 public:
  explicit SourceBuffer(ByteSource& in) : in_(in), buffer_(kChunkBytes) {}

 protected:
  int_type underflow() override {
    const std::size_t n = in_.read(buffer_.data(), buffer_.size());
    if (n == 0) return traits_type::eof();
    setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
    return traits_type::to_int_type(buffer_[0]);
  }

 private:
  ByteSource& in_;
  std::vector<char> buffer_;
};

struct NlohmannSax {
  using json = nlohmann::json;
  ChromeTraceHandler& h;
  const std::string& origin;

  bool null() { return h.null(), true; }
  bool boolean(bool b) { return h.boolean(b), true; }
  bool number_integer(json::number_integer_t n) { return h.number_integer(n), true; }
  bool number_unsigned(json::number_unsigned_t n) { return h.number_unsigned(n), true; }
  bool number_float(json::number_float_t x, const json::string_t&) { return h.number_float(x), true; }
  bool string(json::string_t& s) { return h.string(s), true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return h.start_object(), true; }
  bool key(json::string_t& k) { return h.key(k), true; }
  bool end_object() { return h.end_object(), true; }
  bool start_array(std::size_t) { return h.start_array(), true; }
  bool end_array() { return h.end_array(), true; }
  bool parse_error(std::size_t position, const std::string&, const json::exception& e) {
    throw InputError(fmt::format("{}: malformed JSON at byte {}: {}", origin, position, e.what()));
  }
};

}  // namespace

Trace parse_chrome_json(ByteSource& in, const std::string& origin) {
  ChromeTraceHandler handler(origin);
  SourceBuffer buffer(in);
  std::istream stream(&buffer);
  NlohmannSax sax{handler, origin};
  nlohmann::json::sax_parse(stream, &sax);
  return handler.finish();
}

Trace parse_chrome_json(const std::string& text, const std::string& origin) {
  StringSource in(text);
  return parse_chrome_json(in, origin);
}

Trace read_trace(const std::string& path) {
  FileSource file(path);
  const std::string_view magic = file.peek(2);
  if (!is_gzip(std::string(magic))) return parse_chrome_json(file, path);
  GzipSource inflated(file, path);
  return parse_chrome_json(inflated, path);
}

}  // namespace k3::profiler
