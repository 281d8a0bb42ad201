#include "gui/views/roofline_view.h"

#include "gui/model/document.h"

#include <QLineF>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace k3::gui {
namespace {

constexpr double kHitPx = 8;
constexpr double kCaptionPx = 40;

// Roof line colours by compute type: greys and muted hues, apart from the bound colours of the points.
std::string roof_color(const std::string& compute) {
  if (compute == "fp32") return "#9A9A9A";
  if (compute == "tf32") return "#8C6D31";
  if (compute == "bf16") return "#444444";
  if (compute == "fp8") return "#AA3377";
  if (compute == "fp4") return "#228833";
  return "#666666";
}

}  // namespace

QColor RooflineView::bound_color(const std::string& bound) {
  if (bound == "compute") return QColor("#D55E00");
  if (bound == "memory") return QColor("#0072B2");
  if (bound == "serial") return QColor("#CC79A7");  // a serial chain of steps (the KDA state pass)
  return QColor("#009E73");                         // overhead: launch and fixed kernel costs
}

RooflineView::RooflineView(Document* document, QWidget* parent) : QWidget(parent), document_(document) {
  setMouseTracking(true);
  setMinimumSize(500, 360);
  connect(document_, &Document::prediction_changed, this, &RooflineView::rebuild);
  connect(document_, &Document::comparison_changed, this, &RooflineView::rebuild);
  connect(document_, &Document::selection_changed, this, qOverload<>(&QWidget::update));
  rebuild();
}

void RooflineView::rebuild() {
  const auto& p = document_->prediction();
  const Hardware* hw = document_->hardware();
  has_data_ = p && hw;
  chart_ = plot::Chart{};
  if (!has_data_) {
    data_ = RooflineData{};
    caption_ = p ? "No hardware file matches this prediction's hardware: no roofs to draw."
                 : "No prediction: open a scenario or a prediction file.";
    update();
    return;
  }
  const auto& comparison = document_->comparison();
  data_ = roofline_data(*p, *hw, comparison ? &*comparison : nullptr);

  double x_lo = std::numeric_limits<double>::infinity(), x_hi = 0;
  double y_lo = std::numeric_limits<double>::infinity();
  for (const RooflinePoint& pt : data_.points) {
    x_lo = std::min(x_lo, pt.intensity_flops_per_byte);
    x_hi = std::max(x_hi, pt.intensity_flops_per_byte);
    y_lo = std::min(y_lo, pt.predicted_flops_per_s);
    if (pt.measured_flops_per_s) y_lo = std::min(y_lo, *pt.measured_flops_per_s);
  }
  const double top_peak = data_.compute_roofs.empty() ? 1e15 : data_.compute_roofs.back().peak_flops_per_s;
  const double top_ridge = top_peak / data_.hbm_bandwidth_bytes_per_s;
  if (!std::isfinite(x_lo)) x_lo = 1, y_lo = top_peak / 1e3;
  x_lo = std::min(x_lo, 1.0) / 2;
  x_hi = std::max(x_hi, top_ridge) * 2;
  y_lo /= 3;

  chart_.title = "Roofline: " + p->title();
  chart_.x_label = "Arithmetic intensity (FLOP/B)";
  chart_.y_label = "Attained rate (FLOP/s)";
  chart_.x_log = chart_.y_log = true;
  chart_.x_range = plot::AxisRange{x_lo, x_hi};
  chart_.y_range = plot::AxisRange{y_lo, top_peak * 2};
  plot::Series hbm("HBM " + rate_text(data_.hbm_bandwidth_bytes_per_s, "B/s"),
                   {{x_lo, data_.hbm_bandwidth_bytes_per_s * x_lo}, {top_ridge, top_peak}});
  hbm.color = "#222222";
  chart_.series.push_back(hbm);
  for (auto r = data_.compute_roofs.rbegin(); r != data_.compute_roofs.rend(); ++r) {
    plot::Series roof(r->compute + " peak " + rate_text(r->peak_flops_per_s),
                      {{r->ridge_flops_per_byte, r->peak_flops_per_s}, {x_hi, r->peak_flops_per_s}});
    roof.color = roof_color(r->compute);
    chart_.series.push_back(roof);
  }
  for (const char* bound : {"memory", "compute", "overhead", "serial"}) {
    plot::Series s(std::string(bound) + "-bound (predicted)", {}, plot::SeriesStyle::scatter);
    for (const RooflinePoint& pt : data_.points) {
      if (pt.bound == bound) s.points.emplace_back(pt.intensity_flops_per_byte, pt.predicted_flops_per_s);
    }
    s.color = bound_color(bound).name().toStdString();
    s.marker_radius_px = 4;
    if (!s.points.empty()) chart_.series.push_back(s);
  }
  if (data_.measured_joined > 0) {
    plot::Series measured("measured", {}, plot::SeriesStyle::scatter);
    for (const RooflinePoint& pt : data_.points) {
      if (pt.measured_flops_per_s) measured.points.emplace_back(pt.intensity_flops_per_byte, *pt.measured_flops_per_s);
    }
    measured.color = "#000000";
    measured.marker_radius_px = 2.5;
    chart_.series.push_back(measured);
  }

  const auto ops = [](std::size_t n) { return fmt::format("{} op{}", n, n == 1 ? "" : "s"); };
  caption_ = QString::fromStdString(fmt::format(
      "{} drawn at FLOPs / predicted time; left out: {} ({}) and {} without FLOPs.", ops(data_.points.size()),
      ops(data_.collectives_left_out), "collectives", ops(data_.zero_flop_left_out)));
  if (comparison) {
    caption_ += QString::fromStdString(fmt::format(
        " Measured: {} of the comparison's {} ops with FLOPs joined by name, a line from prediction to measurement.",
        data_.measured_joined, data_.comparison_ops));
  }
  update();
}

