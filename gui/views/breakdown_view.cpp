#include "gui/views/breakdown_view.h"

#include "gui/model/breakdown_bars.h"
#include "gui/model/breakdown_tree_model.h"
#include "gui/model/document.h"
#include "gui/views/stacked_bars.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>

#include <fmt/format.h>

#include <algorithm>

namespace k3::gui {
namespace {

constexpr double kGiB = double(1ull << 30);

// A time in ms with three significant figures or more ("18.2 ms", "0.512 ms").
std::string ms_text(double us) {
  const double ms = us / 1e3;
  const int decimals = ms >= 100 ? 0 : ms >= 10 ? 1 : ms >= 1 ? 2 : 3;
  return fmt::format("{:.{}f} ms", ms, decimals);
}

std::string gib_text(double bytes) { return fmt::format("{:.1f} GiB", bytes / kGiB); }

std::string context_text(long long tokens) {
  return tokens >= 1024 && tokens % 1024 == 0 ? fmt::format("{}K", tokens / 1024) : fmt::format("{}", tokens);
}

}  // namespace

BreakdownView::BreakdownView(Document* document, QWidget* parent) : QWidget(parent), document_(document) {
  auto* layout = new QVBoxLayout(this);
  splitter_ = new QSplitter(Qt::Vertical, this);
  layout->addWidget(splitter_);

  charts_ = new QWidget;
  QWidget* charts = charts_;
  auto* charts_layout = new QVBoxLayout(charts);
  heading_ = new QLabel(charts);
  heading_->setWordWrap(true);
  charts_layout->addWidget(heading_);
  step_bars_ = new StackedBars(charts);
  charts_layout->addWidget(step_bars_);
  memory_ = new StackedBars(charts);
  charts_layout->addWidget(memory_);
  verdict_ = new QLabel(charts);
  verdict_->setTextFormat(Qt::RichText);
  charts_layout->addWidget(verdict_);
  charts_layout->addStretch(1);
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(charts);
  splitter_->addWidget(scroll);

  auto* table = new QWidget;
  auto* table_layout = new QVBoxLayout(table);
  table_layout->setContentsMargins(0, 0, 0, 0);
  filter_ = new QLineEdit(table);
  filter_->setPlaceholderText("Filter ops by name (e.g. attn_decode, L004, moe)");
  filter_->setClearButtonEnabled(true);
  table_layout->addWidget(filter_);
  model_ = new BreakdownTreeModel(this);
  sorted_ = new QSortFilterProxyModel(this);
  sorted_->setSourceModel(model_);
  sorted_->setSortRole(Qt::UserRole);
  sorted_->setRecursiveFilteringEnabled(true);  // a layer's row keeps its group
  sorted_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  sorted_->setFilterKeyColumn(BreakdownTreeModel::op);
  tree_ = new QTreeView(table);
  tree_->setModel(sorted_);
  tree_->setSortingEnabled(true);
  tree_->sortByColumn(BreakdownTreeModel::total_us, Qt::DescendingOrder);
  tree_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  tree_->setSelectionBehavior(QAbstractItemView::SelectRows);
  tree_->setUniformRowHeights(true);
  tree_->setAlternatingRowColors(true);
  table_layout->addWidget(tree_);
  splitter_->addWidget(table);
  splitter_->setStretchFactor(0, 3);
  splitter_->setStretchFactor(1, 2);

  // Ctrl+C reaches the tree as a key press (item views take the Copy shortcut for the current cell).
  tree_->installEventFilter(this);
  auto* copy = new QAction("Copy rows (Ctrl+C)", tree_);
  tree_->addAction(copy);
  tree_->setContextMenuPolicy(Qt::ActionsContextMenu);
  connect(copy, &QAction::triggered, this, &BreakdownView::copy_selected_rows);
  connect(filter_, &QLineEdit::textChanged, sorted_, &QSortFilterProxyModel::setFilterFixedString);
  connect(tree_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& current) {
    if (current.isValid()) document_->select_op(model_->op_name(sorted_->mapToSource(current)));
  });
  connect(document_, &Document::prediction_changed, this, &BreakdownView::refresh);
  connect(document_, &Document::selection_changed, this, &BreakdownView::follow_selection);
  refresh();
}

