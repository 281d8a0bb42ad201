// The Timeline tab: the trace's steps, ops and kernels over time beside the predicted ops (TimelineCanvas), a
// search box, the step → layer → op → kernel tree, the statistics of the selected range and the selected op's
// duration distribution. Clicking a span or a tree row selects its op in the Document; every part highlights it.
#pragma once

#include "gui/model/timeline_index.h"
#include "gui/model/timeline_stats.h"

#include <QWidget>

#include <memory>

class QLabel;
class QLineEdit;
class QTreeView;

namespace k3::gui {

class Document;
class TimelineCanvas;
class TimelineDistribution;
class TimelineTreeModel;

class TimelineView : public QWidget {
  Q_OBJECT

 public:
  TimelineView(Document* document, QWidget* parent = nullptr);

  TimelineCanvas* canvas() const { return canvas_; }
  QLineEdit* search_box() const { return search_; }
  const TimelineTreeModel* tree_model() const { return tree_model_; }
  QString stats_text() const;    // the range statistics panel, as plain text
  QString search_count() const;  // "12 matches"
  const TimelineDistribution* distribution() const { return distribution_; }
  std::shared_ptr<const TimelineIndex> index() const { return index_; }

 private:
  void rebuild_index();
  void refresh_prediction();
  void show_selection();
  void show_range(std::int64_t t0_ns, std::int64_t t1_ns, const QString& title);
  void run_search();
  void jump_to_next_hit();

  Document* document_;
  std::shared_ptr<TimelineIndex> index_;
  TimelineCanvas* canvas_ = nullptr;
  QLineEdit* search_ = nullptr;
  QLabel* search_count_ = nullptr;
  QTreeView* tree_ = nullptr;
  TimelineTreeModel* tree_model_ = nullptr;
  QLabel* stats_ = nullptr;
  TimelineDistribution* distribution_ = nullptr;
  SearchResult hits_;
  std::size_t next_hit_ = 0;
};

}  // namespace k3::gui
