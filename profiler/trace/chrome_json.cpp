#include "profiler/trace/chrome_json.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "profiler/trace/gzip.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
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

// Perfetto's rule on one track: events in start order must nest. place() puts an event on the first lane where
// it nests inside the innermost open event or follows it.
class NestingLanes {
 public:
  int place(std::int64_t start, std::int64_t end) {
    for (std::size_t l = 0;; ++l) {
      if (l == open_.size()) open_.emplace_back();
      std::vector<std::int64_t>& ends = open_[l];
      while (!ends.empty() && ends.back() <= start) ends.pop_back();
      if (ends.empty() || end <= ends.back()) {
        ends.push_back(end);
        return static_cast<int>(l);
      }
    }
  }

 private:
  std::vector<std::vector<std::int64_t>> open_;  // per lane, the ends of its open events, innermost last
};

bool is_host(EventKind k) { return k == EventKind::api || k == EventKind::range; }
bool is_sync(const std::string& api_name) { return api_name.compare(0, 5, "sync:") == 0; }

// Kineto's names for what we record under our own.
const char* kineto_category(EventKind k, const std::string& name) {
  switch (k) {
    case EventKind::kernel: return "kernel";
    case EventKind::memcpy: return "gpu_memcpy";
    case EventKind::memset: return "gpu_memset";
    case EventKind::range: return "user_annotation";
    case EventKind::api:
      if (is_sync(name)) return "cuda_sync";
      return name.compare(0, 4, "cuda") != 0 && name.compare(0, 2, "cu") == 0 ? "cuda_driver" : "cuda_runtime";
  }
  return "?";
}

std::string kineto_name(EventKind k, const std::string& name) {
  static const std::map<std::string, std::string, std::less<>> renamed = {
      {"memcpy_htod", "Memcpy HtoD"},
      {"memcpy_dtoh", "Memcpy DtoH"},
      {"memcpy_dtod", "Memcpy DtoD"},
      {"memcpy", "Memcpy"},
      {"memset", "Memset"},
      {"sync: stream", "Stream Sync"},
      {"sync: event", "Event Sync"},
      {"sync: context", "Context Sync"},
      {"sync: stream wait event", "Stream Wait Event"}};
  if (k == EventKind::kernel || k == EventKind::range) return name;
  if (const auto it = renamed.find(name); it != renamed.end()) return it->second;
  return k == EventKind::api ? unversioned_api_name(name) : name;
}

// "rank 5 of 16: ..." (RankLayout::describe) -> 5 and 16; one GPU otherwise.
std::pair<long, long> rank_and_world(const Trace& t) {
  const auto it = t.metadata.find("rank");
  long rank = 0, world = 1;
  if (it != t.metadata.end() && std::sscanf(it->second.c_str(), "rank %ld of %ld", &rank, &world) == 2) {
    return {rank, world};
  }
  return {0, 1};
}

bool is_decimal_integer(const std::string& s) {
  std::size_t i = s.size() > 1 && s[0] == '-' ? 1 : 0;
  if (i == s.size() || s.size() - i > 18 || (s[i] == '0' && s.size() > i + 1)) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

void append_track_metadata(std::string& out, const char* what, int pid, std::int64_t tid, const std::string& label,
                           long sort_index) {
  const bool process = what[0] == 'p';
  fmt::format_to(std::back_inserter(out), "{{\"ph\":\"M\",\"name\":\"{}\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
                 process ? "process_name" : "thread_name", pid, tid);
  append_escaped(out, label);
  out += "}},\n";
  fmt::format_to(std::back_inserter(out),
                 "{{\"ph\":\"M\",\"name\":\"{}\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}},\n",
                 process ? "process_sort_index" : "thread_sort_index", pid, tid, sort_index);
}

}  // namespace

std::string to_string(TraceFormat f) { return f == TraceFormat::kineto ? "kineto" : "k3perf"; }

bool parse_trace_format(const std::string& name, TraceFormat* out) {
  for (TraceFormat f : {TraceFormat::k3perf, TraceFormat::kineto}) {
    if (to_string(f) == name) {
      *out = f;
      return true;
    }
  }
  return false;
}

std::vector<int> trace_lanes(const Trace& t) {
  K3_CHECK(t.is_sorted(), "the trace must be sorted before its lanes are assigned");
  // GPU events: per stream, per lane, when its last event ends (kernels of one stream never nest: one inside
  // another is an overlap, drawn beside it). Host events: nesting lanes per track.
  std::map<std::pair<int, std::int64_t>, std::vector<std::int64_t>> lane_end;
  std::map<std::pair<int, std::int64_t>, NestingLanes> host;
  std::vector<int> lane(t.size(), 0);
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (is_host(t.kind[i])) {
      lane[i] =
          host[{t.kind[i] == EventKind::api ? kHostPid : kOpRangePid, t.thread[i]}].place(t.start_ns[i], t.end_ns[i]);
      continue;
    }
    std::vector<std::int64_t>& ends = lane_end[{t.device[i], t.stream[i]}];
    std::size_t l = 0;
    while (l < ends.size() && ends[l] > t.start_ns[i]) ++l;
    if (l == ends.size()) ends.push_back(0);
    ends[l] = t.end_ns[i];
    lane[i] = static_cast<int>(l);
  }
  return lane;
}

