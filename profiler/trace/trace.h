// The trace model: every event of a profiled run in one structure of arrays (one column per field,
// one row per event), sorted by start time. Kernels, memory copies and sets run on a device and a
// stream; runtime API calls and NVTX ranges run on a host thread. A kernel carries the op it was
// attributed to (profiler/attribution) and the instance of that op (one per step), so compare
// joins on op names without re-attributing. Times are integer nanoseconds on the collector's clock.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace k3::profiler {

enum class EventKind : std::uint8_t { kernel, memcpy, memset, api, range };
std::string to_string(EventKind k);
bool parse_event_kind(const std::string& name, EventKind* out);

// A CUDA API name without CUPTI's version suffix: "cudaLaunchKernel_v7000" -> "cudaLaunchKernel", as Kineto,
// HTA and Nsight Systems name the calls. Other names are returned unchanged.
std::string unversioned_api_name(const std::string& name);

inline constexpr std::int32_t kNone = -1;
// The host "thread" of step ranges (profiler/attribution: from external correlation ids; no real thread has it).
inline constexpr std::int64_t kStepTrackThread = -2;

// One event, as handed to Trace::add (the columns below hold the same fields).
struct Event {
  EventKind kind = EventKind::kernel;
  std::string name;  // kernel (mangled or not), "cudaLaunchKernel", "memcpy_htod", op name
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;           // >= start_ns
  std::int32_t device = kNone;       // GPU events
  std::int32_t stream = kNone;       // GPU events
  std::int64_t thread = kNone;       // host events (API calls, ranges)
  std::uint64_t correlation = 0;     // 0: none; links an API call to the GPU work it launched
  std::uint64_t graph_node = 0;      // 0: not replayed from a CUDA graph
  std::int64_t bytes = 0;            // memcpy, memset
  std::string op;                    // kernels, memcpys, memsets: the attributed op, "" if none
  std::int64_t op_instance = kNone;  // which occurrence of the op (0, 1, ... in time order)
};

class Trace {
 public:
  // Columns, one entry per event; valid after sort() (add() appends unsorted).
  std::vector<EventKind> kind;
  std::vector<std::int64_t> start_ns, end_ns;
  std::vector<std::int32_t> device, stream;
  std::vector<std::int64_t> thread;
  std::vector<std::uint64_t> correlation, graph_node;
  std::vector<std::int64_t> bytes;
  std::vector<std::uint32_t> name;  // index into names()
  std::vector<std::int32_t> op;     // index into names(), kNone when unattributed
  std::vector<std::int64_t> op_instance;

  // Run-level facts in the JSON's "k3perf" object: commit, capture date, GPU, command, dropped records, ...
  std::map<std::string, std::string> metadata;
  // The keys of `metadata` whose values are counts (decimal integers): written as JSON numbers, not strings.
  std::set<std::string> integer_keys;
  void set_integer(const std::string& key, std::int64_t value);
  // Labels of GPU tracks by (device, stream), "stream N" where none is given (written, not read back).
  std::map<std::pair<std::int32_t, std::int32_t>, std::string> stream_names;

  void add(const Event& e);  // checks end_ns >= start_ns (K3_CHECK)
  void reserve(std::size_t events);
  // Stable sort by (start_ns, kind): the order the JSON is written in and readers rely on.
  void sort();
  bool is_sorted() const;

  std::size_t size() const { return kind.size(); }
  const std::string& name_of(std::size_t i) const { return names_[name[i]]; }
  std::string op_of(std::size_t i) const { return op[i] == kNone ? std::string() : names_[op[i]]; }
  Event event(std::size_t i) const;
  std::uint32_t intern(const std::string& s);
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t> index_;  // lookup only, never iterated
};

}  // namespace k3::profiler
