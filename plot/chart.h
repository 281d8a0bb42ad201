// A tiny chart library: line and scatter charts of (x, y) doubles with axes, ticks, labels and a
// legend, written as SVG (text, by hand) or PNG (Qt 6 QPainter on a QImage, offscreen; no display).
// Both writers draw the same Scene, laid out once in pixels by layout(), so they agree.
// Knows nothing of the simulator: it takes series of numbers and names.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace k3::plot {

enum class SeriesStyle { line, scatter, line_and_markers };

struct Series {
  std::string name;  // legend entry; empty = not in the legend
  std::vector<std::pair<double, double>> points;
  SeriesStyle style = SeriesStyle::line;
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  int width_px = 800;
  int height_px = 500;
};

// Tick positions covering [lo, hi] at 1, 2 or 5 times a power of ten, about `target` of them;
// the first tick is <= lo and the last >= hi.
std::vector<double> nice_ticks(double lo, double hi, int target);
// "0.5", "12", "1.5k", "2M": short tick labels.
std::string tick_label(double value, double step);

// What a chart draws, in pixels (y down), before it becomes SVG or PNG.
struct Scene {
  struct Line {
    double x1, y1, x2, y2;
    std::string color;
    double width;
  };
  struct Polyline {
    std::vector<std::pair<double, double>> points;
    std::string color;
    double width;
  };
  struct Marker {
    double x, y, radius;
    std::string color;
  };
  enum class Anchor { start, middle, end };
  struct Text {
    double x, y;  // baseline point
    std::string text;
    Anchor anchor;
    double size_px;
    bool vertical;  // rotated 90° counter-clockwise about (x, y)
    bool bold;
  };
  int width_px = 0, height_px = 0;
  std::vector<Line> lines;
  std::vector<Polyline> polylines;
  std::vector<Marker> markers;
  std::vector<Text> texts;
  // The plot area and the data range it maps, for callers that need to place things.
  double left = 0, top = 0, right = 0, bottom = 0;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  double to_px_x(double x) const { return left + (x - x_min) / (x_max - x_min) * (right - left); }
  double to_px_y(double y) const { return bottom - (y - y_min) / (y_max - y_min) * (bottom - top); }
};

// Lays the chart out. Non-finite points are skipped; an empty chart gets axes over [0, 1].
Scene layout(const Chart& chart);
// The series colours, in order (Okabe-Ito, safe for colour-blind readers); they repeat after the last.
const std::vector<std::string>& palette();

std::string to_svg(const Chart& chart);
// PNG bytes (needs Qt 6 Gui; false from png_supported() when the library was built without it).
std::string to_png(const Chart& chart);
bool png_supported();
// Writes `path` atomically as SVG or PNG, chosen by its extension (.svg, .png); InputError otherwise.
void write_chart(const Chart& chart, const std::string& path);

}  // namespace k3::plot
