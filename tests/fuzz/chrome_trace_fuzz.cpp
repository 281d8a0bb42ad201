// Chrome trace-event JSON through the streaming reader (profiler/trace), in small chunks so that tokens cross
// chunk boundaries; gzip input is inflated first, as read_trace does.
#include "fuzz_target.h"
#include "profiler/trace/byte_source.h"
#include "profiler/trace/chrome_json.h"
#include "profiler/trace/gzip.h"

K3PERF_FUZZ_TEXT_TARGET(chrome_trace) {
  k3::profiler::StringSource chunks(text, 7);
  if (k3::profiler::is_gzip(text)) {
    k3::profiler::GzipSource inflated(chunks, "fuzz.json.gz");
    k3::profiler::parse_chrome_json(inflated, "fuzz.json.gz");
  } else {
    k3::profiler::parse_chrome_json(chunks, "fuzz.json");
  }
}
