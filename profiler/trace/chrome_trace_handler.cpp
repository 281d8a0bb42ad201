#include "profiler/trace/chrome_trace_handler.h"

#include "core/error.h"
#include "core/limits.h"
#include "profiler/trace/chrome_json.h"

#include <fmt/format.h>

#include <cmath>

namespace k3::profiler {

using Type = ChromeTraceHandler::Value::Type;

namespace {

// A scalar Value as nlohmann-json holds it (null for null and for containers).
nlohmann::json as_json(const ChromeTraceHandler::Value& v) {
  switch (v.type) {
    case Type::boolean: return v.b;
    case Type::signed_integer: return v.i;
    case Type::unsigned_integer: return v.u;
    case Type::floating: return v.d;
    case Type::string: return v.s;
    default: return nullptr;
  }
}

bool is_integer(const ChromeTraceHandler::Value& v) {
  return v.type == Type::signed_integer || v.type == Type::unsigned_integer;
}

// The checks of one event, each naming the origin, the event's index and name, and the key.
class EventChecks {
 public:
  EventChecks(const std::string& origin, std::size_t index, const ChromeTraceHandler::Value* name)
      : origin_(origin), index_(index), name_(name) {}

  // `key` "": the event itself. Keys stay C strings: the checks pass a dozen per event.
  [[noreturn]] void fail(const char* key, const std::string& what) const {
    std::string who = fmt::format("{}: traceEvents[{}]", origin_, index_);
    if (name_ && name_->type == Type::string) who += fmt::format(" ('{}')", name_->s);
    if (*key == '\0') throw InputError(fmt::format("{}: {}", who, what));
    throw InputError(fmt::format("{}: key '{}': {}", who, key, what));
  }

  const ChromeTraceHandler::Value& required(const ChromeTraceHandler::Value& v, const char* key) const {
    if (v.type == Type::absent || v.type == Type::null) fail(key, "missing");
    return v;
  }

  const std::string& string(const ChromeTraceHandler::Value& v, const char* key) const {
    required(v, key);
    if (v.type != Type::string) fail(key, fmt::format("expected a string, got {}", v.dump()));
    return v.s;
  }

  // Microseconds (a number >= 0) to integer nanoseconds.
  std::int64_t microseconds_as_ns(const ChromeTraceHandler::Value& v, const char* key) const {
    required(v, key);
    double us = 0;
    switch (v.type) {
      case Type::signed_integer: us = static_cast<double>(v.i); break;
      case Type::unsigned_integer: us = static_cast<double>(v.u); break;
      case Type::floating: us = v.d; break;
      default: fail(key, fmt::format("expected a number of microseconds, got {}", v.dump()));
    }
    if (!std::isfinite(us) || us < 0 || us > 9.0e12)
      fail(key, fmt::format("expected microseconds in [0, 9e12], got {}", v.dump()));
    return std::llround(us * 1000.0);
  }

  std::int64_t integer(const ChromeTraceHandler::Value& v, const char* key, std::int64_t lowest) const {
    required(v, key);
    if (!is_integer(v)) fail(key, fmt::format("expected an integer, got {}", v.dump()));
    if (v.type == Type::unsigned_integer && v.u > std::uint64_t(INT64_MAX)) {
      fail(key, fmt::format("integer {} out of range", v.dump()));
    }
    const std::int64_t n = v.type == Type::signed_integer ? v.i : static_cast<std::int64_t>(v.u);
    if (n < lowest) fail(key, fmt::format("expected an integer >= {}, got {}", lowest, n));
    return n;
  }

  std::uint64_t unsigned_integer(const ChromeTraceHandler::Value& v, const char* key) const {
    required(v, key);
    if (v.type == Type::unsigned_integer) return v.u;
    if (v.type == Type::signed_integer && v.i >= 0) return static_cast<std::uint64_t>(v.i);
    fail(key, fmt::format("expected an integer >= 0, got {}", v.dump()));
  }

