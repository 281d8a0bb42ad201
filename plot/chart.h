// A chart as data: line and scatter series of (x, y) doubles, labelled points, axis titles and
// scales (linear or log). Qt-free, so that simulators' chart builders (plot/views/) need no Qt; the
// one painter (plot/painter.h) draws it, onto a widget or into the PNG and SVG files written here.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace k3::plot {

enum class SeriesStyle { line, scatter, line_and_markers };

struct Series {
  Series(std::string series_name = {}, std::vector<std::pair<double, double>> series_points = {},
         SeriesStyle series_style = SeriesStyle::line)
      : name(std::move(series_name)), points(std::move(series_points)), style(series_style) {}

  std::string name;  // legend entry; empty = not in the legend
  std::vector<std::pair<double, double>> points;
  SeriesStyle style = SeriesStyle::line;
  std::string color;              // "#RRGGBB"; empty = palette()[index of the series]
  double marker_radius_px = 3.5;  // scatter and line_and_markers
};

// A labelled point (a break-even crossing, an operating point): a distinct symbol and its label.
struct Marker {
  double x = 0, y = 0;
  std::string label;
};

struct AxisRange {
  double min = 0, max = 1;
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  std::vector<Marker> markers;
  bool x_log = false, y_log = false;          // log10 axes; non-positive values are not drawn there
  std::optional<AxisRange> x_range, y_range;  // fixed ranges; otherwise the data's, widened to ticks
  int width_px = 800;
  int height_px = 500;
};

// Tick positions covering [lo, hi] at 1, 2 or 5 times a power of ten, about `target` of them;
// the first tick is <= lo and the last >= hi.
std::vector<double> nice_ticks(double lo, double hi, int target);
// "0.5", "12", "1.5K", "2M": short tick labels of a linear axis with ticks `step` apart.
std::string tick_label(double value, double step);
// Ticks of a log axis over [lo, hi] (lo > 0): the powers of ten inside it, and 2 and 5 times them when
// `with_2_and_5` (short ranges).
std::vector<double> log_ticks(double lo, double hi, bool with_2_and_5);
// "0.01", "1", "20", "1K", "50K", "1M", "1G", "1T": a log tick's label, never an exponent.
std::string log_tick_label(double value);

// The series colours, in order (Okabe-Ito, safe for colour-blind readers); they repeat after the last.
const std::vector<std::string>& palette();
// The colour series `index` is drawn in.
std::string series_color(const Chart& chart, std::size_t index);

// SVG text and PNG bytes of the chart at its size (need Qt 6: InputError in a build without it).
std::string to_svg(const Chart& chart);
std::string to_png(const Chart& chart);
// Writes `path` atomically as SVG or PNG, chosen by its extension (.svg, .png); InputError otherwise.
void write_chart(const Chart& chart, const std::string& path);

}  // namespace k3::plot
