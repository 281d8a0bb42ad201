// Reading Chrome trace-event JSON as a stream: bytes in chunks (a file inflated on a second thread),
// JsonTokenizer, and ChromeTraceHandler filling the Trace as events close.
#include "core/error.h"
#include "profiler/trace/chrome_json.h"
#include "profiler/trace/chrome_trace_handler.h"
#include "profiler/trace/gzip.h"
#include "profiler/trace/json_tokenizer.h"
#include "profiler/trace/prefetch_source.h"

#include <fmt/format.h>

namespace k3::profiler {

Trace parse_chrome_json(ByteSource& in, const std::string& origin) {
  ChromeTraceHandler handler(origin);
  JsonTokenizer<ChromeTraceHandler>(in, handler, origin).parse();
  return handler.finish();
}

Trace parse_chrome_json(const std::string& text, const std::string& origin) {
  StringSource in(text);
  return parse_chrome_json(in, origin);
}

Trace read_trace(const std::string& path) {
  FileSource file(path);
  if (!is_gzip(std::string(file.peek(2)))) {
    PrefetchSource ahead(file);
    return parse_chrome_json(ahead, path);
  }
  GzipSource inflated(file, path);
  PrefetchSource ahead(inflated);
  return parse_chrome_json(ahead, path);
}

}  // namespace k3::profiler
