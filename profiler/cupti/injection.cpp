// The CUPTI collector as a CUDA injection library, so any CUDA program can be traced without being
// rebuilt (`k3perf profile -o trace.json.gz -- program args`). CUDA loads the library named by
// CUDA_INJECTION64_PATH at its initialisation and calls InitializeInjection(); the collector starts
// there and stops at process exit, when the records are attributed to NVTX op ranges (and CUDA-graph
// nodes) and written to $K3PERF_TRACE_OUT ($K3PERF_TRACE_FORMAT: k3perf, the default, or kineto). Errors are printed to
// stderr; the program itself is never stopped by the profiler.
#include "profiler/attribution/attribute.h"
#include "profiler/cupti/cupti_source.h"
#include "profiler/trace/chrome_json.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

namespace {

std::unique_ptr<k3::profiler::CuptiActivitySource> g_collector;

void finish() {
  if (!g_collector) return;
  const char* out = std::getenv("K3PERF_TRACE_OUT");
  try {
    k3::profiler::ActivityRecords records = g_collector->stop();
    g_collector.reset();
    if (const char* command = std::getenv("K3PERF_TRACE_COMMAND")) records.metadata["command"] = command;
    k3::profiler::Attribution attribution = k3::profiler::attribute(records);
    k3::profiler::TraceFormat format = k3::profiler::TraceFormat::k3perf;
    if (const char* name = std::getenv("K3PERF_TRACE_FORMAT");
        name && !k3::profiler::parse_trace_format(name, &format)) {
      fmt::print(stderr, "k3perf profile: K3PERF_TRACE_FORMAT '{}' is not k3perf or kineto; writing k3perf\n", name);
    }
    k3::profiler::write_chrome_trace(attribution.trace, out ? out : "k3perf-trace.json.gz", 1, format);
    const k3::profiler::AttributionReport& r = attribution.report;
    fmt::print(stderr,
               "k3perf profile: {} kernels ({} in op ranges, {} through CUDA-graph nodes), {} dropped records -> {}\n",
               r.kernels, r.attributed(), r.attributed_through_graph_nodes, r.dropped_records,
               out ? out : "k3perf-trace.json.gz");
  } catch (const std::exception& e) {
    fmt::print(stderr, "k3perf profile: the trace was not written: {}\n", e.what());
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  try {
    g_collector = std::make_unique<k3::profiler::CuptiActivitySource>();
    g_collector->start();
    std::atexit(finish);
  } catch (const std::exception& e) {
    g_collector.reset();
    fmt::print(stderr, "k3perf profile: tracing is off: {}\n", e.what());
  }
  return 1;
}
