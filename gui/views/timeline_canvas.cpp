#include "gui/views/timeline_canvas.h"

#include "gui/model/timeline_format.h"

#include <fmt/format.h>

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <map>

namespace k3::gui {
namespace {

constexpr double kLabelWidthPx = 170;
constexpr double kRulerHeightPx = 30;
constexpr double kRowHeightPx = 26;
constexpr double kRowGapPx = 3;
constexpr std::int64_t kMinWindowNs = 100;

// One colour per op kind (core/op_names' kinds and the prediction's), muted so text stays readable.
QColor kind_color(const std::string& kind) {
  static const std::map<std::string, QColor> colors = {
      {"gemm", QColor(0x4e, 0x79, 0xa7)},
      {"mla_attention", QColor(0x9c, 0x6a, 0xc4)},
      {"moe_experts", QColor(0x59, 0xa1, 0x4f)},
      {"router", QColor(0x76, 0xb7, 0xb2)},
      {"elementwise", QColor(0x9d, 0xa5, 0xad)},
      {"kda_recurrent", QColor(0xf2, 0x8e, 0x2b)},
      {"kda_preprocess", QColor(0xed, 0xc9, 0x48)},
      {"kda_chunk", QColor(0xe1, 0x7c, 0x05)},
      {"kda_output_norm", QColor(0xd3, 0xb0, 0x6c)},
      {"attnres_mix", QColor(0xff, 0x9d, 0xa7)},
      {"collective", QColor(0xe1, 0x57, 0x59)},
      {"embedding", QColor(0x9c, 0x75, 0x5f)},
      {"norm", QColor(0xba, 0xb0, 0xac)},
  };
  const auto it = colors.find(kind);
  return it != colors.end() ? it->second : QColor(0xbd, 0xbd, 0xbd);
}

const QColor kCollapsed(0x6b, 0x72, 0x7a);
const QColor kMemcpy(0xff, 0xa6, 0x4d);
const QColor kMemset(0xc0, 0x8a, 0x5c);
const QColor kSelected(0x11, 0x11, 0x11);
const QColor kOutlier(0xd6, 0x27, 0x28);
const QColor kHit(0xff, 0xd4, 0x00);

// A "nice" ruler step: 1, 2 or 5 times a power of ten nanoseconds, about `target_ns` long.
std::int64_t nice_step_ns(double target_ns) {
  const double p = std::pow(10.0, std::floor(std::log10(std::max(target_ns, 1.0))));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= target_ns) return std::max<std::int64_t>(1, std::llround(m * p));
  }
  return std::llround(10 * p);
}

}  // namespace

TimelineCanvas::TimelineCanvas(QWidget* parent) : QWidget(parent) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(false);
  setMinimumSize(400, 200);
  setAttribute(Qt::WA_OpaquePaintEvent);
}

void TimelineCanvas::set_index(std::shared_ptr<const TimelineIndex> index, bool keep_window) {
  index_ = std::move(index);
  labels_.clear();
  op_colors_.clear();
  if (index_) {
    for (const TimelineTrack& t : index_->tracks()) labels_.push_back(QString::fromStdString(t.label));
    op_colors_.push_back(QColor(0xd9, 0xd9, 0xd9));  // unattributed
    for (std::size_t n = 0; n < index_->names().size(); ++n) {
      op_colors_.push_back(kind_color(index_->kind_of(static_cast<std::int32_t>(n))));
    }
    if (!keep_window) {
      range_.reset();
      show_all();
    }
  }
  update();
}

void TimelineCanvas::set_selected_op(const std::string& op, std::vector<SpanRef> outliers) {
  selected_op_ = index_ && !op.empty() ? index_->find_name(op) : profiler::kNone;
  outliers_ = std::move(outliers);
  update();
}

void TimelineCanvas::set_search_hits(std::vector<SpanRef> hits) {
  hits_ = std::move(hits);
  update();
}

void TimelineCanvas::set_view(std::int64_t t0_ns, std::int64_t t1_ns) {
  if (t1_ns - t0_ns < kMinWindowNs) {
    const std::int64_t mid = t0_ns + (t1_ns - t0_ns) / 2;
    t0_ns = mid - kMinWindowNs / 2, t1_ns = t0_ns + kMinWindowNs;
  }
  t0_ns_ = t0_ns, t1_ns_ = t1_ns;
  update();
  emit view_changed();
}

