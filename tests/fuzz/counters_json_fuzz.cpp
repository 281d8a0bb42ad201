// A Range Profiler counters file (profiler/counters/range_counters), and the counters written back, which must
// read again.
#include "fuzz_target.h"
#include "profiler/counters/range_counters.h"

K3PERF_FUZZ_TEXT_TARGET(counters_json) {
  const k3::profiler::RangeCounters counters = k3::profiler::parse_range_counters(text, "fuzz.json");
  k3::profiler::parse_range_counters(k3::profiler::to_json_text(counters), "fuzz.json (written back)");
}
