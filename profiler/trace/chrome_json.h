// Chrome trace-event JSON for a Trace, as Perfetto, chrome://tracing and HTA open it (Kineto's
// flavour): every event a complete event ("ph":"X") with `ts` and `dur` in microseconds written
// with three decimals, so nanoseconds survive; times relative to `baseTimeNanoseconds` so that
// doubles keep them exact. Tracks: kernels, copies and sets on pid = device, tid = stream; CUDA API
// calls on pid kHostPid, tid = host thread; NVTX op ranges on their own pid kOpRangePid, tid = host
// thread. Our fields (correlation, graph node, op, op instance, bytes) are in `args`; run metadata
// is in the top-level object "k3perf". Written by hand for speed; read as a stream (ChromeTraceHandler), so
// reading holds the Trace and a bounded buffer, never the text.
#pragma once

#include "profiler/trace/byte_source.h"
#include "profiler/trace/trace.h"

#include <string>

namespace k3::profiler {

inline constexpr int kHostPid = 1000;     // process track of CUDA API calls
inline constexpr int kOpRangePid = 1001;  // process track of NVTX op ranges
inline constexpr int kMaxDevices = 1000;  // device ids stay below the host pids

// The JSON text; the trace must be sorted (Trace::sort).
std::string to_chrome_json(const Trace& trace);
// Reads what to_chrome_json writes. Events of other categories or phases (Kineto's cpu_op,
// flows, counters, metadata) are skipped; malformed events throw InputError naming `origin`,
// the event's index in traceEvents, its name and the key. The result is sorted.
Trace parse_chrome_json(const std::string& text, const std::string& origin);
// The same parser over bytes read in chunks.
Trace parse_chrome_json(ByteSource& in, const std::string& origin);

// Files: gzip when the path ends in ".gz" (`gzip_level` 1..9, -1 = zlib's default 6; 1 by default:
// 1 M events take about 1.0 s of CPU at level 1 and 1.9 s at 6, bench/trace_bench.cpp), written
// atomically.
void write_chrome_trace(const Trace& trace, const std::string& path, int gzip_level = 1);
// The one entry every verb and library reads a trace file through: .json or .json.gz (gzip is
// detected by its magic bytes, whatever the name), inflated and parsed in chunks. Errors name the path.
Trace read_trace(const std::string& path);

}  // namespace k3::profiler
