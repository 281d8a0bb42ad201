// The Breakdown tab: the step's exposed time as stacked bars by layer kind, module, op kind and bound;
// memory per GPU against the usable capacity with the fits verdict and the largest batch; and the per-op
// table grouped by name across layers (gui/model/breakdown_tree_model.h), sortable, filterable and
// copyable (Ctrl+C: the selected rows as tab-separated text). Selecting a row selects its op everywhere;
// the op selected elsewhere is selected here and outlined in the bars.
#pragma once

#include <QWidget>

#include <string>

class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QSplitter;
class QTreeView;

namespace k3::gui {

class Document;
class BreakdownTreeModel;
class StackedBars;

class BreakdownView : public QWidget {
  Q_OBJECT

 public:
  BreakdownView(Document* document, QWidget* parent = nullptr);

  // For tests: what the bars say, the tree and its filter, the op of the selected row.
  QStringList bar_labels() const;
  int first_bar_center_y() const;  // in this widget's pixels
  QTreeView* tree() const { return tree_; }
  QLineEdit* filter_box() const { return filter_; }
  std::string selected_row_op() const;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;
  void showEvent(QShowEvent* event) override;

 private:
  void refresh();
  void follow_selection();
  void copy_selected_rows();

  Document* document_;
  QSplitter* splitter_ = nullptr;
  QWidget* charts_ = nullptr;
  bool sized_ = false, columns_sized_ = false;
  QLabel* heading_ = nullptr;
  StackedBars* step_bars_ = nullptr;
  StackedBars* memory_ = nullptr;
  QLabel* verdict_ = nullptr;
  QLineEdit* filter_ = nullptr;
  QTreeView* tree_ = nullptr;
  BreakdownTreeModel* model_ = nullptr;
  QSortFilterProxyModel* sorted_ = nullptr;
};

}  // namespace k3::gui
