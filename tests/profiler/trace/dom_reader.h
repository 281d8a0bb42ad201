// The reader of Chrome trace-event JSON as it was before it streamed: the whole document parsed into
// nlohmann-json's DOM, then each event checked. The streaming reader (profiler/trace) must give the
// same traces and the same errors; this is its independent reference.
#pragma once

#include "core/error.h"
#include "profiler/trace/chrome_json.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

namespace k3::profiler::dom {

class DomEventReader {
 public:
  DomEventReader(const nlohmann::json& e, const std::string& origin, std::size_t index)
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

inline Trace parse_chrome_json_dom(const std::string& text, const std::string& origin) {
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
      if (key == "format" || key == "trace_format") continue;
      if (value.is_number_integer()) {
        t.metadata[key] = value.dump();
        t.integer_keys.insert(key);
        continue;
      }
      if (!value.is_string()) {
        throw InputError(
            fmt::format("{}: key 'k3perf.{}': expected a string or an integer, got {}", origin, key, value.dump()));
      }
      t.metadata[key] = value.get<std::string>();
    }
  }
  const nlohmann::json& events = doc["traceEvents"];
  t.reserve(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const nlohmann::json& ej = events[i];
    const DomEventReader r(ej, origin, i);
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

}  // namespace k3::profiler::dom