void TimelineCanvas::show_all() {
  if (!index_) return;
  const std::int64_t margin = std::max<std::int64_t>(1, (index_->end_ns() - index_->begin_ns()) / 100);
  set_view(index_->begin_ns() - margin, index_->end_ns() + margin);
}

void TimelineCanvas::zoom(double factor, double anchor_px) {
  const double anchor = std::clamp((anchor_px - kLabelWidthPx) / plot_width(), 0.0, 1.0);
  const double width = static_cast<double>(t1_ns_ - t0_ns_);
  const double at = static_cast<double>(t0_ns_) + anchor * width;
  const double new_width = std::max(width * factor, static_cast<double>(kMinWindowNs));
  set_view(std::llround(at - anchor * new_width), std::llround(at + (1 - anchor) * new_width));
}

void TimelineCanvas::pan(double fraction) {
  const auto shift = static_cast<std::int64_t>(fraction * static_cast<double>(t1_ns_ - t0_ns_));
  set_view(t0_ns_ + shift, t1_ns_ + shift);
}

double TimelineCanvas::plot_width() const { return std::max(1.0, width() - kLabelWidthPx - 4); }

double TimelineCanvas::to_px(std::int64_t t_ns) const {
  return kLabelWidthPx + static_cast<double>(t_ns - t0_ns_) / static_cast<double>(t1_ns_ - t0_ns_) * plot_width();
}

std::int64_t TimelineCanvas::to_ns(double x_px) const {
  return t0_ns_ + std::llround((x_px - kLabelWidthPx) / plot_width() * static_cast<double>(t1_ns_ - t0_ns_));
}

double TimelineCanvas::row_top(int track) const {
  return kRulerHeightPx + 4 + track * (kRowHeightPx + kRowGapPx) - scroll_px_;
}

void TimelineCanvas::scroll_rows(double rows) {
  const int tracks = index_ ? static_cast<int>(index_->tracks().size()) : 0;
  const double content = 4 + tracks * (kRowHeightPx + kRowGapPx);
  const double max_px = std::max(0.0, content - (height() - kRulerHeightPx));
  scroll_px_ = std::clamp(scroll_px_ + rows * (kRowHeightPx + kRowGapPx), 0.0, max_px);
  update();
}

int TimelineCanvas::track_at(double y_px) const {
  if (!index_ || y_px < row_top(0) || y_px < kRulerHeightPx) return -1;
  const int t = static_cast<int>((y_px - row_top(0)) / (kRowHeightPx + kRowGapPx));
  return t < static_cast<int>(index_->tracks().size()) && y_px < row_top(t) + kRowHeightPx ? t : -1;
}

std::int64_t TimelineCanvas::span_under(int track, QPointF pos) const {
  if (track < 0 || pos.x() < kLabelWidthPx) return -1;
  const double ns_per_px = static_cast<double>(t1_ns_ - t0_ns_) / plot_width();
  return index_->span_at(track, to_ns(pos.x()), std::llround(3 * ns_per_px));
}

void TimelineCanvas::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  QFont font("DejaVu Sans", 9);
  p.setFont(font);
  last_drawn_ = 0;
  if (!index_) {
    p.setPen(QColor(0x55, 0x55, 0x55));
    QFont big("DejaVu Sans", 12);
    p.setFont(big);
    p.drawText(rect(), Qt::AlignCenter,
               "Open a trace (File → Open…): a k3perf trace .json.gz, or a bench/results folder,\n"
               "to see its kernels, ops and steps beside the predicted ones.");
    return;
  }
  last_first_track_ = -1;
  for (int t = 0; t < static_cast<int>(index_->tracks().size()); ++t) {
    if (row_top(t) > height()) break;
    if (row_top(t) < kRulerHeightPx) continue;  // scrolled up under the ruler
    if (last_first_track_ < 0) last_first_track_ = t;
    paint_track(p, t, row_top(t));
  }
  paint_marks(p);
  paint_ruler(p);
  // Labels last, over anything that reaches left of the plot.
  p.fillRect(QRectF(0, 0, kLabelWidthPx, height()), QColor(0xf4, 0xf5, 0xf7));
  p.setPen(QColor(0x22, 0x22, 0x22));
  for (int t = 0; t < static_cast<int>(labels_.size()); ++t) {
    if (row_top(t) < kRulerHeightPx) continue;
    const QRectF r(8, row_top(t), kLabelWidthPx - 12, kRowHeightPx);
    p.drawText(r, Qt::AlignVCenter | Qt::AlignLeft, p.fontMetrics().elidedText(labels_[t], Qt::ElideRight, r.width()));
  }
  p.setPen(QColor(0xcc, 0xcc, 0xcc));
  p.drawLine(QPointF(kLabelWidthPx, 0), QPointF(kLabelWidthPx, height()));
}

