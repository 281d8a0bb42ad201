#include "gui/views/serving_view.h"

#include "gui/model/document.h"
#include "plot/views/sim_charts.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>

#include <fmt/format.h>

#include <map>

namespace k3::gui {

namespace {

// "key=value" for each of the document's what-if edits, as `--set` takes them.
std::vector<std::string> sets_of(const Document& d) {
  std::vector<std::string> sets;
  for (const auto& [key, value] : d.edits()) sets.push_back(key + "=" + value);
  return sets;
}

// A cell: an optional header row over a status line that the chart replaces once computed.
QWidget* make_cell(QWidget* parent, QLayout* header, QStackedWidget** stack, QLabel** status, ChartWidget* chart) {
  auto* cell = new QWidget(parent);
  auto* layout = new QVBoxLayout(cell);
  layout->setContentsMargins(0, 0, 0, 0);
  if (header) layout->addLayout(header);
  *stack = new QStackedWidget(cell);
  *status = new QLabel(*stack);
  (*status)->setAlignment(Qt::AlignCenter);
  (*status)->setWordWrap(true);
  (*stack)->addWidget(*status);
  (*stack)->addWidget(chart);
  layout->addWidget(*stack, 1);
  return cell;
}

}  // namespace

ServingView::ServingView(Document* document, QWidget* parent)
    : QWidget(parent),
      document_(document),
      data_(new ServingData(document->data(), ServingFiles::defaults(document->data()), this)),
      cache_chart_(new ChartWidget),
      breakeven_chart_(new ChartWidget),
      plan_chart_(new ChartWidget) {
  auto* grid = new QGridLayout(this);

  grid->addWidget(make_cell(this, nullptr, &cache_cell_, &cache_status_, cache_chart_), 0, 0);

  auto* breakeven_header = new QHBoxLayout;
  breakeven_header->addWidget(new QLabel(tr("Break-even metric:"), this));
  breakeven_metric_ = new QComboBox(this);
  breakeven_header->addWidget(breakeven_metric_, 1);
  grid->addWidget(make_cell(this, breakeven_header, &breakeven_cell_, &breakeven_status_, breakeven_chart_), 0, 1);

  auto* plan_header = new QHBoxLayout;
  recompute_plan_ = new QPushButton(tr("Recompute plan"), this);
  recompute_plan_->setToolTip(tr("Run the capacity plan again with the current what-if edits"));
  plan_choice_ = new QLabel(tr("Hover a point for its layout; click one for its figures."), this);
  plan_choice_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  plan_header->addWidget(recompute_plan_);
  plan_header->addWidget(plan_choice_, 1);
  grid->addWidget(make_cell(this, plan_header, &plan_cell_, &plan_status_, plan_chart_), 1, 0);

  auto* claims = new QWidget(this);
  auto* claims_layout = new QVBoxLayout(claims);
  claims_layout->setContentsMargins(0, 0, 0, 0);
  claims_tally_ = new QLabel(claims);
  claims_layout->addWidget(claims_tally_);
  auto* split = new QSplitter(Qt::Vertical, claims);
  claims_table_ = new QTableView(split);
  claims_table_->setModel(data_->claims());
  claims_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  claims_table_->setSelectionMode(QAbstractItemView::SingleSelection);
  claims_table_->verticalHeader()->hide();
  claims_table_->horizontalHeader()->setStretchLastSection(true);
  claims_table_->setWordWrap(false);
  claim_breakdown_ = new QPlainTextEdit(split);
  claim_breakdown_->setReadOnly(true);
  claim_breakdown_->setLineWrapMode(QPlainTextEdit::NoWrap);
  split->addWidget(claims_table_);
  split->addWidget(claim_breakdown_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  claims_layout->addWidget(split, 1);
  grid->addWidget(claims, 1, 1);
  grid->setColumnStretch(0, 1);
  grid->setColumnStretch(1, 1);

  connect(data_, &ServingData::changed, this, &ServingView::show_part);
  connect(data_, &ServingData::plan_progress, this, [this](int done, int total) {
    plan_status_->setText(tr("Planning: %1 of %2 configurations…").arg(done).arg(total));
    recompute_plan_->setText(tr("Planning %1/%2…").arg(done).arg(total));
  });
  connect(breakeven_metric_, &QComboBox::currentIndexChanged, this, &ServingView::show_breakeven_metric);
  connect(plan_chart_, &ChartWidget::point_clicked, this, &ServingView::show_plan_point);
  connect(recompute_plan_, &QPushButton::clicked, this, [this] {
    data_->compute(ServingPart::plan);
    show_part(ServingPart::plan);
  });
  connect(claims_table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) { show_claim(current.row()); });
  connect(document_, &Document::prediction_changed, this, [this] { data_->set_edits(sets_of(*document_)); });

  data_->set_edits(sets_of(*document_));
  for (ServingPart part : kServingParts) {
    if (!data_->running(part)) data_->compute(part);
    show_part(part);
  }
}

void ServingView::show_status(QStackedWidget* cell, QLabel* status, ServingPart part, const QString& computing) {
  const std::string& error = data_->error(part);
  if (!error.empty()) {
    status->setText(tr("Could not compute: %1").arg(QString::fromStdString(error)));
    cell->setCurrentIndex(0);
  } else if (data_->running(part) && cell->currentIndex() == 0) {
    status->setText(computing);
  }
}

void ServingView::show_part(ServingPart part) {
  switch (part) {
    case ServingPart::cache_curve:
      if (const auto& c = data_->cache_curve(); c && data_->error(part).empty()) {
        cache_chart_->set_chart(plot::cache_curve_chart(c->points, c->tier, c->source, c->model));
        cache_cell_->setCurrentWidget(cache_chart_);
      }
      show_status(cache_cell_, cache_status_, part, tr("Running the request trace through the prefix cache…"));
      break;
    case ServingPart::breakeven:
      if (const auto& r = data_->breakeven(); r && data_->error(part).empty()) {
        const QString previous = breakeven_metric_->currentText();
        QSignalBlocker block(breakeven_metric_);
        breakeven_metric_->clear();
        int chosen = -1;
        for (std::size_t i = 0; i < r->curves.size(); ++i) {
          const QString name = QString::fromStdString(to_string(r->curves[i].metric));
          breakeven_metric_->addItem(name);
          // The metric shown before, else the first with a crossing.
          if (name == previous || (chosen < 0 && previous.isEmpty() && !r->curves[i].crossings.empty())) {
            chosen = int(i);
          }
        }
        breakeven_metric_->setCurrentIndex(std::max(chosen, 0));
        show_breakeven_metric(breakeven_metric_->currentIndex());
        breakeven_cell_->setCurrentWidget(breakeven_chart_);
      }
      show_status(breakeven_cell_, breakeven_status_, part, tr("Solving the break-even…"));
      break;
    case ServingPart::plan:
      if (const auto& r = data_->plan(); r && data_->error(part).empty() && !data_->running(part)) {
        plan_chart_->set_chart(plot::pareto_chart(*r), plot::pareto_point_labels(*r));
        plan_cell_->setCurrentWidget(plan_chart_);
      }
      recompute_plan_->setEnabled(!data_->running(part));
      if (!data_->running(part)) recompute_plan_->setText(tr("Recompute plan"));
      show_status(plan_cell_, plan_status_, part, tr("Planning…"));
      break;
    case ServingPart::claims: {
      const std::string& error = data_->error(part);
      const auto& results = data_->claims()->results();
      if (!error.empty()) {
        claims_tally_->setText(tr("Could not check the claims: %1").arg(QString::fromStdString(error)));
      } else if (results.empty()) {
        claims_tally_->setText(tr("Checking the published claims…"));
      } else {
        std::map<Verdict, int> tally;
        for (const ClaimResult& r : results) ++tally[r.verdict];
        claims_tally_->setText(QString::fromStdString(
            fmt::format("Claims (k3perf verify): {} reproduced, {} explained, {} contradicted, {} not modelled of {}",
                        tally[Verdict::reproduced], tally[Verdict::explained], tally[Verdict::contradicted],
                        tally[Verdict::not_modelled], results.size())));
        claims_table_->resizeColumnsToContents();
        claims_table_->resizeRowsToContents();
        if (!claims_table_->currentIndex().isValid()) claims_table_->selectRow(0);
      }
      break;
    }
  }
}

void ServingView::show_breakeven_metric(int index) {
  const auto& r = data_->breakeven();
  if (!r || index < 0 || index >= int(r->curves.size())) return;
  breakeven_chart_->set_chart(plot::breakeven_chart(*r, r->curves[std::size_t(index)]));
}

void ServingView::show_plan_point(int series, int index) {
  const auto& r = data_->plan();
  if (!r) return;
  const std::vector<std::size_t>& rows = series == 0 ? r->ranked : r->pareto;
  if (index < 0 || index >= int(rows.size())) return;
  const plan::Candidate& c = r->candidates[rows[std::size_t(index)]];
  plan_chart_->set_highlight(series, index);
  plan_choice_->setText(QString::fromStdString(fmt::format(
      "{}: {} GPUs, {:.2f} $/hour, TTFT {:.0f} ms, TPOT {:.1f} ms, {:.1f} tok/s/GPU, {:.1f} tok/s/user", c.label(),
      c.gpus, c.dollars_per_hour, c.ttft_ms, c.tpot_ms, c.tokens_per_s_per_gpu, c.tokens_per_s_per_user)));
}

QString ServingView::plan_choice() const { return plan_choice_->text(); }

void ServingView::show_claim(int row) {
  if (row < 0 || row >= data_->claims()->rowCount()) {
    claim_breakdown_->clear();
    return;
  }
  claim_breakdown_->setPlainText(data_->claims()->breakdown(row));
}

}  // namespace k3::gui
