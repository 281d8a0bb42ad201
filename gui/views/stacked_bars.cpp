#include "gui/views/stacked_bars.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include <fmt/format.h>

#include <algorithm>

namespace k3::gui {
namespace {

constexpr int kMarginPx = 8;
constexpr int kBarHeightPx = 24;
constexpr int kSwatchPx = 11;

QString q(const std::string& s) { return QString::fromStdString(s); }

// Dark segments carry white names, light ones black.
bool is_light(const QColor& c) { return c.lightnessF() > 0.6; }

}  // namespace

QColor segment_color(int index) {
  static const QColor kOkabeIto[] = {QColor("#0072B2"), QColor("#E69F00"), QColor("#009E73"), QColor("#D55E00"),
                                     QColor("#CC79A7"), QColor("#56B4E9"), QColor("#F0E442"), QColor("#7F7F7F")};
  constexpr int n = 8;
  const QColor base = kOkabeIto[index % n];
  if ((index / n) % 2 == 0) return base;
  // The second round: the same hues, lighter.
  return QColor((base.red() + 255) / 2, (base.green() + 255) / 2, (base.blue() + 255) / 2);
}

StackedBars::StackedBars(QWidget* parent) : QWidget(parent) {
  QSizePolicy policy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  policy.setHeightForWidth(true);
  setSizePolicy(policy);
  setMouseTracking(true);
}

void StackedBars::set_bars(std::vector<Bar> bars, Format format) {
  bars_ = std::move(bars);
  format_ = std::move(format);
  cached_width_ = -1;
  highlight_.clear();
  updateGeometry();
  update();
}

void StackedBars::set_capacity(std::optional<double> capacity, const std::string& label) {
  capacity_ = capacity;
  capacity_label_ = label;
  cached_width_ = -1;
  update();
}

void StackedBars::set_highlight(std::vector<std::string> segment_per_bar) {
  highlight_ = std::move(segment_per_bar);
  update();
}

void StackedBars::changeEvent(QEvent* event) {
  if (event->type() == QEvent::FontChange) cached_width_ = -1;
  QWidget::changeEvent(event);
}

const std::vector<StackedBars::Placed>& StackedBars::layout_at(int width, int* height) const {
  if (width == cached_width_) {
    *height = cached_height_;
    return cached_;
  }
  std::vector<Placed>& out = cached_;
  out.clear();
  QFont bold = font();
  bold.setBold(true);
  const QFontMetricsF fm(font()), fm_bold(bold);
  const double line = std::max(fm.height(), fm_bold.height());
  const double left = kMarginPx, right = std::max(width - kMarginPx, kMarginPx + 100);
  double y = 4;
  for (int b = 0; b < static_cast<int>(bars_.size()); ++b) {
    const Bar& bar = bars_[static_cast<std::size_t>(b)];
    out.push_back({Part::title, b, -1, QRectF(left, y, right - left, line), q(bar.title)});
    std::string total = format_(bar.total);
    if (capacity_) total += " of " + format_(*capacity_) + " " + capacity_label_;
    out.push_back({Part::total, b, -1, QRectF(left, y, right - left, line), q(total)});
    y += line + 3;
    const double scale = std::max(bar.total, capacity_.value_or(0.0));
    double x = left;
    for (int s = 0; s < static_cast<int>(bar.segments.size()); ++s) {
      const BarSegment& seg = bar.segments[static_cast<std::size_t>(s)];
      const double w = scale > 0 ? seg.value / scale * (right - left) : 0;
      const QRectF rect(x, y, w, kBarHeightPx);
      out.push_back({Part::segment, b, s, rect, q(seg.name)});
      if (fm.horizontalAdvance(q(seg.name)) + 8 <= w) out.push_back({Part::name, b, s, rect, q(seg.name)});
      x += w;
    }
    y += kBarHeightPx + 5;
    // The legend flows in rows.
    double lx = left;
    for (int s = 0; s < static_cast<int>(bar.segments.size()); ++s) {
      const BarSegment& seg = bar.segments[static_cast<std::size_t>(s)];
      const QString text = q(fmt::format("{} {} ({:.1f} %)", seg.name, format_(seg.value), seg.share_percent));
      const double w = kSwatchPx + 5 + fm.horizontalAdvance(text);
      if (lx > left && lx + w > right) {
        lx = left;
        y += line + 2;
      }
      out.push_back({Part::legend, b, s, QRectF(lx, y, w, line), text});
      lx += w + 16;
    }
    y += line + 14;
  }
  cached_width_ = width;
  cached_height_ = static_cast<int>(y);
  *height = cached_height_;
  return out;
}

int StackedBars::heightForWidth(int width) const {
  int height = 0;
  layout_at(width, &height);
  return height;
}

QSize StackedBars::sizeHint() const { return {600, heightForWidth(600)}; }

QStringList StackedBars::labels() const {
  int height = 0;
  QStringList out;
  for (const Placed& p : layout_at(width(), &height)) {
    if (p.part == Part::name || p.part == Part::legend || p.part == Part::title || p.part == Part::total) {
      out << p.text;
    }
  }
  return out;
}

int StackedBars::bar_center_y(int bar) const {
  int height = 0;
  for (const Placed& p : layout_at(width(), &height)) {
    if (p.part == Part::segment && p.bar == bar) return static_cast<int>(p.rect.center().y());
  }
  return -1;
}

void StackedBars::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.fillRect(rect(), palette().base());
  QFont bold = font();
  bold.setBold(true);
  int height = 0;
  const std::vector<Placed>& placed = layout_at(width(), &height);
  const QColor text = palette().text().color();
  for (const Placed& p : placed) {
    const std::size_t b = static_cast<std::size_t>(p.bar);
    switch (p.part) {
      case Part::title:
        painter.setFont(bold);
        painter.setPen(text);
        painter.drawText(p.rect, Qt::AlignLeft | Qt::AlignVCenter, p.text);
        break;
      case Part::total:
        painter.setFont(font());
        painter.setPen(text);
        painter.drawText(p.rect, Qt::AlignRight | Qt::AlignVCenter, p.text);
        break;
      case Part::segment: painter.fillRect(p.rect, segment_color(p.segment)); break;
      case Part::name: {
        painter.setFont(font());
        painter.setPen(is_light(segment_color(p.segment)) ? Qt::black : Qt::white);
        painter.drawText(p.rect, Qt::AlignCenter, p.text);
        break;
      }
      case Part::legend: {
        painter.setFont(font());
        const QRectF swatch(p.rect.left(), p.rect.center().y() - kSwatchPx / 2.0, kSwatchPx, kSwatchPx);
        painter.fillRect(swatch, segment_color(p.segment));
        // The highlighted entry is underlined (same width, so nothing moves) and its swatch outlined.
        const bool highlighted =
            b < highlight_.size() && highlight_[b] == bars_[b].segments[static_cast<std::size_t>(p.segment)].name;
        QFont legend_font = font();
        legend_font.setUnderline(highlighted);
        painter.setFont(legend_font);
        painter.setPen(text);
        painter.drawText(p.rect.adjusted(kSwatchPx + 5, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, p.text);
        if (highlighted) {
          painter.setBrush(Qt::NoBrush);
          painter.setPen(QPen(text, 1.5));
          painter.drawRect(swatch.adjusted(-1.5, -1.5, 1.5, 1.5));
        }
        break;
      }
    }
  }
  // Outlines of the highlighted segments and the capacity line, above the fills.
  for (const Placed& p : placed) {
    const std::size_t b = static_cast<std::size_t>(p.bar);
    if (p.part != Part::segment) continue;
    if (b < highlight_.size() && highlight_[b] == bars_[b].segments[static_cast<std::size_t>(p.segment)].name) {
      painter.setPen(QPen(text, 2.5));
      painter.setBrush(Qt::NoBrush);
      painter.drawRect(p.rect.adjusted(1, 1, -1, -1));
    }
  }
  if (capacity_) {
    for (std::size_t b = 0; b < bars_.size(); ++b) {
      const double scale = std::max(bars_[b].total, *capacity_);
      const double x = kMarginPx + *capacity_ / scale * (std::max(width() - kMarginPx, kMarginPx + 100) - kMarginPx);
      const int y = bar_center_y(static_cast<int>(b));
      painter.setPen(QPen(QColor("#B00020"), 2, Qt::DashLine));
      painter.drawLine(QPointF(x, y - kBarHeightPx / 2.0 - 4), QPointF(x, y + kBarHeightPx / 2.0 + 4));
    }
  }
}

bool StackedBars::event(QEvent* event) {
  if (event->type() != QEvent::ToolTip) return QWidget::event(event);
  const auto* help = static_cast<QHelpEvent*>(event);
  int height = 0;
  for (const Placed& p : layout_at(width(), &height)) {
    if ((p.part == Part::segment || p.part == Part::legend) && p.rect.contains(help->pos())) {
      const BarSegment& s = bars_[static_cast<std::size_t>(p.bar)].segments[static_cast<std::size_t>(p.segment)];
      QToolTip::showText(help->globalPos(),
                         q(fmt::format("{}: {}, {:.1f} % of {}", s.name, format_(s.value), s.share_percent,
                                       bars_[static_cast<std::size_t>(p.bar)].title)),
                         this);
      return true;
    }
  }
  QToolTip::hideText();
  event->ignore();
  return true;
}

}  // namespace k3::gui
