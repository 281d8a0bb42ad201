// The Serving tab: the prefix cache's hit rate against capacity, the break-even of the hybrid against
// all-MLA with its crossings marked, a capacity plan's Pareto front (hover: each point's layout; click:
// its figures) and the claims table with the selected claim's breakdown. All four are computed in
// worker threads as the tab is built (gui/model/serving_data.h) and drawn as they arrive; a what-if edit
// re-runs the cache curve and break-even in the background, the plan on "Recompute plan".
#pragma once

#include "gui/model/serving_data.h"
#include "gui/views/chart_widget.h"

#include <QWidget>

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QStackedWidget;
class QTableView;

namespace k3::gui {

class Document;

class ServingView : public QWidget {
  Q_OBJECT
  // True while a part is being computed: --screenshot waits for it to turn false.
  Q_PROPERTY(bool busy READ busy)

 public:
  ServingView(Document* document, QWidget* parent = nullptr);

  ServingData* serving_data() { return data_; }
  bool busy() const { return data_->busy(); }  // some part is still being computed
  ChartWidget* cache_chart() { return cache_chart_; }
  ChartWidget* breakeven_chart() { return breakeven_chart_; }
  ChartWidget* plan_chart() { return plan_chart_; }
  QTableView* claims_table() { return claims_table_; }
  QString plan_choice() const;  // what the last clicked plan point is

 private:
  void show_part(ServingPart part);
  void show_breakeven_metric(int index);
  void show_plan_point(int series, int index);
  void show_claim(int row);
  void show_status(QStackedWidget* cell, QLabel* status, ServingPart part, const QString& computing);

  Document* document_;
  ServingData* data_;
  QStackedWidget *cache_cell_, *breakeven_cell_, *plan_cell_;
  QLabel *cache_status_, *breakeven_status_, *plan_status_, *plan_choice_, *claims_tally_;
  ChartWidget *cache_chart_, *breakeven_chart_, *plan_chart_;
  QComboBox* breakeven_metric_;
  QPushButton* recompute_plan_;
  QTableView* claims_table_;
  QPlainTextEdit* claim_breakdown_;
};

}  // namespace k3::gui