QRectF RooflineView::chart_rect() const { return QRectF(0, 0, width(), std::max(100.0, height() - kCaptionPx)); }

void RooflineView::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), Qt::white);
  painter.setRenderHint(QPainter::Antialiasing);
  const QRectF caption_rect(8, height() - kCaptionPx, width() - 16, kCaptionPx);
  painter.setPen(Qt::black);
  painter.drawText(has_data_ ? caption_rect : QRectF(rect()), Qt::AlignCenter | Qt::TextWordWrap, caption_);
  if (!has_data_) return;
  frame_ = plot::paint_chart(chart_, painter, chart_rect());

  // Prediction to measurement, one thin line per joined op.
  painter.setPen(QPen(QColor(0, 0, 0, 90), 1));
  for (const RooflinePoint& pt : data_.points) {
    if (!pt.measured_flops_per_s) continue;
    painter.drawLine(frame_.to_px(pt.intensity_flops_per_byte, pt.predicted_flops_per_s),
                     frame_.to_px(pt.intensity_flops_per_byte, *pt.measured_flops_per_s));
  }
  // The selected op: a ring and its name.
  const std::string& selected = document_->selected_op();
  for (const RooflinePoint& pt : data_.points) {
    if (pt.name != selected) continue;
    const QPointF px = frame_.to_px(pt.intensity_flops_per_byte, pt.predicted_flops_per_s);
    painter.setPen(QPen(Qt::black, 2.5));
    painter.setBrush(Qt::NoBrush);
    painter.drawEllipse(px, 8, 8);
    if (pt.measured_flops_per_s) {
      painter.drawEllipse(frame_.to_px(pt.intensity_flops_per_byte, *pt.measured_flops_per_s), 6, 6);
    }
    QFont bold = font();
    bold.setBold(true);
    painter.setFont(bold);
    painter.drawText(px + QPointF(11, -9), QString::fromStdString(pt.name));
  }
}

int RooflineView::nearest_point(QPointF px) const {
  if (!has_data_) return -1;
  int best = -1;
  double best_px = kHitPx;
  for (std::size_t i = 0; i < data_.points.size(); ++i) {
    const RooflinePoint& pt = data_.points[i];
    double d = QLineF(px, frame_.to_px(pt.intensity_flops_per_byte, pt.predicted_flops_per_s)).length();
    if (pt.measured_flops_per_s) {
      d = std::min(d, QLineF(px, frame_.to_px(pt.intensity_flops_per_byte, *pt.measured_flops_per_s)).length());
    }
    if (d < best_px) {
      best_px = d;
      best = static_cast<int>(i);
    }
  }
  return best;
}

QPointF RooflineView::point_px(const std::string& op_name) const {
  for (const RooflinePoint& pt : data_.points) {
    if (pt.name == op_name) return frame_.to_px(pt.intensity_flops_per_byte, pt.predicted_flops_per_s);
  }
  return {-1, -1};
}

QString RooflineView::hover_text_at(QPointF px) const {
  const int i = nearest_point(px);
  if (i < 0) return {};
  const RooflinePoint& pt = data_.points[static_cast<std::size_t>(i)];
  std::string text = fmt::format(
      "{} ({}, {}-bound, {})\nintensity {:.3g} FLOP/B\npredicted {} in {:.2f} µs: {:.1f} % of roof ({})", pt.name,
      pt.kind, pt.bound, pt.compute, pt.intensity_flops_per_byte, rate_text(pt.predicted_flops_per_s), pt.predicted_us,
      pt.predicted_percent_of_roof(), rate_text(pt.roof_flops_per_s));
  if (pt.measured_flops_per_s) {
    text += fmt::format("\nmeasured {} in {:.2f} µs: {:.1f} % of roof", rate_text(*pt.measured_flops_per_s),
                        *pt.measured_us, *pt.measured_flops_per_s / pt.roof_flops_per_s * 100.0);
  }
  return QString::fromStdString(text);
}

void RooflineView::mouseMoveEvent(QMouseEvent* event) {
  const QString text = hover_text_at(event->position());
  if (text.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPosition().toPoint(), text, this);
  }
}

void RooflineView::mousePressEvent(QMouseEvent* event) {
  const int i = nearest_point(event->position());
  if (i >= 0) document_->select_op(data_.points[static_cast<std::size_t>(i)].name);
}

}  // namespace k3::gui
