#include "gui/views/chart_widget.h"

#include <QHelpEvent>
#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <cmath>

namespace k3::gui {

namespace {

// 1234567 -> "1,234,567", 12.345 -> "12.35", 0.01234 -> "0.0123": a hovered value, in full.
QString readable(double v) {
  const QLocale english(QLocale::English);
  if (std::abs(v) >= 1000) return english.toString(v, 'f', 0);
  if (std::abs(v) >= 1 || v == 0) return english.toString(v, 'f', 2);
  return english.toString(v, 'g', 3);
}

}  // namespace

ChartWidget::ChartWidget(QWidget* parent) : QWidget(parent) {
  setAttribute(Qt::WA_OpaquePaintEvent);
  setMouseTracking(true);
}

void ChartWidget::set_chart(plot::Chart chart, std::vector<std::vector<std::string>> point_labels) {
  chart_ = std::move(chart);
  point_labels_ = std::move(point_labels);
  highlight_series_ = highlight_index_ = -1;
  update();
}

void ChartWidget::set_highlight(int series, int index) {
  highlight_series_ = series;
  highlight_index_ = index;
  update();
}

void ChartWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  frame_ = plot::paint_chart(chart_, painter, QRectF(rect()));
  if (highlight_series_ < 0 || highlight_series_ >= int(chart_.series.size())) return;
  const auto& points = chart_.series[std::size_t(highlight_series_)].points;
  if (highlight_index_ < 0 || highlight_index_ >= int(points.size())) return;
  const auto [x, y] = points[std::size_t(highlight_index_)];
  if (!frame_.drawable(x, y)) return;
  painter.setRenderHint(QPainter::Antialiasing, true);
  painter.setPen(QPen(QColor("#000000"), 2));
  painter.setBrush(Qt::NoBrush);
  painter.drawEllipse(frame_.to_px(x, y), 8, 8);
}

std::pair<int, int> ChartWidget::nearest_point(QPointF px, double max_px) const {
  std::pair<int, int> best{-1, -1};
  double best_d2 = max_px * max_px;
  for (std::size_t s = 0; s < chart_.series.size(); ++s) {
    const auto& points = chart_.series[s].points;
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (!frame_.drawable(points[i].first, points[i].second)) continue;
      const QPointF d = frame_.to_px(points[i].first, points[i].second) - px;
      const double d2 = d.x() * d.x() + d.y() * d.y();
      if (d2 <= best_d2) {
        best_d2 = d2;
        best = {int(s), int(i)};
      }
    }
  }
  return best;
}

QString ChartWidget::point_text(int series, int index) const {
  const plot::Series& s = chart_.series.at(std::size_t(series));
  const auto [x, y] = s.points.at(std::size_t(index));
  auto axis = [](const std::string& label, const char* fallback) {
    return QString::fromStdString(label.empty() ? fallback : label);
  };
  QString text = QString::fromStdString(s.name.empty() ? "series " + std::to_string(series + 1) : s.name);
  text += "\n" + axis(chart_.x_label, "x") + ": " + readable(x);
  text += "\n" + axis(chart_.y_label, "y") + ": " + readable(y);
  if (std::size_t(series) < point_labels_.size() && std::size_t(index) < point_labels_[std::size_t(series)].size()) {
    const std::string& label = point_labels_[std::size_t(series)][std::size_t(index)];
    if (!label.empty()) text += "\n" + QString::fromStdString(label);
  }
  return text;
}

bool ChartWidget::event(QEvent* event) {
  if (event->type() != QEvent::ToolTip) return QWidget::event(event);
  const auto* help = static_cast<QHelpEvent*>(event);
  const auto [series, index] = nearest_point(help->pos());
  if (series < 0) {
    QToolTip::hideText();
    event->ignore();
  } else {
    QToolTip::showText(help->globalPos(), point_text(series, index), this);
  }
  return true;
}

void ChartWidget::mousePressEvent(QMouseEvent* event) {
  const auto [series, index] = nearest_point(event->position());
  if (series >= 0) emit point_clicked(series, index);
  QWidget::mousePressEvent(event);
}

}  // namespace k3::gui
