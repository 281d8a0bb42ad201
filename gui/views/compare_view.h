// The Compare tab: a comparison of prediction and measurement (Document::comparison(), `k3perf compare
// --json`): the summary, the per-op table ranked by |error µs| or |error %| and filterable, the per-kind
// and per-step sums, and what the join left over. Selecting a row selects its op everywhere; the selected
// op is highlighted. Without a comparison it says how to get one.
#pragma once

#include <QWidget>

#include <memory>
#include <string>

class QComboBox;
class QLabel;
class QLineEdit;
class QStackedWidget;
class QTableView;

namespace k3::gui {

class Document;
struct CompareData;
class CompareGroupModel;
class CompareLeftoverModel;
class CompareOpModel;
class CompareOpProxy;

class CompareView : public QWidget {
  Q_OBJECT

 public:
  CompareView(Document* document, QWidget* parent = nullptr);

  // For tests: what the view shows.
  bool showing_comparison() const;
  QString message_text() const;
  QString summary_text() const;
  QTableView* op_table() const { return op_table_; }
  QTableView* kind_table() const { return kind_table_; }
  QTableView* step_table() const { return step_table_; }
  QTableView* leftover_table() const { return leftover_table_; }
  QLineEdit* filter() const { return filter_; }
  QComboBox* rank() const { return rank_; }

 private:
  void on_comparison_changed();
  void on_selection_changed();
  void show_message(const QString& text);

  Document* document_;
  std::shared_ptr<const CompareData> data_;
  std::string sized_for_;  // the comparison origin the columns were last fitted to
  QStackedWidget* pages_;
  QLabel* message_;
  QLabel* summary_;
  QLineEdit* filter_;
  QComboBox* rank_;
  CompareOpModel* op_model_;
  CompareOpProxy* op_proxy_;
  CompareGroupModel* kind_model_;
  CompareGroupModel* step_model_;
  CompareLeftoverModel* leftover_model_;
  QTableView* op_table_;
  QTableView* kind_table_;
  QTableView* step_table_;
  QTableView* leftover_table_;
};

}  // namespace k3::gui
