// The Roofline tab: the hardware's HBM and compute roofs on log-log axes (FLOP/B against FLOP/s), every
// GPU op of the prediction at its intensity and predicted rate, coloured by bound, and when a comparison
// is loaded its measured rate too, joined to the prediction by a line. Drawn by the one chart painter
// (plot/painter.h); its ChartFrame places the overlays (joins, selection) and hit-tests hover and click.
// Hover shows the op; a click selects it everywhere; the selected op is ringed.
#pragma once

#include "gui/model/roofline_data.h"
#include "plot/painter.h"

#include <QWidget>

#include <string>

namespace k3::gui {

class Document;

class RooflineView : public QWidget {
  Q_OBJECT

 public:
  RooflineView(Document* document, QWidget* parent = nullptr);

  // For tests: what is drawn and where (valid after a paint).
  int point_count() const { return static_cast<int>(data_.points.size()); }
  QString caption() const { return caption_; }
  QPointF point_px(const std::string& op_name) const;
  QString hover_text_at(QPointF px) const;
  static QColor bound_color(const std::string& bound);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;

 private:
  void rebuild();
  // The point nearest to `px` within a few pixels, predicted or measured; -1 when none.
  int nearest_point(QPointF px) const;
  QRectF chart_rect() const;

  Document* document_;
  RooflineData data_;
  plot::Chart chart_;
  plot::ChartFrame frame_;
  QString caption_;
  bool has_data_ = false;
};

}  // namespace k3::gui
