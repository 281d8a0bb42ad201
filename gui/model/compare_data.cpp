#include "gui/model/compare_data.h"

#include "core/error.h"
#include "gui/model/json_fields.h"

#include <fmt/format.h>

#include <algorithm>

namespace k3::gui {
namespace {

using Json = nlohmann::ordered_json;

std::vector<CompareGroupRow> groups(const JsonFields& r, const Json& j, const std::string& key) {
  std::vector<CompareGroupRow> out;
  const std::string path = key + "[].";
  for (const Json& g : r.array(j, key)) {
    out.push_back({r.get<std::string>(g, "group", path), r.get<int>(g, "ops", path),
                   r.get<double>(g, "predicted_us", path), r.get<double>(g, "measured_us", path),
                   r.get<double>(g, "median_abs_error_percent", path)});
  }
  return out;
}

// The counter comparison under "counters": its totals into `d`, its ops onto d.ops by name.
void join_counters(const JsonFields& r, const Json& c, CompareData& d) {
  d.has_counters = true;
  d.counters_origin = r.get<std::string>(c, "counters", "counters.");
  d.counters_predicted_bytes = r.get<double>(c, "predicted_bytes", "counters.");
  d.counters_measured_bytes = r.get<double>(c, "measured_bytes", "counters.");
  d.counters_median_abs_bytes_error_percent = r.optional_number(c, "median_abs_bytes_error_percent", "counters.");
  d.counters_median_abs_flops_error_percent = r.optional_number(c, "median_abs_flops_error_percent", "counters.");
  for (const Json& g : r.array(c, "by_kind")) {
    d.counters_by_kind.push_back({r.get<std::string>(g, "kind", "counters.by_kind[]."),
                                  r.get<double>(g, "predicted_bytes", "counters.by_kind[]."),
                                  r.get<double>(g, "measured_bytes", "counters.by_kind[].")});
  }
  const std::string path = "counters.ops[].";
  for (const Json& o : r.array(c, "ops")) {
    const int i = d.find(r.get<std::string>(o, "name", path));
    if (i < 0) continue;  // measured by the counters but not by the trace
    d.ops[static_cast<std::size_t>(i)].counters = CounterRow{
        r.get<double>(o, "measured_bytes", path), r.optional_number(o, "bytes_error_percent", path),
        r.optional_number(o, "measured_tensor_flops", path), r.optional_number(o, "flops_error_percent", path)};
  }
}

}  // namespace

int CompareData::find(const std::string& name) const {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

double CompareData::median_step_measured_us() const {
  std::vector<double> sums;
  for (const CompareGroupRow& s : by_step) sums.push_back(s.measured_us);
  if (sums.empty()) return 0;
  std::sort(sums.begin(), sums.end());
  const std::size_t n = sums.size();
  return n % 2 ? sums[n / 2] : (sums[n / 2 - 1] + sums[n / 2]) / 2;
}

CompareData compare_from_json(const nlohmann::ordered_json& j, const std::string& origin) {
  const JsonFields r{origin, "k3perf compare --json"};
  CompareData d;
  d.prediction_origin = r.get<std::string>(j, "prediction");
  if (j.contains("trace_metadata") && j["trace_metadata"].is_object()) {
    for (const auto& [key, value] : j["trace_metadata"].items()) {
      d.trace_metadata.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  const Json& s = r.at(j, "summary", "");
  d.measured_ops = r.get<int>(s, "measured_ops", "summary.");
  d.kernels = r.get<int>(s, "kernels", "summary.");
  d.kernels_on_predicted_ops = r.get<int>(s, "kernels_on_predicted_ops", "summary.");
  d.kernel_time_us = r.get<double>(s, "kernel_time_us", "summary.");
  d.kernel_time_on_predicted_ops_us = r.get<double>(s, "kernel_time_on_predicted_ops_us", "summary.");
  d.coverage_percent = r.get<double>(s, "coverage_percent", "summary.");
  d.median_abs_error_percent = r.get<double>(s, "median_abs_error_percent", "summary.");
  d.by_kind = groups(r, j, "by_kind");
  d.by_step = groups(r, j, "by_step");
  const std::string path = "ops[].";
  for (const Json& o : r.array(j, "ops")) {
    CompareOpRow row;
    row.name = r.get<std::string>(o, "name", path);
    row.kind = r.get<std::string>(o, "kind", path);
    row.bound = r.get<std::string>(o, "bound", path);
    row.predicted_us = r.get<double>(o, "predicted_us", path);
    row.measured_us = r.get<double>(o, "measured_us", path);
    row.error_percent = r.get<double>(o, "error_percent", path);
    row.kernels = r.get<int>(o, "kernels", path);
    row.flops = r.get<double>(o, "flops", path);
    row.bytes = r.get<double>(o, "bytes", path);
    row.achieved_bytes_per_s = r.get<double>(o, "achieved_bytes_per_s", path);
    row.roofline_percent = r.optional_number(o, "roofline_percent", path);
    d.ops.push_back(std::move(row));
  }
  d.not_measured = r.get<std::vector<std::string>>(j, "not_measured");
  d.fused = r.get<std::vector<std::string>>(j, "fused");
  for (const Json& m : r.array(j, "not_predicted")) {
    // engine_only came later than the other keys; older files lack it.
    const bool engine_only = m.contains("engine_only") && r.get<bool>(m, "engine_only", "not_predicted[].");
    d.not_predicted.push_back({r.get<std::string>(m, "name", "not_predicted[]."),
                               r.get<int>(m, "instances", "not_predicted[]."),
                               r.get<double>(m, "measured_us", "not_predicted[]."), engine_only});
  }
  for (const Json& k : r.array(j, "unattributed_kernels")) {
    d.unattributed_kernels.push_back({r.get<std::string>(k, "name", "unattributed_kernels[]."),
                                      r.get<int>(k, "count", "unattributed_kernels[]."),
                                      r.get<double>(k, "total_us", "unattributed_kernels[].")});
  }
  if (j.contains("counters") && j["counters"].is_object()) join_counters(r, j["counters"], d);
  return d;
}

}  // namespace k3::gui