std::vector<GpuOpSpan> gpu_op_spans(const Trace& t, const std::vector<int>& lanes) {
  K3_CHECK(lanes.size() == t.size(), "{} lanes for {} events", lanes.size(), t.size());
  std::vector<GpuOpSpan> spans;
  std::map<std::tuple<int, std::int32_t, int>, GpuOpSpan> open;  // per track, its current run
  const auto close = [&](GpuOpSpan& run) {
    if (run.events > 0) spans.push_back(run);
    run.events = 0;
  };
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (is_host(t.kind[i])) continue;
    GpuOpSpan& run = open[{t.device[i], t.stream[i], lanes[i]}];
    if (t.op[i] == kNone) {
      close(run);
      continue;
    }
    const auto op = static_cast<std::uint32_t>(t.op[i]);
    if (run.events > 0 && run.op == op && run.op_instance == t.op_instance[i]) {
      run.end_ns = std::max(run.end_ns, t.end_ns[i]);
      ++run.events;
      continue;
    }
    close(run);
    run = GpuOpSpan{op, t.op_instance[i], t.device[i], t.stream[i], lanes[i], t.start_ns[i], t.end_ns[i], 1};
  }
  for (auto& [track, run] : open) close(run);
  std::stable_sort(spans.begin(), spans.end(), [](const GpuOpSpan& a, const GpuOpSpan& b) {
    return std::tie(a.start_ns, a.device, a.stream, a.lane) < std::tie(b.start_ns, b.device, b.stream, b.lane);
  });
  return spans;
}

