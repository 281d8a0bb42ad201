#include "profiler/trace/chrome_json.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "profiler/trace/gzip.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
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

  // Track names: one process per device and for host API calls and op ranges, one thread per
  // stream or host thread (sorted sets: the same trace gives the same bytes).
  std::set<int> devices;
  std::set<std::pair<int, std::int64_t>> streams, api_threads, range_threads;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] == EventKind::api) {
      api_threads.insert({kHostPid, t.thread[i]});
    } else if (t.kind[i] == EventKind::range) {
      range_threads.insert({kOpRangePid, t.thread[i]});
    } else {
      K3_CHECK(t.device[i] >= 0 && t.device[i] < kMaxDevices, "event {} ('{}') has device {}", i, t.name_of(i),
               t.device[i]);
      devices.insert(t.device[i]);
      streams.insert({t.device[i], t.stream[i]});
    }
  }
  for (int d : devices) append_metadata_event(out, "process_name", d, 0, fmt::format("GPU {}", d));
  if (!api_threads.empty()) append_metadata_event(out, "process_name", kHostPid, 0, "host: CUDA API");
  if (!range_threads.empty()) append_metadata_event(out, "process_name", kOpRangePid, 0, "ops (NVTX ranges)");
  for (const auto& [pid, tid] : streams)
    append_metadata_event(out, "thread_name", pid, tid, fmt::format("stream {}", tid));
  for (const auto& [pid, tid] : api_threads)
    append_metadata_event(out, "thread_name", pid, tid, fmt::format("thread {}", tid));
  for (const auto& [pid, tid] : range_threads) {
    append_metadata_event(out, "thread_name", pid, tid,
                          tid == kStepTrackThread ? std::string("steps") : fmt::format("thread {}", tid));
  }

  for (std::size_t i = 0; i < t.size(); ++i) {
    const EventKind k = t.kind[i];
    const bool host = k == EventKind::api || k == EventKind::range;
    const long long pid = k == EventKind::api ? kHostPid : k == EventKind::range ? kOpRangePid : t.device[i];
    const long long tid = host ? t.thread[i] : t.stream[i];
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

namespace {

class EventReader {
 public:
  EventReader(const nlohmann::json& e, const std::string& origin, std::size_t index)
      : e_(e), origin_(origin), index_(index) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    std::string who = fmt::format("{}: traceEvents[{}]", origin_, index_);
    if (e_.is_object() && e_.contains("name") && e_["name"].is_string()) {
      who += fmt::format(" ('{}')", e_["name"].get<std::string>());
    }
    if (key.empty()) throw InputError(fmt::format("{}: {}", who, what));
    throw InputError(fmt::format("{}: key '{}': {}", who, key, what));
  }

  const nlohmann::json& required(const nlohmann::json& obj, const std::string& key, const std::string& path) const {
    if (!obj.contains(key) || obj[key].is_null()) fail(path, "missing");
    return obj[key];
  }

  std::string string(const std::string& key) const {
    const nlohmann::json& v = required(e_, key, key);
    if (!v.is_string()) fail(key, fmt::format("expected a string, got {}", v.dump()));
    return v.get<std::string>();
  }

  // Microseconds (a number >= 0) to integer nanoseconds.
  std::int64_t microseconds_as_ns(const std::string& key) const {
    const nlohmann::json& v = required(e_, key, key);
    if (!v.is_number()) fail(key, fmt::format("expected a number of microseconds, got {}", v.dump()));
    const double us = v.get<double>();
    if (!std::isfinite(us) || us < 0 || us > 9.0e12)
      fail(key, fmt::format("expected microseconds in [0, 9e12], got {}", v.dump()));
    return std::llround(us * 1000.0);
  }

  std::int64_t integer(const nlohmann::json& obj, const std::string& key, const std::string& path,
                       std::int64_t lowest) const {
    const nlohmann::json& v = required(obj, key, path);
    if (!v.is_number_integer()) fail(path, fmt::format("expected an integer, got {}", v.dump()));
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
      fail(path, fmt::format("integer {} out of range", v.dump()));
    }
    const std::int64_t n = v.get<std::int64_t>();
    if (n < lowest) fail(path, fmt::format("expected an integer >= {}, got {}", lowest, n));
    return n;
  }

  std::uint64_t unsigned_arg(const nlohmann::json& args, const std::string& key) const {
    const nlohmann::json& v = required(args, key, "args." + key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
      fail("args." + key, fmt::format("expected an integer >= 0, got {}", v.dump()));
    }
    return v.get<std::uint64_t>();
  }

  const nlohmann::json& e() const { return e_; }

 private:
  const nlohmann::json& e_;
  const std::string& origin_;
  std::size_t index_;
};

}  // namespace

