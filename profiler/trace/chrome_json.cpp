#include "profiler/trace/chrome_json.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "profiler/trace/gzip.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace k3::profiler {

namespace {

void append_escaped(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Non-negative nanoseconds as microseconds with three decimals, exactly.
void append_us(std::string& out, std::int64_t ns) {
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

void append_metadata_event(std::string& out, const char* what, int pid, std::int64_t tid, const std::string& label) {
  fmt::format_to(std::back_inserter(out),
                 "{{\"ph\":\"M\",\"name\":\"{}\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":", what, pid, tid);
  append_escaped(out, label);
  out += "}},\n";
}

}  // namespace

std::vector<int> trace_lanes(const Trace& t) {
  K3_CHECK(t.is_sorted(), "the trace must be sorted before its lanes are assigned");
  // Per stream, per lane: when its last event ends. GPU events of one stream never nest; host ranges always do
  // (NVTX push and pop on one thread) and API calls on a thread follow each other, so host events keep lane 0.
  std::map<std::pair<int, std::int64_t>, std::vector<std::int64_t>> lane_end;
  std::vector<int> lane(t.size(), 0);
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] == EventKind::api || t.kind[i] == EventKind::range) continue;
    std::vector<std::int64_t>& ends = lane_end[{t.device[i], t.stream[i]}];
    std::size_t l = 0;
    while (l < ends.size() && ends[l] > t.start_ns[i]) ++l;
    if (l == ends.size()) ends.push_back(0);
    ends[l] = t.end_ns[i];
    lane[i] = static_cast<int>(l);
  }
  return lane;
}

std::string to_chrome_json(const Trace& t) {
  K3_CHECK(t.is_sorted(), "the trace must be sorted before it is written");
  const std::int64_t base = t.size() ? t.start_ns[0] : 0;
  std::string out;
  out.reserve(256 + t.size() * 200);
  out += "{\"schemaVersion\":1,\"displayTimeUnit\":\"ns\",";
  fmt::format_to(std::back_inserter(out), "\"baseTimeNanoseconds\":{},\n\"k3perf\":{{\"format\":\"k3perf-trace-1\"",
                 base);
  for (const auto& [key, value] : t.metadata) {
    out += ',';
    append_escaped(out, key);
    out += ':';
    append_escaped(out, value);
  }
  out += "},\n\"traceEvents\":[\n";

  // Tracks: one process per device and for host API calls and op ranges, one thread per stream or host thread
  // (sorted sets: the same trace gives the same bytes). Perfetto drops a complete event that starts inside the
  // previous one on its track and ends after it, as kernels overlap under programmatic dependent launch: such an
  // event goes to a further lane of its stream (trace_lanes), a thread of its own beside the stream's.
  const std::vector<int> lane = trace_lanes(t);
  const auto tid_of = [&](std::size_t i) -> std::int64_t {
    const EventKind k = t.kind[i];
    if (k == EventKind::api || k == EventKind::range) return t.thread[i];
    return t.stream[i] + lane[i] * kLaneTidStride;
  };
  std::set<int> devices;
  std::set<std::pair<int, std::int64_t>> streams, api_threads, range_threads;
  std::set<std::tuple<int, std::int64_t, int>> extra_lanes;  // device, stream, lane
  for (std::size_t i = 0; i < t.size(); ++i) {
    const EventKind k = t.kind[i];
    if (k == EventKind::api) {
      api_threads.insert({kHostPid, t.thread[i]});
    } else if (k == EventKind::range) {
      range_threads.insert({kOpRangePid, t.thread[i]});
    } else {
      K3_CHECK(t.device[i] >= 0 && t.device[i] < kMaxDevices, "event {} ('{}') has device {}", i, t.name_of(i),
               t.device[i]);
      devices.insert(t.device[i]);
      streams.insert({t.device[i], t.stream[i]});
    }
    if (lane[i] > 0) extra_lanes.insert({t.device[i], t.stream[i], lane[i]});
  }
  for (int d : devices) append_metadata_event(out, "process_name", d, 0, fmt::format("GPU {}", d));
  if (!api_threads.empty()) append_metadata_event(out, "process_name", kHostPid, 0, "host: CUDA API");
  if (!range_threads.empty()) append_metadata_event(out, "process_name", kOpRangePid, 0, "ops (NVTX ranges)");
  const auto track_label = [](int pid, std::int64_t tid) {
    if (pid < kMaxDevices) return fmt::format("stream {}", tid);
    return pid == kOpRangePid && tid == kStepTrackThread ? std::string("steps") : fmt::format("thread {}", tid);
  };
  for (const auto& [pid, tid] : streams) append_metadata_event(out, "thread_name", pid, tid, track_label(pid, tid));
  for (const auto& [pid, tid] : api_threads) append_metadata_event(out, "thread_name", pid, tid, track_label(pid, tid));
  for (const auto& [pid, tid] : range_threads) {
    append_metadata_event(out, "thread_name", pid, tid, track_label(pid, tid));
  }
  for (const auto& [pid, tid, l] : extra_lanes) {
    append_metadata_event(out, "thread_name", pid, tid + l * kLaneTidStride,
                          fmt::format("{} (overlapping, lane {})", track_label(pid, tid), l + 1));
  }

  for (std::size_t i = 0; i < t.size(); ++i) {
    const EventKind k = t.kind[i];
    const bool host = k == EventKind::api || k == EventKind::range;
    const long long pid = k == EventKind::api ? kHostPid : k == EventKind::range ? kOpRangePid : t.device[i];
    const long long tid = tid_of(i);
    out += i == 0 ? "{\"ph\":\"X\",\"cat\":\"" : ",\n{\"ph\":\"X\",\"cat\":\"";
    out += to_string(k);
    out += "\",\"name\":";
    append_escaped(out, t.name_of(i));
    fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"ts\":", pid, tid);
    append_us(out, t.start_ns[i] - base);
    out += ",\"dur\":";
    append_us(out, t.end_ns[i] - t.start_ns[i]);
    out += ",\"args\":{";
    if (host) {
      if (k == EventKind::api) fmt::format_to(std::back_inserter(out), "\"correlation\":{}", t.correlation[i]);
    } else {
      fmt::format_to(std::back_inserter(out), "\"device\":{},\"stream\":{},\"correlation\":{}", t.device[i],
                     t.stream[i], t.correlation[i]);
      if (t.graph_node[i] != 0) fmt::format_to(std::back_inserter(out), ",\"graph_node\":{}", t.graph_node[i]);
      if (k != EventKind::kernel) fmt::format_to(std::back_inserter(out), ",\"bytes\":{}", t.bytes[i]);
      if (t.op[i] != kNone) {
        out += ",\"op\":";
        append_escaped(out, t.names()[t.op[i]]);
        fmt::format_to(std::back_inserter(out), ",\"op_instance\":{}", t.op_instance[i]);
      }
    }
    out += "}}";
  }
  out += "\n]}\n";
  return out;
}

void write_chrome_trace(const Trace& trace, const std::string& path, int gzip_level) {
  const std::string json = to_chrome_json(trace);
  const bool gz = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  write_file_atomically(path, gz ? gzip_compress(json, gzip_level) : json);
}

}  // namespace k3::profiler
