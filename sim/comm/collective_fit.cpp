#include "sim/comm/collective_fit.h"

#include "core/error.h"
#include "core/hardware_writer.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace k3 {

namespace {
// Seven significant digits, written as a plain YAML scalar (yaml-cpp would print 17).
std::string number(double v) { return fmt::format("{:.7g}", v); }
std::string bytes(double v) { return fmt::format("{:.0f}", v); }  // sizes are whole bytes

constexpr double kLatencyDominated = 0.01;  // excess over α taken as at least this share of t
}  // namespace

double max_relative_error(const MeasuredCollective& curve, const std::vector<NcclSample>& samples) {
  double worst = 0;
  for (const NcclSample& s : samples) worst = std::max(worst, std::fabs(curve.time_us(s.size_bytes) / s.time_us - 1.0));
  return worst;
}

MeasuredCollective fit_collective(const std::vector<NcclSample>& samples, const std::string& link, double target) {
  if (samples.empty()) throw InputError("fit_collective: no samples");
  const std::string& name = samples.front().collective;
  const int n = samples.front().group_size;
  std::set<double> sizes;
  for (const NcclSample& s : samples) {
    if (s.collective != name || s.group_size != n) {
      throw InputError(
          fmt::format("fit_collective: samples mix {} on {} GPUs with {} on {}", name, n, s.collective, s.group_size));
    }
    if (!sizes.insert(s.size_bytes).second) {
      throw InputError(fmt::format("fit_collective: {} on {} GPUs has two samples at {} bytes", name, n, s.size_bytes));
    }
  }
  if (sizes.size() < 2) throw InputError(fmt::format("fit_collective: {} needs at least two sizes", name));
  std::vector<NcclSample> sorted = samples;
  std::sort(sorted.begin(), sorted.end(),
            [](const NcclSample& a, const NcclSample& b) { return a.size_bytes < b.size_bytes; });

  MeasuredCollective c;
  c.collective = name;
  c.link = link;
  c.group_size = n;
  c.latency_us = sorted.front().time_us;
  for (const NcclSample& s : sorted) c.latency_us = std::min(c.latency_us, s.time_us);
  const double factor = nccl_bus_factor(name, n);
  for (const NcclSample& s : sorted) {
    // A latency-dominated sample says only that the bandwidth is high: its excess is taken as at least
    // kLatencyDominated of its time, which bounds the error it can leave there.
    const double excess = std::max(s.time_us - c.latency_us, kLatencyDominated * s.time_us);
    c.knot_sizes_bytes.push_back(s.size_bytes);
    c.knot_busbw_bytes_per_s.push_back(s.size_bytes * factor / (excess * 1e-6));
  }
  // Greedy knot removal while the worst error stays within the target (never below one knot).
  for (;;) {
    if (c.knot_sizes_bytes.size() <= 1) break;
    double best_err = INFINITY;
    std::size_t best = 0;
    for (std::size_t i = 0; i < c.knot_sizes_bytes.size(); ++i) {
      MeasuredCollective t = c;
      t.knot_sizes_bytes.erase(t.knot_sizes_bytes.begin() + static_cast<std::ptrdiff_t>(i));
      t.knot_busbw_bytes_per_s.erase(t.knot_busbw_bytes_per_s.begin() + static_cast<std::ptrdiff_t>(i));
      const double err = max_relative_error(t, sorted);
      if (err < best_err) {
        best_err = err;
        best = i;
      }
    }
    if (best_err > target) break;
    c.knot_sizes_bytes.erase(c.knot_sizes_bytes.begin() + static_cast<std::ptrdiff_t>(best));
    c.knot_busbw_bytes_per_s.erase(c.knot_busbw_bytes_per_s.begin() + static_cast<std::ptrdiff_t>(best));
  }
  for (const NcclSample& s : sorted) {
    c.measured_sizes_bytes.push_back(s.size_bytes);
    c.measured_times_us.push_back(s.time_us);
  }
  return c;
}

std::vector<MeasuredCollective> fit_table(const std::vector<NcclSample>& table, const Hardware& base, double target) {
  std::set<std::pair<std::string, int>> groups;
  for (const NcclSample& s : table) groups.insert({s.collective, s.group_size});
  std::vector<MeasuredCollective> out;
  for (const auto& [name, n] : groups) {
    out.push_back(
        fit_collective(select_samples(table, name, n), n <= base.scale_up_domain_gpus ? "nvlink" : "network", target));
  }
  return out;
}

std::string measured_hardware_yaml(const std::string& base_file, const std::string& name, const std::string& source_id,
                                   const std::string& citation, const std::vector<MeasuredCollective>& curves) {
  YAML::Node block;
  block["source"] = source_id;
  for (const MeasuredCollective& c : curves) {
    YAML::Node curve;
    curve["collective"] = c.collective;
    curve["link"] = c.link;
    curve["group_size"] = c.group_size;
    curve["latency_us"] = number(c.latency_us);
    for (std::size_t i = 0; i < c.knot_sizes_bytes.size(); ++i) {
      YAML::Node knot;
      knot.SetStyle(YAML::EmitterStyle::Flow);
      knot.push_back(bytes(c.knot_sizes_bytes[i]));
      knot.push_back(number(c.knot_busbw_bytes_per_s[i]));
      curve["busbw_knots"].push_back(knot);
    }
    for (std::size_t i = 0; i < c.measured_sizes_bytes.size(); ++i) {
      YAML::Node point;
      point.SetStyle(YAML::EmitterStyle::Flow);
      point.push_back(bytes(c.measured_sizes_bytes[i]));
      point.push_back(number(c.measured_times_us[i]));
      curve["measured_us"].push_back(point);
    }
    block["curves"].push_back(curve);
  }
  return derived_hardware_yaml(base_file, {name,
                                           source_id,
                                           citation,
                                           {{"collectives", block}},
                                           "k3perf comm fit",
                                           "a measured NCCL table",
                                           "docs/comm.md"});
}

}  // namespace k3
