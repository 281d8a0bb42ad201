// Chrome trace-event JSON for a Trace, as Perfetto, chrome://tracing and HTA open it (Kineto's
// flavour): every event a complete event ("ph":"X") with `ts` and `dur` in microseconds written
// with three decimals, so nanoseconds survive; times relative to `baseTimeNanoseconds` so that
// doubles keep them exact. Tracks: kernels, copies and sets on pid = device, tid = stream (a kernel that
// overlaps the one before it on a further lane: kLaneTidStride); CUDA API
// calls on pid kHostPid, tid = host thread; NVTX op ranges on their own pid kOpRangePid, tid = host
// thread. Our fields (correlation, graph node, op, op instance, bytes) are in `args`; run metadata
// is in the top-level object "k3perf". Written by hand for speed; read as a stream (ChromeTraceHandler), so
// reading holds the Trace and a bounded buffer, never the text.
#pragma once

#include "profiler/trace/byte_source.h"
#include "profiler/trace/trace.h"

#include <cstdint>
#include <string>
#include <vector>

namespace k3::profiler {

inline constexpr int kHostPid = 1000;     // process track of CUDA API calls
inline constexpr int kOpRangePid = 1001;  // process track of NVTX op ranges
inline constexpr int kMaxDevices = 1000;  // device ids stay below the host pids
// A GPU event that overlaps the one before it on its stream (programmatic dependent launch lets a kernel start
// before the previous one ends) is written on lane k > 0 of the stream, tid = stream + k * kLaneTidStride, so that
// no viewer drops it (Perfetto drops complete events that overlap without nesting). Readers take the stream from
// args.stream.
inline constexpr std::int64_t kLaneTidStride = std::int64_t{1} << 32;

// Per event, its lane (0 for host events and for GPU events that start after the previous one on their stream ends).
std::vector<int> trace_lanes(const Trace& trace);

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
