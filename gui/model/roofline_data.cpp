#include "gui/model/roofline_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace k3::gui {

double RooflineData::roof_at(double intensity, const std::string& compute) const {
  double peak = 0;
  for (const ComputeRoof& r : compute_roofs) {
    if (r.compute == compute) peak = r.peak_flops_per_s;
  }
  if (peak == 0 && !compute_roofs.empty()) peak = compute_roofs.back().peak_flops_per_s;
  return std::min(peak, hbm_bandwidth_bytes_per_s * intensity);
}

RooflineData roofline_data(const PredictionData& p, const Hardware& hw, const nlohmann::ordered_json* comparison) {
  RooflineData d;
  d.hardware = hw.name;
  d.hbm_bandwidth_bytes_per_s = hw.hbm_bandwidth_bytes_per_s;
  for (const auto& [type, peak] : hw.peak_flops_per_s) {
    d.compute_roofs.push_back({to_string(type), peak, peak / hw.hbm_bandwidth_bytes_per_s});
  }
  std::sort(d.compute_roofs.begin(), d.compute_roofs.end(),
            [](const ComputeRoof& a, const ComputeRoof& b) { return a.peak_flops_per_s < b.peak_flops_per_s; });

  std::map<std::string, std::size_t> by_name;
  for (const PredictedOpRow& o : p.ops) {
    if (o.collective()) {
      ++d.collectives_left_out;
      continue;
    }
    if (o.flops <= 0 || o.bytes <= 0 || o.time_us <= 0) {
      ++d.zero_flop_left_out;
      continue;
    }
    RooflinePoint pt;
    pt.name = o.name;
    pt.kind = o.kind;
    pt.bound = o.bound;
    pt.compute = o.compute;
    pt.flops = o.flops;
    pt.intensity_flops_per_byte = o.flops / o.bytes;
    pt.predicted_us = o.time_us;
    pt.predicted_flops_per_s = o.flops / (o.time_us * 1e-6);
    pt.roof_flops_per_s = d.roof_at(pt.intensity_flops_per_byte, o.compute);
    by_name[pt.name] = d.points.size();
    d.points.push_back(std::move(pt));
  }

  if (comparison && comparison->contains("ops")) {
    for (const auto& op : (*comparison)["ops"]) {
      const double flops = op.value("flops", 0.0), measured_us = op.value("measured_us", 0.0);
      if (flops <= 0 || measured_us <= 0) continue;
      ++d.comparison_ops;
      auto it = by_name.find(op.value("name", std::string()));
      if (it == by_name.end()) continue;
      RooflinePoint& pt = d.points[it->second];
      pt.measured_us = measured_us;
      pt.measured_flops_per_s = flops / (measured_us * 1e-6);
      ++d.measured_joined;
    }
  }
  return d;
}

std::string rate_text(double per_s, const std::string& unit) {
  static const std::pair<double, const char*> kPrefixes[] = {
      {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}};
  for (auto [scale, prefix] : kPrefixes) {
    if (per_s >= scale) return fmt::format("{:.3g} {}{}", per_s / scale, prefix, unit);
  }
  return fmt::format("{:.3g} {}", per_s, unit);
}

}  // namespace k3::gui
