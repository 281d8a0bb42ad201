// The chart painter (plot/painter.h). Layout first, with the device's font metrics: tick labels are
// measured and thinned out until no two collide, the legend goes to the first inside corner with no
// data under it (else right of or below the plot), marker labels to the free side of their point.
// Painting then only draws what the layout placed.
#include "plot/painter.h"

#include "core/error.h"

#include <QColor>
#include <QFont>
#include <QFontMetricsF>
#include <QImage>
#include <QPaintEngine>
#include <QPainter>
#include <QPen>
#include <QPolygonF>

#include <algorithm>
#include <cmath>
#include <limits>

namespace k3::plot {

namespace {

double fraction(double v, double lo, double hi, bool log) {
  return log ? std::log10(v / lo) / std::log10(hi / lo) : (v - lo) / (hi - lo);
}

double from_fraction(double f, double lo, double hi, bool log) {
  return log ? lo * std::pow(hi / lo, f) : lo + f * (hi - lo);
}

}  // namespace

QPointF ChartFrame::to_px(double x, double y) const {
  return {plot_area.left() + fraction(x, x_min, x_max, x_log) * plot_area.width(),
          plot_area.bottom() - fraction(y, y_min, y_max, y_log) * plot_area.height()};
}

std::pair<double, double> ChartFrame::to_data(QPointF px) const {
  return {from_fraction((px.x() - plot_area.left()) / plot_area.width(), x_min, x_max, x_log),
          from_fraction((plot_area.bottom() - px.y()) / plot_area.height(), y_min, y_max, y_log)};
}

bool ChartFrame::drawable(double x, double y) const {
  return std::isfinite(x) && std::isfinite(y) && (!x_log || x > 0) && (!y_log || y > 0);
}

namespace {

constexpr double kPad = 8;          // around the chart and inside the legend
constexpr double kTickLength = 5;   // tick marks, outside the plot area
constexpr double kGap = 4;          // between a tick mark, its label and the axis title
constexpr double kLabelGap = 6;     // least space between two tick labels
constexpr double kSwatch = 22;      // legend: the line or marker sample
constexpr double kMarkerHalf = 7;   // Chart::markers: half the diamond's diagonal
constexpr double kLegendInset = 6;  // legend: from the plot area's corner

QFont font_px(int pixels, bool bold = false) {
  QFont f("DejaVu Sans");
  f.setPixelSize(pixels);  // 12 px = 9 pt at 96 dpi
  f.setBold(bold);
  return f;
}
QFont tick_font() { return font_px(12); }
QFont axis_title_font() { return font_px(13); }
QFont title_font() { return font_px(15, true); }
QFont legend_font() { return font_px(12); }

QColor color_of(const std::string& hex) {
  const QColor c(QString::fromStdString(hex));
  K3_CHECK(c.isValid(), "plot: '{}' is not a colour (#RRGGBB)", hex);
  return c;
}

struct Extent {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

// One axis before it has pixels: its range, grid ticks and each tick's label.
struct Axis {
  double min = 0, max = 1;
  std::vector<double> ticks;
  std::vector<std::string> labels;
  std::vector<bool> major;  // log axes: the powers of ten, labelled first
};

Axis make_axis(const Extent& data, bool log, const std::optional<AxisRange>& fixed, int target) {
  Axis a;
  if (log) {
    if (fixed) {
      K3_CHECK(fixed->min > 0 && fixed->min < fixed->max, "plot: bad log axis range [{}, {}]", fixed->min, fixed->max);
      a.min = fixed->min;
      a.max = fixed->max;
    } else if (data.empty()) {
      a.min = 1;
      a.max = 10;
    } else {
      // The data's range widened to the nearest 1, 2 or 5 times a power of ten.
      const std::vector<double> steps = log_ticks(data.lo / 10, data.hi * 10, true);
      a.min = *std::prev(std::upper_bound(steps.begin(), steps.end(), data.lo * (1 + 1e-9)));
      a.max = *std::lower_bound(steps.begin(), steps.end(), data.hi * (1 - 1e-9));
      if (a.max <= a.min) a.max = a.min * 10;
    }
    a.ticks = log_ticks(a.min, a.max, a.max / a.min <= 1000 * (1 + 1e-9));
    for (double t : a.ticks) {
      a.labels.push_back(log_tick_label(t));
      a.major.push_back(std::abs(std::log10(t) - std::round(std::log10(t))) < 1e-9);
    }
    return a;
  }
  if (fixed) {
    K3_CHECK(fixed->min < fixed->max, "plot: bad axis range [{}, {}]", fixed->min, fixed->max);
    a.min = fixed->min;
    a.max = fixed->max;
    const double eps = (a.max - a.min) * 1e-9;
    for (double t : nice_ticks(a.min, a.max, target)) {
      if (t >= a.min - eps && t <= a.max + eps) a.ticks.push_back(t);
    }
  } else {
    a.ticks = data.empty() ? nice_ticks(0, 1, target) : nice_ticks(data.lo, data.hi, target);
    a.min = a.ticks.front();
    a.max = a.ticks.back();
  }
  const double step = a.ticks.size() > 1 ? a.ticks[1] - a.ticks[0] : 1;
  for (double t : a.ticks) {
    a.labels.push_back(tick_label(t, step));
    a.major.push_back(true);
  }
  return a;
}

// Which ticks get a label: all when none collide; else on a log axis the powers of ten alone, then every
// k-th of those for the smallest k with no collision.
std::vector<std::size_t> thin_labels(const Axis& a, const std::vector<QRectF>& rects) {
  auto collide = [&](const std::vector<std::size_t>& picked) {
    for (std::size_t i = 1; i < picked.size(); ++i) {
      const QRectF grown = rects[picked[i - 1]].adjusted(-kLabelGap, -1, kLabelGap, 1);
      if (grown.intersects(rects[picked[i]])) return true;
    }
    return false;
  };
  std::vector<std::size_t> all, majors;
  for (std::size_t i = 0; i < a.ticks.size(); ++i) {
    all.push_back(i);
    if (a.major[i]) majors.push_back(i);
  }
  if (!collide(all)) return all;
  const std::vector<std::size_t>& base = majors.size() >= 2 ? majors : all;
  for (std::size_t k = 1; k < base.size(); ++k) {
    std::vector<std::size_t> picked;
    for (std::size_t i = 0; i < base.size(); i += k) picked.push_back(base[i]);
    if (!collide(picked)) return picked;
  }
  return {base.front()};
}

// Lays out the axes, ticks and titles, leaving `reserve_right` and `reserve_bottom` pixels for an outside legend.
ChartFrame place_axes(const Chart& c, QPainter& painter, const QRectF& area, double reserve_right,
                      double reserve_bottom) {
  ChartFrame f;
  f.area = area;
  f.x_log = c.x_log;
  f.y_log = c.y_log;
  Extent xe, ye;
  auto add = [&](double x, double y) {
    if (!f.drawable(x, y)) return;
    xe.add(x);
    ye.add(y);
  };
  for (const Series& s : c.series) {
    for (auto [x, y] : s.points) add(x, y);
  }
  for (const Marker& m : c.markers) add(m.x, m.y);

  const QFontMetricsF tick_fm(tick_font(), painter.device()), axis_fm(axis_title_font(), painter.device()),
      title_fm(title_font(), painter.device());
  // The top y tick label reaches half its height above the plot.
  const double top = area.top() + kPad + (c.title.empty() ? 0 : title_fm.height() + kGap) + tick_fm.height() / 2;
  const double bottom_margin =
      kPad + reserve_bottom + (c.x_label.empty() ? 0 : axis_fm.height() + kGap) + tick_fm.height() + kTickLength + kGap;
  const double left_margin = kPad + (c.y_label.empty() ? 0 : axis_fm.height() + kGap) + kTickLength + kGap;
  // The tick labels' sizes depend on the ticks, whose number depends on the plot's size: twice is enough.
  double y_label_width = tick_fm.horizontalAdvance("0000"), x_label_half = 0;
  Axis xa, ya;
  QRectF plot;
  for (int pass = 0; pass < 3; ++pass) {
    const double right = area.right() - std::max(kPad, x_label_half) - reserve_right;
    plot =
        QRectF(QPointF(area.left() + left_margin + y_label_width, top), QPointF(right, area.bottom() - bottom_margin));
    if (plot.width() < 1) plot.setWidth(1);
    if (plot.height() < 1) plot.setHeight(1);
    if (pass == 2) break;
    xa = make_axis(xe, c.x_log, c.x_range, std::max(2, int(plot.width() / 90)));
    ya = make_axis(ye, c.y_log, c.y_range, std::max(2, int(plot.height() / 50)));
    y_label_width = 0;
    for (const std::string& l : ya.labels) {
      y_label_width = std::max(y_label_width, tick_fm.horizontalAdvance(QString::fromStdString(l)));
    }
    x_label_half = tick_fm.horizontalAdvance(QString::fromStdString(xa.labels.back())) / 2 + 2;
  }
  f.plot_area = plot;
  f.x_min = xa.min;
  f.x_max = xa.max;
  f.y_min = ya.min;
  f.y_max = ya.max;
  f.x_ticks = xa.ticks;
  f.y_ticks = ya.ticks;

  std::vector<QRectF> x_rects, y_rects;
  for (std::size_t i = 0; i < xa.ticks.size(); ++i) {
    const double w = tick_fm.horizontalAdvance(QString::fromStdString(xa.labels[i]));
    const double px = f.to_px(xa.ticks[i], ya.min).x();
    x_rects.emplace_back(px - w / 2, plot.bottom() + kTickLength + kGap / 2, w, tick_fm.height());
  }
  for (std::size_t i = 0; i < ya.ticks.size(); ++i) {
    const double w = tick_fm.horizontalAdvance(QString::fromStdString(ya.labels[i]));
    const double py = f.to_px(xa.min, ya.ticks[i]).y();
    y_rects.emplace_back(plot.left() - kTickLength - kGap / 2 - w, py - tick_fm.height() / 2, w, tick_fm.height());
  }
  for (std::size_t i : thin_labels(xa, x_rects)) f.x_labels.push_back({xa.ticks[i], xa.labels[i], x_rects[i]});
  for (std::size_t i : thin_labels(ya, y_rects)) f.y_labels.push_back({ya.ticks[i], ya.labels[i], y_rects[i]});

  if (!c.title.empty()) {
    const double w = std::min(title_fm.horizontalAdvance(QString::fromStdString(c.title)), area.width() - 2 * kPad);
    f.title_rect = QRectF(area.center().x() - w / 2, area.top() + kPad, w, title_fm.height());
  }
  if (!c.x_label.empty()) {
    const double w = std::min(axis_fm.horizontalAdvance(QString::fromStdString(c.x_label)), area.width() - 2 * kPad);
    const double y = plot.bottom() + kTickLength + kGap + tick_fm.height() + kGap;
    f.x_title_rect = QRectF(plot.center().x() - w / 2, y, w, axis_fm.height());
  }
  if (!c.y_label.empty()) {
    // Drawn rotated a quarter turn counter-clockwise: this is the box it covers.
    const double h = std::min(axis_fm.horizontalAdvance(QString::fromStdString(c.y_label)), plot.height());
    f.y_title_rect = QRectF(area.left() + kPad, plot.center().y() - h / 2, axis_fm.height(), h);
  }
  return f;
}

// Whether segment a-b passes through rectangle r (Liang-Barsky clipping).
bool segment_hits(QPointF a, QPointF b, const QRectF& r) {
  double t0 = 0, t1 = 1;
  const double dx = b.x() - a.x(), dy = b.y() - a.y();
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {a.x() - r.left(), r.right() - a.x(), a.y() - r.top(), r.bottom() - a.y()};
  for (int i = 0; i < 4; ++i) {
    if (p[i] == 0) {
      if (q[i] < 0) return false;
    } else {
      const double t = q[i] / p[i];
      if (p[i] < 0) {
        t0 = std::max(t0, t);
      } else {
        t1 = std::min(t1, t);
      }
      if (t0 > t1) return false;
    }
  }
  return true;
}

// How many data points and line segments of the chart fall in `r`, stopping at `enough`.
int data_under(const Chart& c, const ChartFrame& f, const QRectF& r, int enough) {
  int hits = 0;
  for (const Series& s : c.series) {
    const double radius = s.style == SeriesStyle::line ? 1 : s.marker_radius_px;
    const QRectF grown = r.adjusted(-radius, -radius, radius, radius);
    bool have_previous = false;
    QPointF previous;
    for (auto [x, y] : s.points) {
      if (!f.drawable(x, y)) {
        have_previous = false;
        continue;
      }
      const QPointF px = f.to_px(x, y);
      if (grown.contains(px) || (s.style != SeriesStyle::scatter && have_previous && segment_hits(previous, px, r))) {
        if (++hits >= enough) return hits;
      }
      previous = px;
      have_previous = true;
    }
  }
  return hits;
}

QRectF marker_symbol_rect(const ChartFrame& f, const Marker& m) {
  const QPointF p = f.to_px(m.x, m.y);
  return QRectF(p.x() - kMarkerHalf, p.y() - kMarkerHalf, 2 * kMarkerHalf, 2 * kMarkerHalf);
}

std::vector<std::size_t> legend_rows(const Chart& c) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < c.series.size(); ++i) {
    if (!c.series[i].name.empty()) rows.push_back(i);
  }
  return rows;
}

double legend_row_height(const QFontMetricsF& fm) { return fm.height() + 4; }

QSizeF legend_size(const Chart& c, const QFontMetricsF& fm, const QRectF& area) {
  double text_width = 0;
  const std::vector<std::size_t> rows = legend_rows(c);
  for (std::size_t i : rows) {
    text_width = std::max(text_width, fm.horizontalAdvance(QString::fromStdString(c.series[i].name)));
  }
  const double width = std::min(kPad + kSwatch + kGap + text_width + kPad, area.width() - 2 * kPad);
  return {width, legend_row_height(fm) * double(rows.size()) + kPad};
}

void place_legend(const Chart& c, QPainter& painter, ChartFrame& f) {
  if (legend_rows(c).empty()) return;
  const QSizeF size = legend_size(c, QFontMetricsF(legend_font(), painter.device()), f.area);
  const QRectF& p = f.plot_area;
  if (size.width() + 2 * kLegendInset <= p.width() && size.height() + 2 * kLegendInset <= p.height()) {
    const double left = p.left() + kLegendInset, right = p.right() - kLegendInset - size.width();
    const double top = p.top() + kLegendInset, bottom = p.bottom() - kLegendInset - size.height();
    const QPointF corners[] = {{right, top}, {left, top}, {right, bottom}, {left, bottom}};
    for (QPointF corner : corners) {
      const QRectF r(corner, size);
      bool covers_marker = false;
      for (const Marker& m : c.markers) {
        covers_marker = covers_marker || (f.drawable(m.x, m.y) && marker_symbol_rect(f, m).intersects(r));
      }
      if (!covers_marker && data_under(c, f, r, 1) == 0) {
        f.legend_rect = r;
        return;
      }
    }
  }
  // No free corner: right of the plot when the legend is narrow, else below the x axis title.
  if (size.width() <= 0.3 * f.area.width()) {
    f = place_axes(c, painter, f.area, size.width() + kPad, 0);
    f.legend_rect = QRectF(QPointF(f.area.right() - kPad - size.width(), f.plot_area.top()), size);
  } else {
    f = place_axes(c, painter, f.area, 0, size.height() + kGap);
    f.legend_rect =
        QRectF(QPointF(f.area.center().x() - size.width() / 2, f.area.bottom() - kPad - size.height()), size);
  }
  f.legend_outside = true;
}

// Each marker's label goes to whichever of eight places around its point covers least: nothing placed
// before it, the legend, other markers and their drop lines, then as few data points and lines as
// possible, inside the plot.
void place_marker_labels(const Chart& c, QPainter& painter, ChartFrame& f) {
  const QFontMetricsF fm(legend_font(), painter.device());
  for (const Marker& m : c.markers) {
    if (!f.drawable(m.x, m.y)) {
      f.marker_label_rects.emplace_back();
      continue;
    }
    const QPointF p = f.to_px(m.x, m.y);
    const double w = fm.horizontalAdvance(QString::fromStdString(m.label)) + 4, h = fm.height();
    const double d = kMarkerHalf + 3;
    const QRectF candidates[] = {{p.x() + d, p.y() - d - h, w, h},
                                 {p.x() - d - w, p.y() - d - h, w, h},
                                 {p.x() + d, p.y() + d, w, h},
                                 {p.x() - d - w, p.y() + d, w, h},
                                 {p.x() + d + 2, p.y() - h / 2, w, h},
                                 {p.x() - d - 2 - w, p.y() - h / 2, w, h},
                                 {p.x() - w / 2, p.y() - d - 2 - h, w, h},
                                 {p.x() - w / 2, p.y() + d + 2, w, h}};
    QRectF best;
    double best_cost = std::numeric_limits<double>::infinity();
    for (const QRectF& r : candidates) {
      double cost = 0;
      if (!f.area.contains(r)) cost += 1e6;
      if (!f.plot_area.contains(r)) cost += 100;
      if (!f.legend_rect.isEmpty() && f.legend_rect.intersects(r)) cost += 1e5;
      for (const QRectF& placed : f.marker_label_rects) cost += placed.intersects(r) ? 1e5 : 0;
      for (const Marker& other : c.markers) {
        if (!f.drawable(other.x, other.y)) continue;
        if (&other != &m && marker_symbol_rect(f, other).intersects(r)) cost += 1e4;
        const QPointF o = f.to_px(other.x, other.y);
        if (segment_hits(o, QPointF(o.x(), f.plot_area.bottom()), r)) cost += 1e3;  // its drop line
      }
      if (cost >= best_cost) continue;
      cost += data_under(c, f, r, 50);
      if (cost < best_cost) {
        best_cost = cost;
        best = r;
      }
    }
    f.marker_label_rects.push_back(best);
  }
}

// A series' markers. On pixels (a QImage, a widget) each is a copy of one antialiased dot: 10^4 of
// them take about 2 ms, where as many drawEllipse calls take 200 ms. Vector devices (SVG) get ellipses.
void draw_dots(const Series& s, const ChartFrame& f, const QColor& color, QPainter& painter) {
  const double r = s.marker_radius_px;
  const QPaintEngine* engine = painter.paintEngine();
  if (engine && engine->type() == QPaintEngine::Raster) {
    const double ratio = painter.device()->devicePixelRatioF();
    const int side_px = int(std::ceil(2 * r + 2));
    QImage dot(int(std::ceil(side_px * ratio)), int(std::ceil(side_px * ratio)), QImage::Format_ARGB32_Premultiplied);
    dot.setDevicePixelRatio(ratio);
    dot.fill(Qt::transparent);
    {
      QPainter dp(&dot);
      dp.setRenderHint(QPainter::Antialiasing, true);
      dp.setPen(Qt::NoPen);
      dp.setBrush(color);
      dp.drawEllipse(QPointF(side_px / 2.0, side_px / 2.0), r, r);
    }
    for (auto [x, y] : s.points) {
      if (f.drawable(x, y)) painter.drawImage(f.to_px(x, y) - QPointF(side_px / 2.0, side_px / 2.0), dot);
    }
    return;
  }
  painter.setPen(Qt::NoPen);
  painter.setBrush(color);
  for (auto [x, y] : s.points) {
    if (f.drawable(x, y)) painter.drawEllipse(f.to_px(x, y), r, r);
  }
}

void draw_series(const Chart& c, const ChartFrame& f, QPainter& painter) {
  for (std::size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    const QColor color = color_of(series_color(c, i));
    if (s.style != SeriesStyle::scatter) {
      QPen pen(color, 2, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin);
      painter.setPen(pen);
      painter.setBrush(Qt::NoBrush);
      QPolygonF run;  // a line breaks where a point cannot be drawn
      for (auto [x, y] : s.points) {
        if (f.drawable(x, y)) {
          run << f.to_px(x, y);
          continue;
        }
        if (run.size() > 1) painter.drawPolyline(run);
        run.clear();
      }
      if (run.size() > 1) painter.drawPolyline(run);
    }
    if (s.style != SeriesStyle::line) {
      draw_dots(s, f, color, painter);
    }
  }
}

void draw_legend(const Chart& c, const ChartFrame& f, QPainter& painter) {
  if (f.legend_rect.isEmpty()) return;
  painter.setPen(QPen(QColor("#999999"), 1));
  painter.setBrush(QColor(255, 255, 255, 235));
  painter.drawRect(f.legend_rect);
  const QFont font = legend_font();
  const QFontMetricsF fm(font, painter.device());
  painter.setFont(font);
  const double row = legend_row_height(fm);
  const std::vector<std::size_t> rows = legend_rows(c);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const Series& s = c.series[rows[k]];
    const QColor color = color_of(series_color(c, rows[k]));
    const double y = f.legend_rect.top() + kPad / 2 + row * (double(k) + 0.5);
    const double x0 = f.legend_rect.left() + kPad;
    if (s.style != SeriesStyle::scatter) {
      painter.setPen(QPen(color, 2, Qt::SolidLine, Qt::RoundCap));
      painter.drawLine(QPointF(x0, y), QPointF(x0 + kSwatch, y));
    }
    if (s.style != SeriesStyle::line) {
      painter.setPen(Qt::NoPen);
      painter.setBrush(color);
      painter.drawEllipse(QPointF(x0 + kSwatch / 2, y), s.marker_radius_px, s.marker_radius_px);
    }
    painter.setPen(QColor("#222222"));
    const QRectF text(x0 + kSwatch + kGap, y - row / 2, f.legend_rect.right() - kPad - (x0 + kSwatch + kGap), row);
    painter.drawText(text, Qt::AlignLeft | Qt::AlignVCenter,
                     fm.elidedText(QString::fromStdString(s.name), Qt::ElideRight, text.width()));
  }
}