void BreakdownView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (sized_) return;
  // At first show the bars get the height they need at this width, the table the rest.
  sized_ = true;
  const int charts_px = std::min(charts_->heightForWidth(width()) + 4, height() * 3 / 5);
  splitter_->setSizes({charts_px, std::max(height() - charts_px, 100)});
}

void BreakdownView::refresh() {
  const auto& p = document_->prediction();
  if (!p) {
    heading_->setText("No prediction: open a scenario or a prediction file.");
    step_bars_->set_bars({}, ms_text);
    memory_->set_bars({}, gib_text);
    verdict_->clear();
    model_->clear();
    return;
  }
  heading_->setText(
      QString("<b>Step time %1</b> (exposed, per step) — %2")
          .arg(QString::fromStdString(ms_text(p->step_us)), QString::fromStdString(p->title()).toHtmlEscaped()));
  step_bars_->set_bars(step_time_bars(*p), ms_text);
  const MemoryBar m = memory_bar(*p);
  memory_->set_bars({m.bar}, gib_text);
  memory_->set_capacity(m.usable_bytes, "usable");
  verdict_->setText(QString("<span style='color:%1'><b>%2</b></span> — largest batch at %3 context: %4")
                        .arg(m.fits ? "#107030" : "#B00020", m.fits ? "fits" : "does not fit",
                             QString::fromStdString(context_text(p->context_tokens)))
                        .arg(m.max_batch));
  model_->set_prediction(*p);
  if (!columns_sized_) {
    // Once: measuring every row on each edit would cost more than the prediction.
    columns_sized_ = true;
    tree_->header()->resizeSections(QHeaderView::ResizeToContents);
  }
  // The op column fits the longest full name, whether its group is expanded or not.
  std::size_t longest = 0;
  for (std::size_t i = 0; i < p->ops.size(); ++i) {
    if (p->ops[i].name.size() > p->ops[longest].name.size()) longest = i;
  }
  if (!p->ops.empty()) {
    const int name_px = fontMetrics().horizontalAdvance(QString::fromStdString(p->ops[longest].name));
    tree_->setColumnWidth(BreakdownTreeModel::op, name_px + 2 * tree_->indentation() + 24);
  }
  follow_selection();
}

void BreakdownView::follow_selection() {
  const auto& p = document_->prediction();
  const std::string& name = document_->selected_op();
  const int op = p ? p->find(name) : -1;
  step_bars_->set_highlight(op >= 0 ? segments_of_op(*p, op) : std::vector<std::string>{});
  if (op < 0 || selected_row_op() == name) return;
  const QModelIndex row = sorted_->mapFromSource(model_->index_of_op(name));
  if (!row.isValid()) return;  // filtered out
  const QSignalBlocker block(tree_->selectionModel());
  tree_->selectionModel()->setCurrentIndex(row, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  tree_->scrollTo(row);
  tree_->viewport()->update();
}

bool BreakdownView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == tree_ && event->type() == QEvent::KeyPress &&
      static_cast<QKeyEvent*>(event)->matches(QKeySequence::Copy)) {
    copy_selected_rows();
    return true;
  }
  return QWidget::eventFilter(watched, event);
}

void BreakdownView::copy_selected_rows() {
  QModelIndexList rows = tree_->selectionModel()->selectedRows();
  std::sort(rows.begin(), rows.end(), [this](const QModelIndex& a, const QModelIndex& b) {
    return tree_->visualRect(a).top() < tree_->visualRect(b).top();
  });
  QApplication::clipboard()->setText(rows_as_tsv(*sorted_, rows));
}

QStringList BreakdownView::bar_labels() const { return step_bars_->labels() + memory_->labels(); }

int BreakdownView::first_bar_center_y() const {
  return step_bars_->mapTo(this, QPoint(0, step_bars_->bar_center_y(0))).y();
}

std::string BreakdownView::selected_row_op() const {
  const QModelIndex current = tree_->selectionModel()->currentIndex();
  return current.isValid() ? model_->op_name(sorted_->mapToSource(current)) : "";
}

}  // namespace k3::gui