void TimelineCanvas::paint_ruler(QPainter& p) {
  p.fillRect(QRectF(kLabelWidthPx, 0, width() - kLabelWidthPx, kRulerHeightPx), QColor(0xfa, 0xfa, 0xfa));
  const double ns_per_px = static_cast<double>(t1_ns_ - t0_ns_) / plot_width();
  const std::int64_t step = nice_step_ns(ns_per_px * 110);  // a label every ~110 px
  const std::int64_t origin = index_->begin_ns();
  std::int64_t first = origin + (t0_ns_ - origin) / step * step;
  if (first < t0_ns_) first += step;
  p.setPen(QColor(0x44, 0x44, 0x44));
  // The first tick from the trace's start, the others from the first (Tracy's way: "+2.00 µs" stays readable
  // 54 ms into a trace).
  for (std::int64_t t = first; t <= t1_ns_; t += step) {
    const double x = to_px(t);
    p.drawLine(QPointF(x, kRulerHeightPx - 7), QPointF(x, kRulerHeightPx));
    const std::string label = t == first ? format_duration_ns(static_cast<double>(t - origin))
                                         : fmt::format("+{}", format_duration_ns(static_cast<double>(t - first)));
    p.drawText(QRectF(x + 3, 2, 120, kRulerHeightPx - 8), Qt::AlignLeft | Qt::AlignVCenter,
               QString::fromStdString(label));
  }
  p.setPen(QColor(0xcc, 0xcc, 0xcc));
  p.drawLine(QPointF(kLabelWidthPx, kRulerHeightPx), QPointF(width(), kRulerHeightPx));
  p.setPen(QColor(0x22, 0x22, 0x22));
  p.drawText(QRectF(8, 2, kLabelWidthPx - 12, kRulerHeightPx - 6), Qt::AlignVCenter | Qt::AlignLeft,
             QString::fromStdString("window " + format_duration_ns(static_cast<double>(t1_ns_ - t0_ns_))));
}

void TimelineCanvas::paint_track(QPainter& p, int track, double top) {
  const TimelineTrack& t = index_->tracks()[static_cast<std::size_t>(track)];
  p.fillRect(QRectF(kLabelWidthPx, top, width() - kLabelWidthPx, kRowHeightPx),
             track % 2 ? QColor(0xf7, 0xf8, 0xfa) : QColor(0xff, 0xff, 0xff));
  scratch_.clear();
  index_->query(track, t0_ns_, t1_ns_, plot_width(), &scratch_);
  last_drawn_ += scratch_.size();
  const profiler::Trace& trace = index_->trace();
  const double x_min = kLabelWidthPx - 2, x_max = width() + 2.0;
  const double h = kRowHeightPx - 4, y = top + 2;
  p.setPen(Qt::NoPen);
  for (const DrawSpan& d : scratch_) {
    const double x0 = std::max(to_px(d.start_ns), x_min), x1 = std::min(to_px(d.end_ns), x_max);
    const double w = std::max(1.0, x1 - x0);
    const QRectF r(x0, y, w, h);
    if (d.collapsed()) {
      p.fillRect(r, kCollapsed);
      if (w >= 6) {  // Tracy's zig-zag: many spans too narrow to draw
        QPainterPath zig;
        zig.moveTo(x0, y + h - 3);
        for (int k = 1; x0 + 3 * k <= x0 + w; ++k) zig.lineTo(x0 + 3 * k, k % 2 ? y + 3 : y + h - 3);
        p.setPen(QPen(QColor(0xee, 0xee, 0xee), 1));
        p.drawPath(zig);
        p.setPen(Qt::NoPen);
      }
      if (w >= 46) {
        p.setPen(Qt::white);
        p.drawText(r, Qt::AlignCenter, QStringLiteral("×%1").arg(d.count));
        p.setPen(Qt::NoPen);
      }
      continue;
    }
    const std::int32_t op = index_->op_of(track, d.first);
    QColor color = op_colors_[static_cast<std::size_t>(op + 1)];
    if (t.kind == TrackKind::stream) {
      const profiler::EventKind k = trace.kind[t.ref[d.first]];
      if (k == profiler::EventKind::memcpy) color = kMemcpy;
      if (k == profiler::EventKind::memset) color = kMemset;
    } else if (t.kind == TrackKind::steps) {
      color = index_->spans()[t.ref[d.first]].instance % 2 ? QColor(0x8f, 0xaa, 0xdc) : QColor(0xb4, 0xc7, 0xe7);
    } else if (t.kind == TrackKind::predicted) {
      color = color.lighter(125);
    }
    p.fillRect(r, color);
    const bool selected = op != profiler::kNone && op == selected_op_;
    if (selected) {
      p.setPen(QPen(kSelected, 2));
      p.setBrush(Qt::NoBrush);
      p.drawRect(r.adjusted(1, 1, -1, -1));
      p.setPen(Qt::NoPen);
    }
    if (w >= 40) {
      const SpanInfo s = index_->info(track, d.first);
      const std::string text = t.kind == TrackKind::stream ? short_kernel_name(s.name) : s.name;
      p.setPen(QColor(0x11, 0x11, 0x11));
      const QRectF tr = r.adjusted(3, 0, -3, 0);
      p.drawText(
          tr, Qt::AlignVCenter | Qt::AlignLeft,
          p.fontMetrics().elidedText(QString::fromStdString(text), Qt::ElideRight, static_cast<int>(tr.width())));
      p.setPen(Qt::NoPen);
    }
  }
}