Trace parse_chrome_json(const std::string& text, const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: malformed JSON at byte {}: {}", origin, e.byte, e.what()));
  }
  if (!doc.is_object()) throw InputError(fmt::format("{}: expected a JSON object with 'traceEvents'", origin));
  if (!doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    throw InputError(fmt::format("{}: key 'traceEvents': expected an array of trace events", origin));
  }
  std::int64_t base = 0;
  if (doc.contains("baseTimeNanoseconds")) {
    const nlohmann::json& b = doc["baseTimeNanoseconds"];
    if (!b.is_number_integer()) {
      throw InputError(fmt::format("{}: key 'baseTimeNanoseconds': expected an integer, got {}", origin, b.dump()));
    }
    base = b.get<std::int64_t>();
  }
  Trace t;
  if (doc.contains("k3perf")) {
    const nlohmann::json& meta = doc["k3perf"];
    if (!meta.is_object()) throw InputError(fmt::format("{}: key 'k3perf': expected an object", origin));
    for (const auto& [key, value] : meta.items()) {
      if (key == "format") continue;
      if (!value.is_string()) {
        throw InputError(fmt::format("{}: key 'k3perf.{}': expected a string, got {}", origin, key, value.dump()));
      }
      t.metadata[key] = value.get<std::string>();
    }
  }
  const nlohmann::json& events = doc["traceEvents"];
  t.reserve(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const nlohmann::json& ej = events[i];
    const EventReader r(ej, origin, i);
    if (!ej.is_object()) r.fail("", fmt::format("expected an object, got {}", ej.dump()));
    const std::string ph = r.string("ph");
    if (ph != "X") continue;
    if (!ej.contains("cat")) continue;
    const std::string cat = r.string("cat");
    Event e;
    if (!parse_event_kind(cat, &e.kind)) continue;
    e.name = r.string("name");
    e.start_ns = base + r.microseconds_as_ns("ts");
    e.end_ns = e.start_ns + r.microseconds_as_ns("dur");
    const nlohmann::json empty = nlohmann::json::object();
    const nlohmann::json& args = ej.contains("args") ? ej["args"] : empty;
    if (!args.is_object()) r.fail("args", fmt::format("expected an object, got {}", args.dump()));
    if (e.kind == EventKind::api || e.kind == EventKind::range) {
      e.thread = r.integer(ej, "tid", "tid", e.kind == EventKind::range ? kStepTrackThread : 0);
      if (e.kind == EventKind::api) e.correlation = r.unsigned_arg(args, "correlation");
    } else {
      e.device = static_cast<std::int32_t>(r.integer(args, "device", "args.device", 0));
      if (e.device >= kMaxDevices)
        r.fail("args.device", fmt::format("expected a device id below {}, got {}", kMaxDevices, e.device));
      const std::int64_t stream = r.integer(args, "stream", "args.stream", 0);
      if (stream > INT32_MAX) r.fail("args.stream", fmt::format("stream id {} out of range", stream));
      e.stream = static_cast<std::int32_t>(stream);
      e.correlation = r.unsigned_arg(args, "correlation");
      if (args.contains("graph_node")) e.graph_node = r.unsigned_arg(args, "graph_node");
      if (e.kind != EventKind::kernel) e.bytes = r.integer(args, "bytes", "args.bytes", 0);
      if (args.contains("op")) {
        if (!args["op"].is_string() || args["op"].get<std::string>().empty()) {
          r.fail("args.op", fmt::format("expected an op name, got {}", args["op"].dump()));
        }
        e.op = args["op"].get<std::string>();
        e.op_instance = r.integer(args, "op_instance", "args.op_instance", 0);
      }
    }
    t.add(e);
  }
  t.sort();
  return t;
}

void write_chrome_trace(const Trace& trace, const std::string& path, int gzip_level) {
  const std::string json = to_chrome_json(trace);
  const bool gz = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  write_file_atomically(path, gz ? gzip_compress(json, gzip_level) : json);
}

Trace read_trace(const std::string& path) {
  const std::string data = read_file(path);
  return parse_chrome_json(is_gzip(data) ? gzip_decompress(data, path) : data, path);
}

}  // namespace k3::profiler
