// gzip data (profiler/trace/gzip) inflated in memory and as a stream in small reads, both bounded; what inflates
// must compress and inflate back to the same bytes.
#include "fuzz_target.h"
#include "profiler/trace/byte_source.h"
#include "profiler/trace/gzip.h"

#include <cstdlib>

K3PERF_FUZZ_TEXT_TARGET(gzip) {
  const std::string inflated = k3::profiler::gzip_decompress(text, "fuzz.gz");
  k3::profiler::StringSource chunks(text, 5);
  k3::profiler::GzipSource stream(chunks, "fuzz.gz");
  std::string streamed;
  char buffer[13];
  for (std::size_t n; (n = stream.read(buffer, sizeof buffer)) > 0;) streamed.append(buffer, n);
  if (streamed != inflated) std::abort();  // the two ways of reading disagree
  if (k3::profiler::gzip_decompress(k3::profiler::gzip_compress(inflated, 1), "round trip") != inflated) std::abort();
}
