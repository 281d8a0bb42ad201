// The one chart painter: a Chart drawn with QPainter onto any paint device (a widget, a QImage for PNG,
// a QSvgGenerator for SVG), laid out with the device's real font metrics. The CLI's --plot files and the
// GUI's charts both come from here. ChartFrame is the layout: where the data lands, so interactive views
// can hit-test points and draw overlays (selection, hover) in the same coordinates, and where every text
// went, so tests can check that nothing collides.
#pragma once

#include "plot/chart.h"

#include <QPointF>
#include <QRectF>

#include <string>
#include <utility>
#include <vector>

class QPainter;

namespace k3::plot {

// A tick label as drawn: the tick's value, its text and the text's box.
struct TickLabel {
  double value = 0;
  std::string text;
  QRectF rect;
};

class ChartFrame {
 public:
  QRectF area;                                        // the rectangle the chart was laid out in
  QRectF plot_area;                                   // pixels of the data area inside the painted rectangle
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;  // data range shown (log axes: in data units too)
  bool x_log = false, y_log = false;
  std::vector<double> x_ticks, y_ticks;           // grid lines, inside the range
  std::vector<TickLabel> x_labels, y_labels;      // the labelled ticks, thinned out so that no two collide
  QRectF title_rect, x_title_rect, y_title_rect;  // empty when the chart has no such text
  QRectF legend_rect;                             // empty when no series is named
  bool legend_outside = false;                    // no inside corner was free of data: right of or below the plot
  std::vector<QRectF> marker_label_rects;         // one per Chart::markers entry, in order

  QPointF to_px(double x, double y) const;              // data -> pixels (y down)
  std::pair<double, double> to_data(QPointF px) const;  // pixels -> data
  // Whether (x, y) can be drawn on these axes (finite, and positive on a log axis).
  bool drawable(double x, double y) const;
};

// Lays out `chart` inside `area` with `painter`'s font metrics, without drawing.
ChartFrame layout_chart(const Chart& chart, QPainter& painter, const QRectF& area);
// Draws `chart` inside `area` and returns its layout.
ChartFrame paint_chart(const Chart& chart, QPainter& painter, const QRectF& area);

}  // namespace k3::plot
