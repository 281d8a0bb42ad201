// The Chrome trace-event reader as a SAX handler: it takes the JSON's tokens in order (from any
// tokenizer) and fills the Trace's columns as each event closes, keeping only the current event's
// fields, so memory is the Trace plus one event. It keeps the semantics of a reader over the whole
// document (nlohmann-json's DOM): the last of duplicate keys wins, and errors come in the DOM reader's
// order (top-level keys first, then the first bad event) whatever order the keys arrive in.
#pragma once

#include "profiler/trace/trace.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace k3::profiler {

class ChromeTraceHandler {
 public:
  explicit ChromeTraceHandler(std::string origin);

  // Tokens, in document order.
  void null();
  void boolean(bool b);
  void number_integer(std::int64_t n);
  void number_unsigned(std::uint64_t n);
  void number_float(double x);
  void string(std::string_view s);
  void key(std::string_view k);
  void start_object();
  void end_object();
  void start_array();
  void end_array();

  // After the last token: the sorted trace, or InputError naming the origin (and the event and key).
  Trace finish();

  // One JSON value the reader checks, with what the DOM reader would see: its type and value.
  // Containers where a scalar belongs are kept whole, for the error message.
  struct Value {
    enum class Type : std::uint8_t {
      absent,
      null,
      boolean,
      signed_integer,
      unsigned_integer,
      floating,
      string,
      object,
      compound
    };
    Type type = Type::absent;
    bool b = false;
    std::int64_t i = 0;
    std::uint64_t u = 0;
    double d = 0;
    std::string s;
    nlohmann::json compound;   // an array or object kept whole (type compound)
    std::string dump() const;  // as nlohmann::json::dump writes it
  };

 private:
  // What the current container is, and so where its members go.
  enum class Frame : std::uint8_t { root, k3perf, events, event, args, skipped };

  template <typename Set>
  void scalar(Set set);  // `set` stores the scalar into the Value it belongs to
  void open(bool object);
  void close();
  void capture(nlohmann::json v, bool opens);
  void begin_event();
  void finish_event();
  void read_event(std::size_t index);

  std::string origin_;
  std::vector<Frame> frames_;
  Value* target_ = nullptr;  // where the value of the last key goes; nullptr: skipped
  Value ignored_;            // scalars where a container is expected: only their presence counts
  enum class Key : std::uint8_t { other, trace_events, k3perf, args } key_ = Key::other;

  // Top-level keys (the last of duplicates wins).
  bool root_seen_ = false, root_is_object_ = false;
  bool trace_events_seen_ = false, trace_events_is_array_ = false;
  bool k3perf_seen_ = false, k3perf_is_object_ = false;
  Value base_ns_;
  std::map<std::string, Value> k3perf_members_;

  // The events: the current one's fields, and the trace filled so far.
  std::size_t event_index_ = 0;  // of the current event in traceEvents
  Value element_, ph_, cat_, name_, ts_, dur_, tid_, args_;
  Value device_, stream_, correlation_, graph_node_, bytes_, op_, op_instance_;
  std::optional<std::string> event_error_;  // the first bad event's message
  Trace trace_;                             // start_ns/end_ns relative to baseTimeNanoseconds until finish()

  // A container where a scalar belongs, kept whole for the error message: built as its tokens arrive.
  Value* capture_target_ = nullptr;
  std::vector<nlohmann::json*> capture_stack_;
  std::string capture_key_;
  Value capture_scalar_;
};

}  // namespace k3::profiler
