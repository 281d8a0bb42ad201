#include "profiler/trace/trace.h"

#include "core/error.h"

#include <algorithm>
#include <numeric>
#include <string_view>

namespace k3::profiler {

namespace {
// The names, as views: parse_event_kind runs once per event read.
std::string_view name_of_kind(EventKind k) {
  switch (k) {
    case EventKind::kernel: return "kernel";
    case EventKind::memcpy: return "memcpy";
    case EventKind::memset: return "memset";
    case EventKind::api: return "cuda_api";
    case EventKind::range: return "nvtx";
  }
  return "?";
}
}  // namespace

std::string to_string(EventKind k) { return std::string(name_of_kind(k)); }

bool parse_event_kind(const std::string& name, EventKind* out) {
  for (EventKind k : {EventKind::kernel, EventKind::memcpy, EventKind::memset, EventKind::api, EventKind::range}) {
    if (name_of_kind(k) == name) {
      *out = k;
      return true;
    }
  }
  return false;
}

std::string unversioned_api_name(const std::string& name) {
  const std::size_t v = name.rfind("_v");
  if (v == std::string::npos || v == 0 || v + 2 == name.size() || name.compare(0, 2, "cu") != 0) return name;
  for (std::size_t i = v + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, v);
}

std::uint32_t Trace::intern(const std::string& s) {
  // find first: emplace would build a node (a string copy) for every name already known
  if (const auto it = index_.find(s); it != index_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names_.size());
  index_.emplace(s, id);
  names_.push_back(s);
  return id;
}

void Trace::set_integer(const std::string& key, std::int64_t value) {
  metadata[key] = std::to_string(value);
  integer_keys.insert(key);
}

void Trace::reserve(std::size_t n) {
  kind.reserve(n);
  start_ns.reserve(n);
  end_ns.reserve(n);
  device.reserve(n);
  stream.reserve(n);
  thread.reserve(n);
  correlation.reserve(n);
  graph_node.reserve(n);
  bytes.reserve(n);
  name.reserve(n);
  op.reserve(n);
  op_instance.reserve(n);
}

void Trace::add(const Event& e) {
  K3_CHECK(e.end_ns >= e.start_ns, "event '{}' ends at {} ns before it starts at {} ns", e.name, e.end_ns, e.start_ns);
  kind.push_back(e.kind);
  start_ns.push_back(e.start_ns);
  end_ns.push_back(e.end_ns);
  device.push_back(e.device);
  stream.push_back(e.stream);
  thread.push_back(e.thread);
  correlation.push_back(e.correlation);
  graph_node.push_back(e.graph_node);
  bytes.push_back(e.bytes);
  name.push_back(intern(e.name));
  op.push_back(e.op.empty() ? kNone : static_cast<std::int32_t>(intern(e.op)));
  op_instance.push_back(e.op_instance);
}

Event Trace::event(std::size_t i) const {
  return Event{kind[i],   name_of(i),     start_ns[i],   end_ns[i], device[i], stream[i],
               thread[i], correlation[i], graph_node[i], bytes[i],  op_of(i),  op_instance[i]};
}

bool Trace::is_sorted() const {
  for (std::size_t i = 1; i < size(); ++i) {
    if (start_ns[i] < start_ns[i - 1] || (start_ns[i] == start_ns[i - 1] && kind[i] < kind[i - 1])) return false;
  }
  return true;
}

namespace {
template <typename T>
void permute(std::vector<T>& column, const std::vector<std::size_t>& order) {
  std::vector<T> out(column.size());
  for (std::size_t i = 0; i < order.size(); ++i) out[i] = column[order[i]];
  column.swap(out);
}
}  // namespace

void Trace::sort() {
  if (is_sorted()) return;
  std::vector<std::size_t> order(size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return start_ns[a] != start_ns[b] ? start_ns[a] < start_ns[b] : kind[a] < kind[b];
  });
  permute(kind, order);
  permute(start_ns, order);
  permute(end_ns, order);
  permute(device, order);
  permute(stream, order);
  permute(thread, order);
  permute(correlation, order);
  permute(graph_node, order);
  permute(bytes, order);
  permute(name, order);
  permute(op, order);
  permute(op_instance, order);
}

}  // namespace k3::profiler