void TimelineCanvas::paint_marks(QPainter& p) {
  const auto visible = [&](const SpanRef& s, QRectF* r) {
    const TimelineTrack& t = index_->tracks()[static_cast<std::size_t>(s.track)];
    if (t.end_ns[s.span] < t0_ns_ || t.start_ns[s.span] > t1_ns_) return false;
    const double x0 = to_px(t.start_ns[s.span]);
    *r = QRectF(x0, row_top(s.track), std::max(1.0, to_px(t.end_ns[s.span]) - x0), kRowHeightPx);
    return true;
  };
  QRectF r;
  p.setPen(Qt::NoPen);
  p.setBrush(kHit);
  for (const SpanRef& s : hits_) {  // a tick above each visible hit
    if (visible(s, &r)) p.drawRect(QRectF(r.left(), r.top(), std::max(2.0, r.width()), 3));
  }
  for (const SpanRef& s : outliers_) {  // a red outline and a triangle above each outlier
    if (!visible(s, &r)) continue;
    p.setPen(QPen(kOutlier, 2));
    p.setBrush(Qt::NoBrush);
    p.drawRect(r.adjusted(0, 1, 0, -1));
    p.setPen(Qt::NoPen);
    p.setBrush(kOutlier);
    const double cx = r.left() + r.width() / 2;
    p.drawPolygon(QPolygonF({QPointF(cx - 5, r.top() - 6), QPointF(cx + 5, r.top() - 6), QPointF(cx, r.top())}));
  }
  if (range_) {
    const double x0 = to_px(range_->first), x1 = to_px(range_->second);
    p.fillRect(QRectF(x0, kRulerHeightPx, x1 - x0, height() - kRulerHeightPx), QColor(0x33, 0x66, 0xcc, 50));
    p.setPen(QColor(0x33, 0x66, 0xcc));
    p.drawLine(QPointF(x0, kRulerHeightPx), QPointF(x0, height()));
    p.drawLine(QPointF(x1, kRulerHeightPx), QPointF(x1, height()));
    const QString text =
        QString::fromStdString(format_duration_ns(static_cast<double>(range_->second - range_->first)));
    const double tw = p.fontMetrics().horizontalAdvance(text) + 10;
    const QRectF box((x0 + x1 - tw) / 2, height() - 22, tw, 18);
    p.fillRect(box, QColor(0x33, 0x66, 0xcc));
    p.setPen(Qt::white);
    p.drawText(box, Qt::AlignCenter, text);
  }
  p.setBrush(Qt::NoBrush);
}

