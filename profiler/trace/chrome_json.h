// Chrome trace-event JSON for a Trace, as Perfetto, chrome://tracing and HTA open it: every event a complete
// event ("ph":"X") with `ts` and `dur` in microseconds written with three decimals, so nanoseconds survive; times
// relative to `baseTimeNanoseconds` so that doubles keep them exact. Tracks:
//   - kernels, copies and sets on pid = device, tid = stream (a kernel that overlaps the one before it on a
//     further lane: kLaneTidStride), each run of consecutive events of one op instance inside a span of the op's
//     name, category "gpu_user_annotation": the op ranges projected onto the GPU (gpu_op_spans);
//   - CUDA API calls on pid kHostPid, tid = host thread, each launch tied to the GPU work it made by a flow
//     ("ph":"s" at the call, "ph":"f" with "bp":"e" at the work, category "ac2g");
//   - NVTX op ranges and the steps on pid kOpRangePid, tid = host thread (steps: kStepTrackThread).
// Every track is named and ordered by metadata events (process_name, process_sort_index, thread_name,
// thread_sort_index): host processes first, then the GPUs; per stream its lanes in order. Our fields
// (correlation, graph node, op, op instance, bytes) are in `args`; run metadata is in the top-level object
// "k3perf", counts (Trace::integer_keys) as numbers. Written by hand for speed; read as a stream
// (ChromeTraceHandler), so reading holds the Trace and a bounded buffer, never the text.
//
// TraceFormat::kineto writes the same events as PyTorch's profiler (Kineto) does, for HTA: categories
// "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cuda_sync", "user_annotation",
// "gpu_user_annotation"; API names without CUPTI's version suffix; copies named "Memcpy HtoD", ...; the steps as
// "ProfilerStep#N" over the host calls that launched them; `args` with "External id" (the enclosing NVTX range's
// id, on the range, its calls and their GPU work), "correlation", "device", "stream"; and the top-level
// "distributedInfo" (rank, world size) HTA maps files to ranks by. k3perf's reader takes its kernels (with
// their op) from either format; the host events and steps it reads from the k3perf format only.
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

enum class TraceFormat { k3perf, kineto };
std::string to_string(TraceFormat f);
bool parse_trace_format(const std::string& name, TraceFormat* out);  // "k3perf", "kineto"

// Per event, its lane: GPU events go to the first lane of their stream whose last event has ended; host events
// to the first lane of their track where they nest (Perfetto's rule), which is lane 0 for NVTX push/pop ranges
// and for API calls.
std::vector<int> trace_lanes(const Trace& trace);

// The op ranges as the GPU ran them: per track (device, stream, lane), each run of consecutive GPU events of one
// op instance becomes one span from the first's start to the last's end. Eager kernels carry the op of the range
// open at their launch, kernels replayed from a CUDA graph the op whose range was open when their node was
// captured (profiler/attribution), so a replayed step has the same spans as an eager one. Runs on one track never
// overlap (a lane's events do not), so the spans nest their events and each other never partly.
struct GpuOpSpan {
  std::uint32_t op = 0;  // index into Trace::names()
  std::int64_t op_instance = 0;
  std::int32_t device = 0, stream = 0;
  int lane = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  std::size_t events = 0;  // GPU events in the run
};
std::vector<GpuOpSpan> gpu_op_spans(const Trace& trace, const std::vector<int>& lanes);

// The JSON text; the trace must be sorted (Trace::sort).
std::string to_chrome_json(const Trace& trace, TraceFormat format = TraceFormat::k3perf);
// Reads what to_chrome_json writes. Events of other categories or phases (Kineto's cpu_op,
// flows, counters, metadata, gpu_user_annotation) are skipped; malformed events throw InputError naming `origin`,
// the event's index in traceEvents, its name and the key. The result is sorted.
Trace parse_chrome_json(const std::string& text, const std::string& origin);
// The same parser over bytes read in chunks.
Trace parse_chrome_json(ByteSource& in, const std::string& origin);

// Files: gzip when the path ends in ".gz" (`gzip_level` 1..9, -1 = zlib's default 6; 1 by default:
// 1 M events take about 1.0 s of CPU at level 1 and 1.9 s at 6, bench/trace_bench.cpp), written
// atomically.
void write_chrome_trace(const Trace& trace, const std::string& path, int gzip_level = 1,
                        TraceFormat format = TraceFormat::k3perf);
// Any JSON text to `path`, gzip when it ends in ".gz", atomically (the simulators' traces).
void write_trace_text(const std::string& json, const std::string& path, int gzip_level = 1);
// The one entry every verb and library reads a trace file through: .json or .json.gz (gzip is
// detected by its magic bytes, whatever the name), inflated and parsed in chunks. Errors name the path.
Trace read_trace(const std::string& path);

}  // namespace k3::profiler
