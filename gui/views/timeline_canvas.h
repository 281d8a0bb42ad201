// The painted timeline: a time ruler, one row per index track with its label, the spans the index returns for
// the visible window (sub-pixel runs drawn as zig-zag blocks with their count), the selected op's instances
// outlined, its outliers marked, search hits ticked, and a selected range shaded. Zoom and pan as in
// Perfetto/Tracy: W/S zoom, A/D pan, the wheel zooms at the cursor, a drag pans, shift-drag or right-drag selects
// a range, a click picks the span under the cursor, 0 shows the whole trace.
#pragma once

#include "gui/model/timeline_index.h"
#include "gui/model/timeline_stats.h"

#include <QColor>
#include <QWidget>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace k3::gui {

class TimelineCanvas : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineCanvas(QWidget* parent = nullptr);

  // A new index (null: the "open a trace" message) shows the whole trace; a refreshed one keeps the window.
  void set_index(std::shared_ptr<const TimelineIndex> index, bool keep_window = false);
  // The op to outline everywhere ("" none), with its distribution's outliers to mark.
  void set_selected_op(const std::string& op, std::vector<SpanRef> outliers);
  void set_search_hits(std::vector<SpanRef> hits);

  // The visible window in trace nanoseconds; set_view clamps to at least 100 ns.
  void set_view(std::int64_t t0_ns, std::int64_t t1_ns);
  std::int64_t view_t0_ns() const { return t0_ns_; }
  std::int64_t view_t1_ns() const { return t1_ns_; }
  void show_all();
  // Zooms by `factor` (< 1 in) keeping the time under x = `anchor_px` in place; pans by a fraction of the window.
  void zoom(double factor, double anchor_px);
  void pan(double fraction);
  // Scrolls the track rows by `rows` (negative: up), within what the tracks need; Up/Down, PageUp/PageDown and
  // Alt/Ctrl + wheel call it.
  void scroll_rows(double rows);
  double scroll_px() const { return scroll_px_; }
  std::optional<std::pair<std::int64_t, std::int64_t>> selected_range() const { return range_; }

  // What the last paint drew, for tests: the track labels and the number of spans (runs count once).
  const std::vector<QString>& track_labels() const { return labels_; }
  std::size_t last_drawn_spans() const { return last_drawn_; }
  int last_first_track() const { return last_first_track_; }  // the topmost track drawn, -1 for none
  QSize sizeHint() const override { return {1100, 600}; }

 signals:
  void span_clicked(int track, std::uint32_t span);
  void range_selected(std::int64_t t0_ns, std::int64_t t1_ns);
  void view_changed();

 protected:
  void paintEvent(QPaintEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;  // tool tips: the span under the cursor

 private:
  double to_px(std::int64_t t_ns) const;
  std::int64_t to_ns(double x_px) const;
  double plot_width() const;
  int track_at(double y_px) const;  // -1 outside the rows
  double row_top(int track) const;
  std::int64_t span_under(int track, QPointF pos) const;
  void paint_ruler(QPainter& p);
  void paint_track(QPainter& p, int track, double top);
  void paint_marks(QPainter& p);

  std::shared_ptr<const TimelineIndex> index_;
  std::int64_t t0_ns_ = 0, t1_ns_ = 1;
  std::int32_t selected_op_ = profiler::kNone;
  std::vector<SpanRef> outliers_, hits_;
  std::optional<std::pair<std::int64_t, std::int64_t>> range_;
  std::vector<QColor> op_colors_;  // per name index + 1 (0: no op)
  std::vector<QString> labels_;
  std::vector<DrawSpan> scratch_;
  std::size_t last_drawn_ = 0;
  // Mouse: a drag that pans, or one that selects a range.
  enum class Drag { none, pan, range } drag_ = Drag::none;
  double scroll_px_ = 0;  // rows scrolled up under the ruler
  int last_first_track_ = -1;
  QPointF press_pos_;
  std::int64_t press_t0_ns_ = 0, press_t1_ns_ = 0;
  bool moved_ = false;
};

}  // namespace k3::gui
