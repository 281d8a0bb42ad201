#include "gui/views/compare_view.h"

#include "core/error.h"
#include "gui/model/compare_data.h"
#include "gui/model/compare_format.h"
#include "gui/model/compare_group_model.h"
#include "gui/model/compare_leftover_model.h"
#include "gui/model/compare_op_model.h"
#include "gui/model/compare_summary.h"
#include "gui/model/document.h"

#include <QComboBox>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

namespace k3::gui {
namespace {

const char* const kNoComparison =
    "No comparison yet.\n\n"
    "Open a trace together with its prediction (File → Open the pred_*.json, then the trace_*.json.gz, or "
    "File → Open folder on a run's folder holding both),\n"
    "or open a comparison written by `k3perf compare --prediction P --trace T --json compare.json`.\n\n"
    "The Profile tab records a trace on this machine's GPU and opens it here.";

QTableView* make_table(QAbstractItemModel* model, QWidget* parent) {
  auto* table = new QTableView(parent);
  table->setModel(model);
  table->setSortingEnabled(true);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->setSelectionMode(QAbstractItemView::SingleSelection);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setAlternatingRowColors(true);
  table->setWordWrap(false);
  table->verticalHeader()->setVisible(false);
  table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
  table->horizontalHeader()->setHighlightSections(false);
  return table;
}

// A sorting proxy over a group or leftover model (they sort by compare::kSortRole).
QSortFilterProxyModel* sorted(QAbstractItemModel* source, QObject* parent) {
  auto* proxy = new QSortFilterProxyModel(parent);
  proxy->setSourceModel(source);
  proxy->setSortRole(compare::kSortRole);
  return proxy;
}

QWidget* boxed(const QString& title, QWidget* content, QWidget* parent) {
  auto* box = new QGroupBox(title, parent);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(content);
  return box;
}

}  // namespace

CompareView::CompareView(Document* document, QWidget* parent) : QWidget(parent), document_(document) {
  pages_ = new QStackedWidget(this);
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->addWidget(pages_);

  message_ = new QLabel(pages_);
  message_->setAlignment(Qt::AlignCenter);
  message_->setWordWrap(true);
  message_->setTextFormat(Qt::PlainText);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  pages_->addWidget(message_);

  auto* page = new QWidget(pages_);
  auto* layout = new QVBoxLayout(page);
  summary_ = new QLabel(page);
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::PlainText);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(summary_);

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel("Filter:", page));
  filter_ = new QLineEdit(page);
  filter_->setPlaceholderText("op name, kind or bound");
  filter_->setClearButtonEnabled(true);
  controls->addWidget(filter_, 1);
  controls->addSpacing(16);
  controls->addWidget(new QLabel("Rank by:", page));
  rank_ = new QComboBox(page);
  rank_->addItem("|error µs|: time the prediction misses");
  rank_->addItem("|error %|: relative miss");
  controls->addWidget(rank_);
  layout->addLayout(controls);

  op_model_ = new CompareOpModel(this);
  op_proxy_ = new CompareOpProxy(op_model_, this);
  kind_model_ = new CompareGroupModel(CompareGroupModel::Groups::by_kind, this);
  step_model_ = new CompareGroupModel(CompareGroupModel::Groups::by_step, this);
  leftover_model_ = new CompareLeftoverModel(this);

  auto* split = new QSplitter(Qt::Vertical, page);
  op_table_ = make_table(op_proxy_, split);
  split->addWidget(op_table_);
  auto* bottom = new QSplitter(Qt::Horizontal, split);
  kind_table_ = make_table(sorted(kind_model_, this), bottom);
  bottom->addWidget(boxed("By op kind", kind_table_, bottom));
  // The steps and the leftovers share the other half: each is a long, narrow list.
  auto* more = new QTabWidget(bottom);
  leftover_table_ = make_table(sorted(leftover_model_, this), more);
  step_table_ = make_table(sorted(step_model_, this), more);
  more->addTab(leftover_table_, "Left over by the join");
  more->addTab(step_table_, "By step: sums over the measured ops");
  bottom->addWidget(more);
  bottom->setStretchFactor(0, 5);
  bottom->setStretchFactor(1, 4);
  split->addWidget(bottom);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);
  pages_->addWidget(page);

  connect(filter_, &QLineEdit::textChanged, op_proxy_, &CompareOpProxy::set_filter_text);
  connect(rank_, &QComboBox::currentIndexChanged, this, [this](int index) {
    op_proxy_->rank_by(index == 0 ? CompareOpProxy::Rank::abs_error_us : CompareOpProxy::Rank::abs_error_percent);
    op_table_->horizontalHeader()->setSortIndicator(op_proxy_->sortColumn(), op_proxy_->sortOrder());
  });
  connect(op_table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& i) {
    if (i.isValid()) document_->select_op(op_model_->op(op_proxy_->mapToSource(i).row()).name);
  });
  connect(leftover_table_, &QTableView::clicked, this, [this](const QModelIndex& i) {
    const auto* proxy = static_cast<const QSortFilterProxyModel*>(leftover_table_->model());
    const std::string& op = leftover_model_->row(proxy->mapToSource(i).row()).op;
    if (!op.empty()) document_->select_op(op);
  });
  connect(document_, &Document::comparison_changed, this, &CompareView::on_comparison_changed);
  connect(document_, &Document::selection_changed, this, &CompareView::on_selection_changed);
  on_comparison_changed();
}

