#include "profiler/trace/chrome_writer.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>

namespace k3::profiler {

namespace {
void append_us(std::string& out, std::int64_t ns) {
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}
}  // namespace

void ChromeTraceBuilder::process(int pid, const std::string& name) { tracks_.push_back({pid, 0, name, true}); }

void ChromeTraceBuilder::thread(int pid, std::int64_t tid, const std::string& name) {
  tracks_.push_back({pid, tid, name, false});
}

void ChromeTraceBuilder::complete(int pid, std::int64_t tid, const std::string& cat, const std::string& name,
                                  std::int64_t start_ns, std::int64_t end_ns, nlohmann::ordered_json args) {
  K3_CHECK(start_ns >= 0 && end_ns >= start_ns, "event '{}' from {} ns to {} ns", name, start_ns, end_ns);
  events_.push_back({pid, tid, cat, name, start_ns, end_ns, std::move(args)});
}

std::string ChromeTraceBuilder::json() const {
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  meta["format"] = "k3perf-trace-1";
  for (const auto& [key, value] : metadata_.items()) meta[key] = value;
  std::string out = "{\"schemaVersion\":1,\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":0,\n\"k3perf\":";
  out += meta.dump();
  out += ",\n\"traceEvents\":[\n";
  std::map<int, long> thread_order;  // per process, the next sort index
  long process_order = 0;
  for (const Track& t : tracks_) {
    const nlohmann::ordered_json name = nlohmann::ordered_json{{"name", t.name}};
    const long sort = t.process ? process_order++ : thread_order[t.pid]++;
    fmt::format_to(
        std::back_inserter(out),
        "{{\"ph\":\"M\",\"name\":\"{}_name\",\"pid\":{},\"tid\":{},\"args\":{}}},\n"
        "{{\"ph\":\"M\",\"name\":\"{}_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}},\n",
        t.process ? "process" : "thread", t.pid, t.tid, name.dump(), t.process ? "process" : "thread", t.pid, t.tid,
        sort);
  }
  // By start time, then the longer first, so that an enclosing event comes before what it holds.
  std::vector<const Complete*> order;
  order.reserve(events_.size());
  for (const Complete& e : events_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Complete* a, const Complete* b) {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
  });
  bool first = true;
  for (const Complete* e : order) {
    out += first ? "" : ",\n";
    first = false;
    out += "{\"ph\":\"X\",\"cat\":";
    out += nlohmann::ordered_json(e->cat).dump();
    out += ",\"name\":";
    out += nlohmann::ordered_json(e->name).dump();
    fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"ts\":", e->pid, e->tid);
    append_us(out, e->start_ns);
    out += ",\"dur\":";
    append_us(out, e->end_ns - e->start_ns);
    out += ",\"args\":";
    out += e->args.dump();
    out += '}';
  }
  out += "\n]}\n";
  return out;
}

}  // namespace k3::profiler
