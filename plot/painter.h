// The one chart painter: a Chart drawn with QPainter onto any paint device (a widget, a QImage for PNG,
// a QSvgGenerator for SVG), laid out with the device's real font metrics. The CLI's --plot files and the
// GUI's charts both come from here. ChartFrame is the layout: where the data lands, so interactive views
// can hit-test points and draw overlays (selection, hover) in the same coordinates.
#pragma once

#include "plot/chart.h"

#include <QPointF>
#include <QRectF>

#include <utility>

class QPainter;

namespace k3::plot {

class ChartFrame {
 public:
  QRectF plot_area;                                   // pixels of the data area inside the painted rectangle
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;  // data range shown (log axes: in data units too)
  bool x_log = false, y_log = false;

  QPointF to_px(double x, double y) const;              // data -> pixels (y down)
  std::pair<double, double> to_data(QPointF px) const;  // pixels -> data
};

// Lays out `chart` inside `area` with `painter`'s font metrics, without drawing.
ChartFrame layout_chart(const Chart& chart, QPainter& painter, const QRectF& area);
// Draws `chart` inside `area` and returns its layout.
ChartFrame paint_chart(const Chart& chart, QPainter& painter, const QRectF& area);

}  // namespace k3::plot
