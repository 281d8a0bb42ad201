// The selected op's instance durations as a strip: one tick per instance on a linear duration axis, the
// min–p90 band, the median, the outlier fences, outliers in red; its figures as text above.
#pragma once

#include "gui/model/timeline_stats.h"

#include <QWidget>

namespace k3::gui {

class TimelineDistribution : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineDistribution(QWidget* parent = nullptr);
  void set_distribution(OpDistribution d);
  const OpDistribution& distribution() const { return d_; }
  QSize sizeHint() const override { return {360, 150}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  OpDistribution d_;
};

}  // namespace k3::gui