void draw_markers(const Chart& c, const ChartFrame& f, QPainter& painter) {
  const QFont font = legend_font();
  painter.setFont(font);
  for (std::size_t i = 0; i < c.markers.size(); ++i) {
    const Marker& m = c.markers[i];
    if (!f.drawable(m.x, m.y)) continue;
    const QPointF p = f.to_px(m.x, m.y);
    const QPolygonF diamond({{p.x(), p.y() - kMarkerHalf},
                             {p.x() + kMarkerHalf, p.y()},
                             {p.x(), p.y() + kMarkerHalf},
                             {p.x() - kMarkerHalf, p.y()}});
    // A dashed drop line reads the point's x off the axis.
    painter.setPen(QPen(QColor("#555555"), 1, Qt::DashLine));
    painter.drawLine(QPointF(p.x(), p.y() + kMarkerHalf), QPointF(p.x(), f.plot_area.bottom()));
    painter.setPen(QPen(QColor("#FFFFFF"), 1.5));
    painter.setBrush(QColor("#000000"));
    painter.drawPolygon(diamond);
    if (m.label.empty()) continue;
    const QRectF& r = f.marker_label_rects[i];
    painter.setPen(Qt::NoPen);
    painter.setBrush(QColor(255, 255, 255, 220));
    painter.drawRect(r);
    painter.setPen(QColor("#000000"));
    painter.drawText(r, Qt::AlignCenter, QString::fromStdString(m.label));
  }
}

