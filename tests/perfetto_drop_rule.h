// Perfetto's JSON importer, as its FAQ and google/perfetto#4280 state it: the complete events ("ph":"X") of one
// track (pid, tid), in timestamp order (the file's order for equal times), must nest; one that starts inside the
// innermost open event and ends after it is dropped. Times in integer nanoseconds, as Perfetto reads them. Every
// test that writes a trace (measured, predicted, simulated) runs it over the file.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace k3::test {

// The names of the events Perfetto would drop.
inline std::vector<std::string> perfetto_would_drop(const std::string& json) {
  struct X {
    long long ts, end;
    std::string name;
  };
  const auto ns = [](const nlohmann::json& us) { return std::llround(us.get<double>() * 1000); };
  std::map<std::pair<long long, long long>, std::vector<X>> tracks;
  const nlohmann::json doc = nlohmann::json::parse(json);  // named: a temporary's member would dangle in the loop
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const long long ts = ns(e.at("ts"));
    tracks[{e.at("pid").get<long long>(), e.at("tid").get<long long>()}].push_back(
        {ts, ts + ns(e.at("dur")), e.at("name").get<std::string>()});
  }
  std::vector<std::string> dropped;
  for (auto& [track, events] : tracks) {
    std::stable_sort(events.begin(), events.end(), [](const X& a, const X& b) { return a.ts < b.ts; });
    std::vector<long long> open;  // end times, innermost last
    for (const X& e : events) {
      while (!open.empty() && open.back() <= e.ts) open.pop_back();
      if (!open.empty() && e.end > open.back()) {
        dropped.push_back(e.name);
        continue;
      }
      open.push_back(e.end);
    }
  }
  return dropped;
}

}  // namespace k3::test
