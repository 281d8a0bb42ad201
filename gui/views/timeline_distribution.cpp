#include "gui/views/timeline_distribution.h"

#include "gui/model/timeline_format.h"

#include <QPainter>

#include <algorithm>

namespace k3::gui {
namespace {
QString dur(double ns) { return QString::fromStdString(format_duration_ns(ns)); }
}  // namespace

TimelineDistribution::TimelineDistribution(QWidget* parent) : QWidget(parent) { setMinimumHeight(130); }

void TimelineDistribution::set_distribution(OpDistribution d) {
  d_ = std::move(d);
  update();
}

void TimelineDistribution::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  p.setFont(QFont("DejaVu Sans", 9));
  p.setPen(QColor(0x22, 0x22, 0x22));
  const QRectF text(8, 4, width() - 16, 40);
  if (d_.empty()) {
    p.drawText(text, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
               d_.op.empty() ? QStringLiteral("Click an op to see how long its instances take.")
                             : QString::fromStdString(d_.op + ": no instance on the GPU in this trace"));
    return;
  }
  p.drawText(text, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
             QStringLiteral("%1: %2 instances, %3 outliers\nmin %4 · median %5 · p90 %6 · max %7")
                 .arg(QString::fromStdString(d_.op))
                 .arg(d_.sorted_ns.size())
                 .arg(d_.outliers.size())
                 .arg(dur(d_.min_ns), dur(d_.median_ns), dur(d_.p90_ns), dur(d_.max_ns)));
  // Axis from 0 to the largest of max and the high fence, so the fence is always on the strip.
  const double hi = std::max(d_.max_ns, d_.high_fence_ns) * 1.05;
  const QRectF strip(12, 56, width() - 24, 34);
  const auto x = [&](double ns) { return strip.left() + ns / hi * strip.width(); };
  p.fillRect(QRectF(x(d_.p10_ns), strip.top(), std::max(1.0, x(d_.p90_ns) - x(d_.p10_ns)), strip.height()),
             QColor(0xdd, 0xe6, 0xf3));
  for (std::int64_t ns : d_.sorted_ns) {
    const bool outlier = ns > d_.high_fence_ns || ns < d_.low_fence_ns;
    p.setPen(QPen(outlier ? QColor(0xd6, 0x27, 0x28) : QColor(0x4e, 0x79, 0xa7), outlier ? 2 : 1));
    p.drawLine(QPointF(x(static_cast<double>(ns)), strip.top() + 4),
               QPointF(x(static_cast<double>(ns)), strip.bottom() - 4));
  }
  p.setPen(QPen(QColor(0x11, 0x11, 0x11), 2));
  p.drawLine(QPointF(x(d_.median_ns), strip.top()), QPointF(x(d_.median_ns), strip.bottom()));
  p.setPen(QPen(QColor(0xd6, 0x27, 0x28), 1, Qt::DashLine));
  p.drawLine(QPointF(x(d_.high_fence_ns), strip.top()), QPointF(x(d_.high_fence_ns), strip.bottom()));
  // The axis: 0, the fence and the top, in the duration's unit.
  p.setPen(QColor(0x55, 0x55, 0x55));
  p.drawLine(QPointF(strip.left(), strip.bottom() + 2), QPointF(strip.right(), strip.bottom() + 2));
  const double label_y = strip.bottom() + 6;
  p.drawText(QRectF(strip.left(), label_y, 80, 16), Qt::AlignLeft, "0");
  p.drawText(QRectF(strip.right() - 100, label_y, 100, 16), Qt::AlignRight, dur(hi));
  p.setPen(QColor(0xd6, 0x27, 0x28));
  const double fx = x(d_.high_fence_ns);
  if (fx > strip.left() + 40 && fx < strip.right() - 140) {
    p.drawText(QRectF(fx - 60, label_y, 120, 16), Qt::AlignHCenter, "fence " + dur(d_.high_fence_ns));
  }
  p.setPen(QColor(0x55, 0x55, 0x55));
  p.drawText(QRectF(8, label_y + 18, width() - 16, 16), Qt::AlignLeft,
             "outlier: slower than p90 + 1.5·IQR or faster than p10 − 1.5·IQR");
}

}  // namespace k3::gui