 private:
  const std::string& origin_;
  std::size_t index_;
  const ChromeTraceHandler::Value* name_;
};

}  // namespace

std::string ChromeTraceHandler::Value::dump() const {
  return quoted_excerpt(type == Type::compound ? compound.dump() : as_json(*this).dump());
}

ChromeTraceHandler::ChromeTraceHandler(std::string origin) : origin_(std::move(origin)) {}

template <typename Set>
void ChromeTraceHandler::scalar(Set set) {
  if (capture_target_) {
    set(capture_scalar_);
    capture(as_json(capture_scalar_), false);
    return;
  }
  if (frames_.empty()) {
    root_seen_ = true;
    return;
  }
  switch (frames_.back()) {
    case Frame::events:
      begin_event();
      set(element_);
      finish_event();
      return;
    case Frame::skipped: return;
    default:
      if (target_) set(*target_);
  }
}

void ChromeTraceHandler::null() {
  scalar([](Value& v) { v.type = Type::null; });
}
void ChromeTraceHandler::boolean(bool b) {
  scalar([b](Value& v) {
    v.type = Type::boolean;
    v.b = b;
  });
}
void ChromeTraceHandler::number_integer(std::int64_t n) {
  scalar([n](Value& v) {
    v.type = Type::signed_integer;
    v.i = n;
  });
}
void ChromeTraceHandler::number_unsigned(std::uint64_t n) {
  scalar([n](Value& v) {
    v.type = Type::unsigned_integer;
    v.u = n;
  });
}
void ChromeTraceHandler::number_float(double x) {
  scalar([x](Value& v) {
    v.type = Type::floating;
    v.d = x;
  });
}
void ChromeTraceHandler::string(std::string_view s) {
  scalar([s](Value& v) {
    v.type = Type::string;
    v.s.assign(s);
  });
}

namespace {
// Most keys differ from a (non-empty) word in size or first byte: told apart without a memcmp call.
bool is(std::string_view k, std::string_view word) { return k.size() == word.size() && k[0] == word[0] && k == word; }
}  // namespace

void ChromeTraceHandler::key(std::string_view k) {
  if (capture_target_) {
    capture_key_.assign(k);
    return;
  }
  using Field = std::pair<std::string_view, Value ChromeTraceHandler::*>;
  static constexpr Field kEventFields[] = {{"ph", &ChromeTraceHandler::ph_},     {"cat", &ChromeTraceHandler::cat_},
                                           {"name", &ChromeTraceHandler::name_}, {"ts", &ChromeTraceHandler::ts_},
                                           {"dur", &ChromeTraceHandler::dur_},   {"tid", &ChromeTraceHandler::tid_}};
  static constexpr Field kArgsFields[] = {{"device", &ChromeTraceHandler::device_},
                                          {"stream", &ChromeTraceHandler::stream_},
                                          {"correlation", &ChromeTraceHandler::correlation_},
                                          {"graph_node", &ChromeTraceHandler::graph_node_},
                                          {"bytes", &ChromeTraceHandler::bytes_},
                                          {"op", &ChromeTraceHandler::op_},
                                          {"op_instance", &ChromeTraceHandler::op_instance_}};
  const auto find = [&](const auto& fields) -> Value* {
    for (const auto& [word, field] : fields) {
      if (is(k, word)) return &(this->*field);
    }
    return nullptr;
  };
  key_ = Key::other;
  target_ = nullptr;
  switch (frames_.back()) {
    case Frame::root:
      if (is(k, "traceEvents")) {
        key_ = Key::trace_events;
        trace_events_seen_ = true;
        trace_events_is_array_ = false;
        target_ = &ignored_;
      } else if (is(k, "k3perf")) {
        key_ = Key::k3perf;
        k3perf_seen_ = true;
        k3perf_is_object_ = false;
        target_ = &ignored_;
      } else if (is(k, "baseTimeNanoseconds")) {
        target_ = &base_ns_;
      }
      break;
    case Frame::k3perf: target_ = &k3perf_members_[std::string(k)]; break;
    case Frame::event:
      if (is(k, "args")) {
        key_ = Key::args;
        target_ = &args_;
      } else {
        target_ = find(kEventFields);
      }
      break;
    case Frame::args: target_ = find(kArgsFields); break;
    case Frame::events:
    case Frame::skipped: break;
  }
}

void ChromeTraceHandler::capture(nlohmann::json v, bool opens) {
  nlohmann::json* place = nullptr;
  if (capture_stack_.empty()) {
    place = &capture_target_->compound;
  } else if (capture_stack_.back()->is_array()) {
    capture_stack_.back()->push_back(nullptr);
    place = &capture_stack_.back()->back();
  } else {
    place = &(*capture_stack_.back())[capture_key_];
  }
  *place = std::move(v);
  if (opens) capture_stack_.push_back(place);
}

void ChromeTraceHandler::open(bool object) {
  if (capture_target_) {
    capture(object ? nlohmann::json::object() : nlohmann::json::array(), true);
    return;
  }
  if (frames_.empty()) {
    root_seen_ = true;
    root_is_object_ = object;
    frames_.push_back(object ? Frame::root : Frame::skipped);
    return;
  }
  Value* into = nullptr;  // a container where a scalar belongs: captured into it
  Frame frame = Frame::skipped;
  switch (frames_.back()) {
    case Frame::root:
      if (key_ == Key::trace_events && !object) {
        trace_events_is_array_ = true;
        trace_ = Trace();
        event_index_ = 0;
        event_error_.reset();
        frame = Frame::events;
      } else if (key_ == Key::k3perf && object) {
        k3perf_is_object_ = true;
        k3perf_members_.clear();
        frame = Frame::k3perf;
      } else if (key_ == Key::other && target_) {
        into = target_;
      }
      break;
    case Frame::events:
      begin_event();
      if (object) {
        element_.type = Type::object;
        frame = Frame::event;
      } else {
        into = &element_;
      }
      break;
    case Frame::event:
      if (key_ == Key::args && object) {
        args_.type = Type::object;
        for (Value* v : {&device_, &stream_, &correlation_, &graph_node_, &bytes_, &op_, &op_instance_}) {
          v->type = Type::absent;
        }
        frame = Frame::args;
      } else {
        into = target_;
      }
      break;
    case Frame::k3perf:
    case Frame::args: into = target_; break;
    case Frame::skipped: break;
  }
  if (into) {
    into->type = Type::compound;
    capture_target_ = into;
    capture(object ? nlohmann::json::object() : nlohmann::json::array(), true);
    return;
  }
  frames_.push_back(frame);
}

void ChromeTraceHandler::close() {
  if (capture_target_) {
    capture_stack_.pop_back();
    if (!capture_stack_.empty()) return;
    capture_target_ = nullptr;
    if (frames_.back() == Frame::events) finish_event();
    return;
  }
  const Frame closed = frames_.back();
  frames_.pop_back();
  if (closed == Frame::event) finish_event();
  target_ = nullptr;
}

void ChromeTraceHandler::start_object() { open(true); }
void ChromeTraceHandler::end_object() { close(); }
void ChromeTraceHandler::start_array() { open(false); }
void ChromeTraceHandler::end_array() { close(); }

void ChromeTraceHandler::begin_event() {
  for (Value* v : {&element_, &ph_, &cat_, &name_, &ts_, &dur_, &tid_, &args_, &device_, &stream_, &correlation_,
                   &graph_node_, &bytes_, &op_, &op_instance_}) {
    v->type = Type::absent;
  }
}

void ChromeTraceHandler::finish_event() {
  const std::size_t index = event_index_++;
  if (event_error_) return;  // the first bad event is the one reported
  try {
    read_event(index);
  } catch (const InputError& e) {
    event_error_ = e.what();
  }
}

void ChromeTraceHandler::read_event(std::size_t index) {
  const bool object = element_.type == Type::object;
  const EventChecks c(origin_, index, object ? &name_ : nullptr);
  if (!object) c.fail("", fmt::format("expected an object, got {}", element_.dump()));
  const std::string& ph = c.string(ph_, "ph");
  if (ph != "X") return;
  if (cat_.type == Type::absent) return;
  EventKind kind;
  if (!parse_event_kind(c.string(cat_, "cat"), &kind)) return;
  const std::string& name = c.string(name_, "name");
  const std::int64_t start_ns = c.microseconds_as_ns(ts_, "ts");
  const std::int64_t end_ns = start_ns + c.microseconds_as_ns(dur_, "dur");
  if (args_.type != Type::absent && args_.type != Type::object) {
    c.fail("args", fmt::format("expected an object, got {}", args_.dump()));
  }
  std::int32_t device = kNone, stream = kNone;
  std::int64_t thread = kNone, bytes = 0, op_instance = kNone;
  std::uint64_t correlation = 0, graph_node = 0;
  const std::string* op = nullptr;
  if (kind == EventKind::api || kind == EventKind::range) {
    thread = c.integer(tid_, "tid", kind == EventKind::range ? kStepTrackThread : 0);
    if (kind == EventKind::api) correlation = c.unsigned_integer(correlation_, "args.correlation");
  } else {
    const std::int64_t d = c.integer(device_, "args.device", 0);
    if (d >= kMaxDevices) c.fail("args.device", fmt::format("expected a device id below {}, got {}", kMaxDevices, d));
    device = static_cast<std::int32_t>(d);
    const std::int64_t s = c.integer(stream_, "args.stream", 0);
    if (s > INT32_MAX) c.fail("args.stream", fmt::format("stream id {} out of range", s));
    stream = static_cast<std::int32_t>(s);
    correlation = c.unsigned_integer(correlation_, "args.correlation");
    if (graph_node_.type != Type::absent) graph_node = c.unsigned_integer(graph_node_, "args.graph_node");
    if (kind != EventKind::kernel) bytes = c.integer(bytes_, "args.bytes", 0);
    if (op_.type != Type::absent) {
      if (op_.type != Type::string || op_.s.empty()) {
        c.fail("args.op", fmt::format("expected an op name, got {}", op_.dump()));
      }
      op = &op_.s;
      op_instance = c.integer(op_instance_, "args.op_instance", 0);
    }
  }
  Trace& t = trace_;
  t.kind.push_back(kind);
  t.start_ns.push_back(start_ns);
  t.end_ns.push_back(end_ns);
  t.device.push_back(device);
  t.stream.push_back(stream);
  t.thread.push_back(thread);
  t.correlation.push_back(correlation);
  t.graph_node.push_back(graph_node);
  t.bytes.push_back(bytes);
  t.name.push_back(t.intern(name));
  t.op.push_back(op ? static_cast<std::int32_t>(t.intern(*op)) : kNone);
  t.op_instance.push_back(op_instance);
}

Trace ChromeTraceHandler::finish() {
  K3_CHECK(root_seen_ && frames_.empty() && !capture_target_, "{}: the JSON document is incomplete", origin_);
  if (!root_is_object_) throw InputError(fmt::format("{}: expected a JSON object with 'traceEvents'", origin_));
  if (!trace_events_seen_ || !trace_events_is_array_) {
    throw InputError(fmt::format("{}: key 'traceEvents': expected an array of trace events", origin_));
  }
  std::int64_t base = 0;
  if (base_ns_.type != Type::absent) {
    if (!is_integer(base_ns_)) {
      throw InputError(
          fmt::format("{}: key 'baseTimeNanoseconds': expected an integer, got {}", origin_, base_ns_.dump()));
    }
    // Event times are at most 9e12 us (9e15 ns, twice that at an end): a base within 2^62 keeps base + time exact.
    constexpr auto kMaxBaseNs = static_cast<std::int64_t>(limit::trace_base_time.value);
    static_assert(kMaxBaseNs == std::int64_t{1} << 62);
    const bool inside = base_ns_.type == Type::signed_integer ? base_ns_.i >= -kMaxBaseNs && base_ns_.i <= kMaxBaseNs
                                                              : base_ns_.u <= static_cast<std::uint64_t>(kMaxBaseNs);
    if (!inside) {
      throw InputError(fmt::format("{}: key 'baseTimeNanoseconds': {} is outside [-{}, {}]", origin_, base_ns_.dump(),
                                   kMaxBaseNs, kMaxBaseNs));
    }
    base = base_ns_.type == Type::signed_integer ? base_ns_.i : static_cast<std::int64_t>(base_ns_.u);
  }
  if (k3perf_seen_) {
    if (!k3perf_is_object_) throw InputError(fmt::format("{}: key 'k3perf': expected an object", origin_));
    for (const auto& [key, value] : k3perf_members_) {
      if (key == "format" || key == "trace_format") continue;
      if (value.type == Type::signed_integer || value.type == Type::unsigned_integer) {
        trace_.metadata[key] = value.type == Type::signed_integer ? std::to_string(value.i) : std::to_string(value.u);
        trace_.integer_keys.insert(key);
        continue;
      }
      if (value.type != Type::string) {
        throw InputError(
            fmt::format("{}: key 'k3perf.{}': expected a string or an integer, got {}", origin_, key, value.dump()));
      }
      trace_.metadata[key] = value.s;
    }
  }
  if (event_error_) throw InputError(*event_error_);
  for (std::size_t i = 0; i < trace_.size(); ++i) {
    trace_.start_ns[i] += base;
    trace_.end_ns[i] += base;
  }
  trace_.sort();
  return std::move(trace_);
}

}  // namespace k3::profiler
