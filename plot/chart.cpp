// The chart's Qt-free parts: tick choice and labels, colours, and choosing the file format.
#include "plot/chart.h"

#include "core/atomic_file.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace k3::plot {

std::vector<double> nice_ticks(double lo, double hi, int target) {
  K3_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && target > 0, "bad tick range [{}, {}]", lo, hi);
  if (hi == lo) {
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  const double first = std::floor(lo / step + 1e-9) * step;
  const double last = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> ticks;
  for (int i = 0; first + i * step <= last + step * 1e-6; ++i) {
    const double t = first + i * step;
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);  // no "-0"
  }
  return ticks;
}

std::string tick_label(double value, double step) {
  if (value == 0) return "0";  // not "0K"
  const double a = std::abs(step);
  const char* suffix = "";
  double scale = 1;
  if (a >= 1e9) {
    suffix = "G";
    scale = 1e9;
  } else if (a >= 1e6) {
    suffix = "M";
    scale = 1e6;
  } else if (a >= 1e3) {
    suffix = "K";
    scale = 1e3;
  }
  // As many decimals as the step needs to be exact (0.25 -> 2, 2.5 -> 1, 20 -> 0).
  const double s = a / scale;
  int decimals = 0;
  for (double m = s; decimals < 9 && std::abs(m - std::round(m)) > 1e-6 * std::max(1.0, m); m *= 10) ++decimals;
  return fmt::format("{:.{}f}{}", value / scale, decimals, suffix);
}

std::vector<double> log_ticks(double lo, double hi, bool with_2_and_5) {
  K3_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo > 0 && lo <= hi, "bad log tick range [{}, {}]", lo, hi);
  std::vector<double> ticks;
  const int first = int(std::floor(std::log10(lo))), last = int(std::ceil(std::log10(hi)));
  for (int k = first; k <= last; ++k) {
    const double decade = std::pow(10.0, k);
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1 && !with_2_and_5) continue;
      const double t = m * decade;
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push_back(t);
    }
  }
  return ticks;
}

std::string log_tick_label(double value) {
  static const std::pair<double, const char*> kSuffixes[] = {{1e18, "E"}, {1e15, "P"}, {1e12, "T"},
                                                             {1e9, "G"},  {1e6, "M"},  {1e3, "K"}};
  for (auto [scale, suffix] : kSuffixes) {
    if (value >= scale * (1 - 1e-9)) return fmt::format("{:.3g}{}", value / scale, suffix);  // < 1000: no exponent
  }
  if (value >= 1) return fmt::format("{:.3g}", value);
  // Below 1: as many decimals as the leading digit needs (0.05 -> 2), never an exponent.
  const int decimals = int(std::ceil(-std::log10(value) - 1e-9));
  return fmt::format("{:.{}f}", value, decimals);
}

const std::vector<std::string>& palette() {
  static const std::vector<std::string> colors = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                                  "#E69F00", "#56B4E9", "#000000", "#F0E442"};
  return colors;
}

std::string series_color(const Chart& chart, std::size_t index) {
  const std::string& own = chart.series.at(index).color;
  return own.empty() ? palette()[index % palette().size()] : own;
}

void write_chart(const Chart& chart, const std::string& path) {
  auto ends_with = [&](const char* ext) {
    const std::string e = ext;
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends_with(".svg")) {
    write_file_atomically(path, to_svg(chart));
  } else if (ends_with(".png")) {
    write_file_atomically(path, to_png(chart));
  } else {
    throw InputError(fmt::format("{}: a plot is written as .svg or .png", path));
  }
}

}  // namespace k3::plot
