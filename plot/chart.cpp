#include "plot/chart.h"

#include "core/atomic_file.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

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
    suffix = "k";
    scale = 1e3;
  }
  // As many decimals as the step needs to be exact (0.25 -> 2, 2.5 -> 1, 20 -> 0).
  const double s = a / scale;
  int decimals = 0;
  for (double m = s; decimals < 9 && std::abs(m - std::round(m)) > 1e-6 * std::max(1.0, m); m *= 10) ++decimals;
  return fmt::format("{:.{}f}{}", value / scale, decimals, suffix);
}

const std::vector<std::string>& palette() {
  static const std::vector<std::string> colors = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                                  "#E69F00", "#56B4E9", "#000000", "#F0E442"};
  return colors;
}

Scene layout(const Chart& c) {
  K3_CHECK(c.width_px >= 200 && c.height_px >= 150, "chart of {}x{} px is too small", c.width_px, c.height_px);
  Scene s;
  s.width_px = c.width_px;
  s.height_px = c.height_px;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const Series& ser : c.series) {
    for (auto [x, y] : ser.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  }
  if (!(x_lo <= x_hi)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  const std::vector<double> xt = nice_ticks(x_lo, x_hi, 6), yt = nice_ticks(y_lo, y_hi, 5);
  s.x_min = xt.front();
  s.x_max = xt.back();
  s.y_min = yt.front();
  s.y_max = yt.back();
  s.left = 78;
  s.right = c.width_px - 24;
  s.top = c.title.empty() ? 20 : 44;
  s.bottom = c.height_px - 56;

  const std::string axis = "#000000", grid = "#DDDDDD";
  const double x_step = xt.size() > 1 ? xt[1] - xt[0] : 1, y_step = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double t : xt) {
    const double px = s.to_px_x(t);
    s.lines.push_back({px, s.top, px, s.bottom, grid, 1});
    s.lines.push_back({px, s.bottom, px, s.bottom + 5, axis, 1});
    s.texts.push_back({px, s.bottom + 20, tick_label(t, x_step), Scene::Anchor::middle, 12, false, false});
  }
  for (double t : yt) {
    const double py = s.to_px_y(t);
    s.lines.push_back({s.left, py, s.right, py, grid, 1});
    s.lines.push_back({s.left - 5, py, s.left, py, axis, 1});
    s.texts.push_back({s.left - 8, py + 4, tick_label(t, y_step), Scene::Anchor::end, 12, false, false});
  }
  s.lines.push_back({s.left, s.bottom, s.right, s.bottom, axis, 1.5});
  s.lines.push_back({s.left, s.top, s.left, s.bottom, axis, 1.5});
  if (!c.title.empty()) {
    s.texts.push_back({(s.left + s.right) / 2, 26, c.title, Scene::Anchor::middle, 16, false, true});
  }
  s.texts.push_back(
      {(s.left + s.right) / 2, double(c.height_px) - 14, c.x_label, Scene::Anchor::middle, 13, false, false});
  s.texts.push_back({20, (s.top + s.bottom) / 2, c.y_label, Scene::Anchor::middle, 13, true, false});

  for (std::size_t i = 0; i < c.series.size(); ++i) {
    const Series& ser = c.series[i];
    const std::string& color = palette()[i % palette().size()];
    Scene::Polyline line{{}, color, 2};
    for (auto [x, y] : ser.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      const double px = s.to_px_x(x), py = s.to_px_y(y);
      if (ser.style != SeriesStyle::scatter) line.points.emplace_back(px, py);
      if (ser.style != SeriesStyle::line) s.markers.push_back({px, py, 3.5, color});
    }
    if (line.points.size() > 1) s.polylines.push_back(std::move(line));
  }

  // Legend, top right inside the plot area, on a white box.
  std::vector<std::size_t> named;
  std::size_t longest = 0;
  for (std::size_t i = 0; i < c.series.size(); ++i) {
    if (c.series[i].name.empty()) continue;
    named.push_back(i);
    longest = std::max(longest, c.series[i].name.size());
  }
  if (!named.empty()) {
    const double row = 18, width = 36 + 7.0 * double(longest), x0 = s.right - width - 8, y0 = s.top + 8;
    const double height = row * double(named.size()) + 8;
    s.polylines.push_back(
        {{{x0, y0}, {x0 + width, y0}, {x0 + width, y0 + height}, {x0, y0 + height}, {x0, y0}}, "#999999", 1});
    for (std::size_t k = 0; k < named.size(); ++k) {
      const Series& ser = c.series[named[k]];
      const std::string& color = palette()[named[k] % palette().size()];
      const double y = y0 + 4 + row * (double(k) + 0.5);
      if (ser.style != SeriesStyle::scatter) s.lines.push_back({x0 + 6, y, x0 + 24, y, color, 2});
      if (ser.style != SeriesStyle::line) s.markers.push_back({x0 + 15, y, 3.5, color});
      s.texts.push_back({x0 + 30, y + 4, ser.name, Scene::Anchor::start, 12, false, false});
    }
  }
  return s;
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