void TimelineCanvas::keyPressEvent(QKeyEvent* event) {
  const QPointF cursor = mapFromGlobal(QCursor::pos());
  const double anchor = rect().contains(cursor.toPoint()) ? cursor.x() : kLabelWidthPx + plot_width() / 2;
  switch (event->key()) {
    case Qt::Key_W: zoom(0.8, anchor); break;
    case Qt::Key_S: zoom(1.25, anchor); break;
    case Qt::Key_A: pan(-0.1); break;
    case Qt::Key_D: pan(0.1); break;
    case Qt::Key_0:
    case Qt::Key_Home: show_all(); break;
    case Qt::Key_Up: scroll_rows(-1); break;  // more tracks than fit: rows scroll under the ruler
    case Qt::Key_Down: scroll_rows(1); break;
    case Qt::Key_PageUp: scroll_rows(-8); break;
    case Qt::Key_PageDown: scroll_rows(8); break;
    case Qt::Key_Escape:
      range_.reset();
      update();
      break;
    default: QWidget::keyPressEvent(event); return;
  }
  event->accept();
}

void TimelineCanvas::wheelEvent(QWheelEvent* event) {
  if (!index_) return;
  if (event->modifiers() & (Qt::AltModifier | Qt::ControlModifier)) {
    scroll_rows(-event->angleDelta().y() / 120.0);  // Alt/Ctrl + wheel scrolls the rows
  } else {
    zoom(std::pow(0.999, event->angleDelta().y()), event->position().x());  // one notch (120) zooms by 11 %
  }
  event->accept();
}

void TimelineCanvas::mousePressEvent(QMouseEvent* event) {
  if (!index_) return;
  press_pos_ = event->position();
  press_t0_ns_ = t0_ns_, press_t1_ns_ = t1_ns_;
  moved_ = false;
  const bool selects = event->button() == Qt::RightButton ||
                       (event->button() == Qt::LeftButton && (event->modifiers() & Qt::ShiftModifier));
  drag_ = selects ? Drag::range : (event->button() == Qt::LeftButton ? Drag::pan : Drag::none);
}

void TimelineCanvas::mouseMoveEvent(QMouseEvent* event) {
  if (drag_ == Drag::none) return;
  const double dx = event->position().x() - press_pos_.x();
  if (std::fabs(dx) > 3) moved_ = true;
  if (!moved_) return;
  if (drag_ == Drag::pan) {
    const auto shift = std::llround(-dx / plot_width() * static_cast<double>(press_t1_ns_ - press_t0_ns_));
    set_view(press_t0_ns_ + shift, press_t1_ns_ + shift);
  } else {
    const std::int64_t a = to_ns(press_pos_.x()), b = to_ns(event->position().x());
    range_ = std::make_pair(std::min(a, b), std::max(a, b));
    update();
  }
}

void TimelineCanvas::mouseReleaseEvent(QMouseEvent* event) {
  const Drag drag = drag_;
  drag_ = Drag::none;
  if (!index_) return;
  if (drag == Drag::range && moved_ && range_) {
    emit range_selected(range_->first, range_->second);
  } else if (drag == Drag::pan && !moved_) {
    const int track = track_at(event->position().y());
    const std::int64_t span = span_under(track, event->position());
    if (span >= 0) emit span_clicked(track, static_cast<std::uint32_t>(span));
  }
}

bool TimelineCanvas::event(QEvent* event) {
  if (event->type() != QEvent::ToolTip || !index_) return QWidget::event(event);
  auto* help = static_cast<QHelpEvent*>(event);
  const int track = track_at(help->pos().y());
  const std::int64_t span = span_under(track, help->pos());
  if (span < 0) {
    QToolTip::hideText();
    return true;
  }
  const SpanInfo s = index_->info(track, static_cast<std::uint32_t>(span));
  QString text = QString::fromStdString(s.name).toHtmlEscaped();
  if (text.size() > 160) text = text.left(160) + "…";
  if (!s.op.empty() && s.op != s.name) text += "<br>op " + QString::fromStdString(s.op).toHtmlEscaped();
  if (s.instance != profiler::kNone) text += QStringLiteral(" (instance %1)").arg(s.instance);
  text += "<br>" + QString::fromStdString(format_duration_ns(static_cast<double>(s.end_ns - s.start_ns))) + " at " +
          QString::fromStdString(format_duration_ns(static_cast<double>(s.start_ns - index_->begin_ns())));
  QToolTip::showText(help->globalPos(), text, this);
  return true;
}

}  // namespace k3::gui
