// A Chrome trace-event document built event by event, for traces that are not measurements (the serving
// simulation's schedule): named tracks in the order they are declared (process_name / thread_name with their
// sort indices), complete events with JSON args, times in integer nanoseconds written as microseconds with three
// decimals, run metadata in the top-level "k3perf" object. The caller lays events out so that those of one track
// nest (tests/perfetto_drop_rule.h checks every written trace).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace k3::profiler {

class ChromeTraceBuilder {
 public:
  void process(int pid, const std::string& name);
  void thread(int pid, std::int64_t tid, const std::string& name);
  // `start_ns` >= 0; `end_ns` >= start_ns.
  void complete(int pid, std::int64_t tid, const std::string& cat, const std::string& name, std::int64_t start_ns,
                std::int64_t end_ns, nlohmann::ordered_json args = nlohmann::ordered_json::object());
  nlohmann::ordered_json& metadata() { return metadata_; }  // "format" is set by json()
  std::string json() const;

 private:
  struct Track {
    int pid;
    std::int64_t tid;  // process tracks: 0
    std::string name;
    bool process;
  };
  struct Complete {
    int pid;
    std::int64_t tid;
    std::string cat, name;
    std::int64_t start_ns, end_ns;
    nlohmann::ordered_json args;
  };
  std::vector<Track> tracks_;
  std::vector<Complete> events_;
  nlohmann::ordered_json metadata_ = nlohmann::ordered_json::object();
};

}  // namespace k3::profiler