bool CompareView::showing_comparison() const { return pages_->currentIndex() == 1; }
QString CompareView::message_text() const { return message_->text(); }
QString CompareView::summary_text() const { return summary_->text(); }

void CompareView::show_message(const QString& text) {
  data_.reset();
  for (auto* m : {kind_model_, step_model_}) m->set_comparison(nullptr);
  op_model_->set_comparison(nullptr);
  leftover_model_->set_comparison(nullptr);
  message_->setText(text);
  pages_->setCurrentIndex(0);
}

void CompareView::on_comparison_changed() {
  const auto& json = document_->comparison();
  if (!json) {
    show_message(kNoComparison);
    return;
  }
  try {
    data_ = std::make_shared<const CompareData>(compare_from_json(*json, document_->comparison_origin()));
  } catch (const Error& e) {
    show_message(QString("The comparison cannot be shown:\n%1").arg(e.what()));
    return;
  }
  op_model_->set_comparison(data_);
  kind_model_->set_comparison(data_);
  step_model_->set_comparison(data_);
  leftover_model_->set_comparison(data_);
  summary_->setText(QString("comparison: %1\nprediction: %2\n%3")
                        .arg(QString::fromStdString(document_->comparison_origin()),
                             QString::fromStdString(data_->prediction_origin), summary_lines(*data_).join("\n")));
  op_table_->horizontalHeader()->setSortIndicator(op_proxy_->sortColumn(), op_proxy_->sortOrder());
  kind_table_->sortByColumn(kind_model_->column_of(CompareGroupModel::Column::error_us), Qt::DescendingOrder);
  step_table_->sortByColumn(0, Qt::AscendingOrder);
  leftover_table_->sortByColumn(CompareLeftoverModel::what_column, Qt::AscendingOrder);
  // Fitting the columns costs tens of ms: once per comparison source, not on each what-if re-comparison of it.
  if (document_->comparison_origin() != sized_for_) {
    for (QTableView* t : {op_table_, kind_table_, step_table_, leftover_table_}) t->resizeColumnsToContents();
    sized_for_ = document_->comparison_origin();
  }
  pages_->setCurrentIndex(1);
  on_selection_changed();
}

void CompareView::on_selection_changed() {
  op_model_->set_selected_op(document_->selected_op());
  const int row = op_model_->row_of(document_->selected_op());
  const QModelIndex index = row < 0 ? QModelIndex() : op_proxy_->mapFromSource(op_model_->index(row, 0));
  QItemSelectionModel* selection = op_table_->selectionModel();
  if (!index.isValid()) {
    selection->clearSelection();
    return;
  }
  if (selection->currentIndex().row() == index.row() && selection->isRowSelected(index.row())) return;
  selection->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  op_table_->scrollTo(index);
}

}  // namespace k3::gui