void draw_axes(const Chart& c, const ChartFrame& f, QPainter& painter) {
  const QRectF& p = f.plot_area;
  // Grid: powers of ten (and every linear tick) darker than the 2s and 5s of a log axis.
  auto grid_pen = [](bool major) { return QPen(QColor(major ? "#DDDDDD" : "#EEEEEE"), 1); };
  auto is_major = [](double t, bool log) { return !log || std::abs(std::log10(t) - std::round(std::log10(t))) < 1e-9; };
  for (double t : f.x_ticks) {
    const double x = f.to_px(t, f.y_min).x();
    painter.setPen(grid_pen(is_major(t, f.x_log)));
    painter.drawLine(QPointF(x, p.top()), QPointF(x, p.bottom()));
    painter.setPen(QPen(QColor("#333333"), 1));
    painter.drawLine(QPointF(x, p.bottom()), QPointF(x, p.bottom() + kTickLength));
  }
  for (double t : f.y_ticks) {
    const double y = f.to_px(f.x_min, t).y();
    painter.setPen(grid_pen(is_major(t, f.y_log)));
    painter.drawLine(QPointF(p.left(), y), QPointF(p.right(), y));
    painter.setPen(QPen(QColor("#333333"), 1));
    painter.drawLine(QPointF(p.left() - kTickLength, y), QPointF(p.left(), y));
  }
  painter.setPen(QPen(QColor("#333333"), 1.5));
  painter.drawLine(p.bottomLeft(), p.bottomRight());
  painter.drawLine(p.bottomLeft(), p.topLeft());

  painter.setPen(QColor("#222222"));
  painter.setFont(tick_font());
  for (const TickLabel& l : f.x_labels) painter.drawText(l.rect, Qt::AlignCenter, QString::fromStdString(l.text));
  for (const TickLabel& l : f.y_labels) {
    painter.drawText(l.rect, Qt::AlignRight | Qt::AlignVCenter, QString::fromStdString(l.text));
  }
  auto draw_elided = [&](const QFont& font, const QRectF& r, const std::string& text) {
    painter.setFont(font);
    const QString elided =
        QFontMetricsF(font, painter.device()).elidedText(QString::fromStdString(text), Qt::ElideMiddle, r.width() + 1);
    painter.drawText(r, Qt::AlignCenter, elided);
  };
  if (!c.title.empty()) draw_elided(title_font(), f.title_rect, c.title);
  if (!c.x_label.empty()) draw_elided(axis_title_font(), f.x_title_rect, c.x_label);
  if (!c.y_label.empty()) {
    const QRectF& r = f.y_title_rect;
    painter.save();
    painter.translate(r.center());
    painter.rotate(-90);
    draw_elided(axis_title_font(), QRectF(-r.height() / 2, -r.width() / 2, r.height(), r.width()), c.y_label);
    painter.restore();
  }
}

}  // namespace

ChartFrame layout_chart(const Chart& chart, QPainter& painter, const QRectF& area) {
  K3_CHECK(painter.isActive(), "plot: the painter is not active");
  ChartFrame f = place_axes(chart, painter, area, 0, 0);
  place_legend(chart, painter, f);
  place_marker_labels(chart, painter, f);
  return f;
}

ChartFrame paint_chart(const Chart& chart, QPainter& painter, const QRectF& area) {
  const ChartFrame f = layout_chart(chart, painter, area);
  painter.save();
  painter.setRenderHint(QPainter::Antialiasing, true);
  painter.setRenderHint(QPainter::TextAntialiasing, true);
  painter.fillRect(area, QColor("#FFFFFF"));
  draw_axes(chart, f, painter);
  painter.save();
  // Markers on the range's edge are drawn whole; data beyond a fixed range is cut.
  painter.setClipRect(f.plot_area.adjusted(-kMarkerHalf, -kMarkerHalf, kMarkerHalf, kMarkerHalf));
  draw_series(chart, f, painter);
  painter.restore();
  draw_legend(chart, f, painter);
  draw_markers(chart, f, painter);
  painter.restore();
  return f;
}

}  // namespace k3::plot
