// A plot::Chart on screen, drawn by the one painter (plot/painter.h) that writes the CLI's PNG and SVG
// files. Hovering shows the nearest point (series, x, y and the caller's label for it, e.g. a plan
// point's layout); clicking one emits point_clicked; one point can be highlighted (the selection).
#pragma once

#include "plot/chart.h"
#include "plot/painter.h"

#include <QString>
#include <QWidget>

#include <string>
#include <vector>

namespace k3::gui {

class ChartWidget : public QWidget {
  Q_OBJECT

 public:
  explicit ChartWidget(QWidget* parent = nullptr);

  // The chart and, optionally, a label per point: point_labels[series][index] (missing ones are empty).
  void set_chart(plot::Chart chart, std::vector<std::vector<std::string>> point_labels = {});
  // Draws a ring around one point; (-1, -1) clears it.
  void set_highlight(int series, int index);

  const plot::Chart& chart() const { return chart_; }
  // The layout of the last paint (the widget's rectangle), for hit tests and tests.
  const plot::ChartFrame& frame() const { return frame_; }
  // The drawn point nearest to `px` within `max_px` pixels as {series, index}; {-1, -1} if none.
  std::pair<int, int> nearest_point(QPointF px, double max_px = 12) const;
  // What hovering the point shows: "series\nx label: x\ny label: y\nlabel".
  QString point_text(int series, int index) const;

  QSize sizeHint() const override { return {640, 400}; }
  QSize minimumSizeHint() const override { return {320, 220}; }

 signals:
  void point_clicked(int series, int index);

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;  // tool tips
  void mousePressEvent(QMouseEvent* event) override;

 private:
  plot::Chart chart_;
  std::vector<std::vector<std::string>> point_labels_;
  plot::ChartFrame frame_;
  int highlight_series_ = -1, highlight_index_ = -1;
};

}  // namespace k3::gui
