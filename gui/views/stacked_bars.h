// Horizontal stacked bars drawn with QPainter: per bar a title with its total, the bar split into its
// segments (largest first, named inside when the name fits), and a legend of every segment with its value
// and share. Optionally a capacity line the bars are scaled against (memory against usable HBM), and one
// highlighted segment per bar (the one holding the selected op). Hovering a segment shows it as a tooltip.
#pragma once

#include "gui/model/breakdown_bars.h"

#include <QWidget>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace k3::gui {

class StackedBars : public QWidget {
  Q_OBJECT

 public:
  using Format = std::function<std::string(double)>;  // a value as it reads: "12.3 ms"
  explicit StackedBars(QWidget* parent = nullptr);

  void set_bars(std::vector<Bar> bars, Format format);
  // Scales every bar against `capacity` (when larger than the bar) and draws a line there, labelled.
  void set_capacity(std::optional<double> capacity, const std::string& label);
  void set_highlight(std::vector<std::string> segment_per_bar);  // "" for none

  // Every text drawn inside the bars and in the legends, for tests.
  QStringList labels() const;
  int bar_center_y(int bar) const;  // pixels from the widget's top

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;  // tooltips

 private:
  enum class Part { title, total, segment, name, legend };
  struct Placed {
    Part part;
    int bar = 0, segment = -1;
    QRectF rect;
    QString text;
  };
  // Where everything goes at `width`: titles, segments, in-bar names and legend entries. Cached for the
  // last width: the layout system asks for heightForWidth many times per update.
  const std::vector<Placed>& layout_at(int width, int* height) const;
  void changeEvent(QEvent* event) override;  // a new font invalidates the layout

  std::vector<Bar> bars_;
  Format format_;
  std::optional<double> capacity_;
  std::string capacity_label_;
  std::vector<std::string> highlight_;
  mutable int cached_width_ = -1, cached_height_ = 0;
  mutable std::vector<Placed> cached_;
};

// The chart colours (Okabe-Ito, safe for colour-blind readers), by segment index.
QColor segment_color(int index);

}  // namespace k3::gui