std::string to_chrome_json(const Trace& t, TraceFormat format) {
  K3_CHECK(t.is_sorted(), "the trace must be sorted before it is written");
  const bool kineto = format == TraceFormat::kineto;
  const std::int64_t base = t.size() ? t.start_ns[0] : 0;
  std::string out;
  out.reserve(256 + t.size() * 260);
  out += "{\"schemaVersion\":1,\"displayTimeUnit\":\"ns\",";
  fmt::format_to(std::back_inserter(out), "\"baseTimeNanoseconds\":{},\n", base);
  if (kineto) {
    // HTA finds a file's rank with the pattern "rank":\s+(\d+): the space after the colon is needed.
    const auto [rank, world] = rank_and_world(t);
    fmt::format_to(std::back_inserter(out),
                   "\"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {}, \"world_size\": {}}},\n", rank, world);
  }
  fmt::format_to(std::back_inserter(out), "\"k3perf\":{{\"format\":\"k3perf-trace-1\",\"trace_format\":\"{}\"",
                 to_string(format));
  for (const auto& [key, value] : t.metadata) {
    out += ',';
    append_escaped(out, key);
    out += ':';
    if (t.integer_keys.count(key) && is_decimal_integer(value)) {
      out += value;
    } else {
      append_escaped(out, value);
    }
  }
  out += "},\n\"traceEvents\":[\n";

  const std::vector<int> lane = trace_lanes(t);
  const std::vector<GpuOpSpan> spans = gpu_op_spans(t, lane);
  const auto gpu_tid = [](std::int32_t stream, int l) { return stream + l * kLaneTidStride; };
  const auto pid_of = [&](std::size_t i) -> int {
    const EventKind k = t.kind[i];
    return k == EventKind::api ? kHostPid : k == EventKind::range ? kOpRangePid : t.device[i];
  };
  const auto tid_of = [&](std::size_t i) -> std::int64_t {
    return is_host(t.kind[i]) ? t.thread[i] + lane[i] * kLaneTidStride : gpu_tid(t.stream[i], lane[i]);
  };

  // The launch of each piece of GPU work (the API call of its correlation id; a wait shares its call's id).
  std::unordered_map<std::uint64_t, std::size_t> launch;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] == EventKind::api && t.correlation[i] != 0 && !is_sync(t.name_of(i))) {
      launch.emplace(t.correlation[i], i);
    }
  }

  // Kineto: External id, the innermost NVTX range around each call (a stack per thread), passed to the GPU work the
  // call launched; and each step's span over the host calls that launched its work.
  std::vector<std::uint64_t> external(kineto ? t.size() : 0, 0);
  struct StepSpan {
    std::int64_t start_ns = 0, end_ns = 0;
    bool host = false;  // over host calls (else the GPU span: no launch of its work recorded)
    int lane = 0;
  };
  std::vector<std::pair<std::size_t, StepSpan>> steps;  // (range event, span) of the steps track
  if (kineto) {
    std::unordered_map<std::int64_t, std::vector<std::pair<std::int64_t, std::uint64_t>>> open;  // (end, id)
    std::uint64_t next_id = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (!is_host(t.kind[i]) || t.thread[i] == kStepTrackThread) continue;
      auto& stack = open[t.thread[i]];
      while (!stack.empty() && stack.back().first <= t.start_ns[i]) stack.pop_back();
      if (t.kind[i] == EventKind::range) {
        external[i] = ++next_id;
        stack.push_back({t.end_ns[i], next_id});
      } else if (!stack.empty()) {
        external[i] = stack.back().second;
      }
    }
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (is_host(t.kind[i])) continue;
      const auto l = launch.find(t.correlation[i]);
      if (t.correlation[i] != 0 && l != launch.end()) external[i] = external[l->second];
    }
    // A GPU event belongs to the latest-started step whose GPU span holds its start.
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t.kind[i] == EventKind::range && t.thread[i] == kStepTrackThread) {
        steps.push_back({i, StepSpan{t.start_ns[i], t.end_ns[i], false, 0}});
      }
    }
    std::size_t current = 0;
    for (std::size_t i = 0; i < t.size() && !steps.empty(); ++i) {
      if (is_host(t.kind[i])) continue;
      while (current + 1 < steps.size() && t.start_ns[steps[current + 1].first] <= t.start_ns[i]) ++current;
      const std::size_t s = steps[current].first;
      if (t.start_ns[i] < t.start_ns[s] || t.start_ns[i] > t.end_ns[s]) continue;
      const auto l = launch.find(t.correlation[i]);
      if (t.correlation[i] == 0 || l == launch.end()) continue;
      StepSpan& span = steps[current].second;
      const std::size_t a = l->second;
      if (!span.host) span = StepSpan{t.start_ns[a], t.end_ns[a], true, 0};
      span.start_ns = std::min(span.start_ns, t.start_ns[a]);
      span.end_ns = std::max(span.end_ns, t.end_ns[a]);
    }
  }

  // Tracks: names and order. Host processes first (op ranges, then API calls), then the GPUs; threads in order of
  // id, a stream's lanes after it. The same trace gives the same bytes.
  std::set<int> devices;
  std::set<std::tuple<int, std::int64_t, int>> host_tracks;  // pid, thread, lane
  std::set<std::tuple<int, std::int32_t, int>> gpu_tracks;   // device, stream, lane
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (is_host(t.kind[i])) {
      if (!(kineto && t.thread[i] == kStepTrackThread)) host_tracks.insert({pid_of(i), t.thread[i], lane[i]});
    } else {
      K3_CHECK(t.device[i] >= 0 && t.device[i] < kMaxDevices, "event {} ('{}') has device {}", i, t.name_of(i),
               t.device[i]);
      devices.insert(t.device[i]);
      gpu_tracks.insert({t.device[i], t.stream[i], lane[i]});
    }
  }
  if (kineto) {
    NestingLanes step_lanes;
    for (auto& [i, span] : steps) {
      span.lane = step_lanes.place(span.start_ns, span.end_ns);
      host_tracks.insert({kOpRangePid, kStepTrackThread, span.lane});
    }
  }
  const auto host_label = [](int pid, std::int64_t thread, int l) {
    std::string label =
        pid == kOpRangePid && thread == kStepTrackThread ? std::string("steps") : fmt::format("thread {}", thread);
    return l == 0 ? label : fmt::format("{} (overlapping, lane {})", label, l + 1);
  };
  bool ranges = false, api = false;
  for (const auto& [pid, thread, l] : host_tracks) (pid == kOpRangePid ? ranges : api) = true;
  if (ranges) append_track_metadata(out, "process", kOpRangePid, 0, "ops (NVTX ranges)", 0);
  if (api) append_track_metadata(out, "process", kHostPid, 0, "host: CUDA API", 1);
  for (int d : devices) append_track_metadata(out, "process", d, 0, fmt::format("GPU {}", d), 2 + d);
  long order = 0;
  for (const auto& [pid, thread, l] : host_tracks) {
    append_track_metadata(out, "thread", pid, thread + l * kLaneTidStride, host_label(pid, thread, l), order++);
  }
  for (const auto& [device, stream, l] : gpu_tracks) {
    const auto named = t.stream_names.find({device, stream});
    const std::string label = named != t.stream_names.end() ? named->second : fmt::format("stream {}", stream);
    append_track_metadata(out, "thread", device, gpu_tid(stream, l),
                          l == 0 ? label : fmt::format("{} (overlapping, lane {})", label, l + 1), order++);
  }

  bool first = true;
  const auto begin_event = [&](const char* ph, const char* cat) {
    out += first ? "{\"ph\":\"" : ",\n{\"ph\":\"";
    first = false;
    out += ph;
    out += "\",\"cat\":\"";
    out += cat;
    out += '"';
  };
  const auto append_span = [&](long long pid, long long tid, std::int64_t start_ns, std::int64_t end_ns) {
    fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"ts\":", pid, tid);
    append_us(out, start_ns - base);
    out += ",\"dur\":";
    append_us(out, end_ns - start_ns);
  };
  // The op ranges on the GPU, on their events' tracks; before the events, so that a viewer that keeps the file's
  // order for equal start times opens the span before the kernel it starts with.
  for (const GpuOpSpan& s : spans) {
    begin_event("X", "gpu_user_annotation");
    out += ",\"name\":";
    append_escaped(out, t.names()[s.op]);
    append_span(s.device, gpu_tid(s.stream, s.lane), s.start_ns, s.end_ns);
    fmt::format_to(std::back_inserter(out),
                   ",\"args\":{{\"device\":{},\"stream\":{},\"op_instance\":{},\"events\":{}}}}}", s.device, s.stream,
                   s.op_instance, s.events);
  }
  std::size_t step_at = 0;  // the next of `steps` (kineto: written in place of the step ranges)
  for (std::size_t i = 0; i < t.size(); ++i) {
    const EventKind k = t.kind[i];
    if (kineto && k == EventKind::range && t.thread[i] == kStepTrackThread) {
      const StepSpan& span = steps[step_at++].second;
      const std::string& name = t.name_of(i);
      const bool numbered = name.compare(0, 5, "step ") == 0 && is_decimal_integer(name.substr(5));
      begin_event("X", "user_annotation");
      out += ",\"name\":";
      append_escaped(out, numbered ? "ProfilerStep#" + name.substr(5) : name);
      append_span(kOpRangePid, kStepTrackThread + span.lane * kLaneTidStride, span.start_ns, span.end_ns);
      fmt::format_to(std::back_inserter(out), ",\"args\":{{\"gpu_start_us\":");
      append_us(out, t.start_ns[i] - base);
      out += ",\"gpu_dur_us\":";
      append_us(out, t.end_ns[i] - t.start_ns[i]);
      out += "}}";
      continue;
    }
    begin_event("X", kineto ? kineto_category(k, t.name_of(i)) : to_string(k).c_str());
    out += ",\"name\":";
    append_escaped(out, kineto ? kineto_name(k, t.name_of(i)) : t.name_of(i));
    append_span(pid_of(i), tid_of(i), t.start_ns[i], t.end_ns[i]);
    out += ",\"args\":{";
    const bool has_external = kineto && external[i] != 0;
    if (has_external) fmt::format_to(std::back_inserter(out), "\"External id\":{}", external[i]);
    if (is_host(k)) {
      if (k == EventKind::api) {
        fmt::format_to(std::back_inserter(out), "{}\"correlation\":{}", has_external ? "," : "", t.correlation[i]);
      }
    } else {
      fmt::format_to(std::back_inserter(out), "{}\"device\":{},\"stream\":{},\"correlation\":{}",
                     has_external ? "," : "", t.device[i], t.stream[i], t.correlation[i]);
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
  // Launch -> GPU work: one flow per pair (a graph launch has one to each replayed kernel), ids unique.
  std::uint64_t flow = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (is_host(t.kind[i]) || t.correlation[i] == 0) continue;
    const auto l = launch.find(t.correlation[i]);
    if (l == launch.end()) continue;
    const std::size_t a = l->second;
    ++flow;
    begin_event("s", "ac2g");
    fmt::format_to(std::back_inserter(out), ",\"name\":\"ac2g\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":", flow,
                   kHostPid, tid_of(a));
    append_us(out, t.start_ns[a] - base);
    out += '}';
    begin_event("f", "ac2g");
    fmt::format_to(std::back_inserter(out), ",\"name\":\"ac2g\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":", flow,
                   t.device[i], tid_of(i));
    append_us(out, t.start_ns[i] - base);
    out += ",\"bp\":\"e\"}";
  }
  out += "\n]}\n";
  return out;
}

void write_trace_text(const std::string& json, const std::string& path, int gzip_level) {
  const bool gz = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  write_file_atomically(path, gz ? gzip_compress(json, gzip_level) : json);
}

void write_chrome_trace(const Trace& trace, const std::string& path, int gzip_level, TraceFormat format) {
  write_trace_text(to_chrome_json(trace, format), path, gzip_level);
}

}  // namespace k3::profiler
