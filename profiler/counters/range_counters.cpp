#include "profiler/counters/range_counters.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_reader.h"

#include <cmath>
#include <set>

namespace k3::profiler {

namespace {
constexpr const char* kFormat = "k3perf-range-counters";
constexpr int kVersion = 1;
}  // namespace

std::vector<std::string> counter_mode_metrics() {
  return {kDramBytesRead, kDramBytesWrite, kTensorOpsBf16, kTensorOpsFp8, kGpuTimeNs};
}

std::string to_json_text(const RangeCounters& c) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["metadata"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : c.metadata) j["metadata"][key] = value;
  j["metrics"] = c.metrics;
  j["lost_ranges"] = c.lost_ranges;
  j["ranges"] = nlohmann::ordered_json::array();
  for (const CounterRange& r : c.ranges) {
    nlohmann::ordered_json range;
    range["name"] = r.name;
    range["occurrence"] = r.occurrence;
    range["values"] = nlohmann::ordered_json::object();
    for (const std::string& m : c.metrics) {
      const auto v = r.values.find(m);
      K3_CHECK(v != r.values.end(), "range '{}' (occurrence {}) has no value of metric '{}'", r.name, r.occurrence, m);
      range["values"][m] = v->second;
    }
    j["ranges"].push_back(std::move(range));
  }
  return j.dump(1) + "\n";
}

void write_range_counters(const RangeCounters& counters, const std::string& path) {
  write_file_atomically(path, to_json_text(counters));
}

RangeCounters parse_range_counters(const std::string& text, const std::string& origin) {
  const JsonNode root = JsonNode::parse(text, origin);
  if (root["format"].as_string() != kFormat) {
    root["format"].fail(
        fmt::format("expected '{}' (a file of k3perf run --counters), got '{}'", kFormat, root["format"].as_string()));
  }
  if (root["version"].as_int() != kVersion) {
    root["version"].fail(fmt::format("expected version {}, got {}", kVersion, root["version"].as_int()));
  }
  RangeCounters c;
  c.origin = origin;
  if (const auto meta = root.find("metadata")) {
    if (!meta->raw().is_object()) meta->fail("expected an object of strings");
    for (const auto& [key, value] : meta->raw().items()) c.metadata[key] = (*meta)[key].as_string();
  }
  const JsonNode metrics = root["metrics"];
  if (!metrics.raw().is_array() || metrics.raw().empty()) metrics.fail("expected a non-empty array of metric names");
  std::set<std::string> known;
  for (std::size_t i = 0; i < metrics.raw().size(); ++i) {
    const JsonNode m(&metrics.raw()[i], origin, fmt::format("metrics[{}]", i));
    const std::string name = m.as_string();
    if (name.empty()) m.fail("expected a metric name");
    if (!known.insert(name).second) m.fail(fmt::format("metric '{}' appears twice", name));
    c.metrics.push_back(name);
  }
  c.lost_ranges = root["lost_ranges"].as_non_negative_int();
  const JsonNode ranges = root["ranges"];
  if (!ranges.raw().is_array()) ranges.fail("expected an array of ranges");
  std::map<std::string, int> seen;  // occurrences so far, per name
  for (std::size_t i = 0; i < ranges.raw().size(); ++i) {
    const JsonNode r(&ranges.raw()[i], origin, fmt::format("ranges[{}]", i));
    const std::string name = r["name"].as_string();
    if (name.empty()) r["name"].fail("expected a range name");
    CounterRange& range = c.ranges.emplace_back();
    range.name = name;
    range.occurrence = seen[name]++;
    const long long occurrence = r["occurrence"].as_non_negative_int();
    if (occurrence != range.occurrence) {
      r["occurrence"].fail(fmt::format("expected {} (range '{}' appeared {} times before), got {}", range.occurrence,
                                       name, range.occurrence, occurrence));
    }
    const JsonNode values = r["values"];
    if (!values.raw().is_object()) values.fail("expected an object of metric values");
    for (const auto& [key, value] : values.raw().items()) {
      if (!known.count(key)) values.fail(fmt::format("metric '{}' is not in 'metrics'", key));
    }
    for (const std::string& m : c.metrics) {
      const JsonNode v = values[m];
      const double x = v.as_double();
      if (!std::isfinite(x) || x < 0) v.fail(fmt::format("expected a count >= 0, got {}", v.raw().dump()));
      range.values[m] = x;
    }
  }
  return c;
}

RangeCounters read_range_counters(const std::string& path) { return parse_range_counters(read_file(path), path); }

}  // namespace k3::profiler
