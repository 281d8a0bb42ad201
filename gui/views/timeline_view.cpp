#include "gui/views/timeline_view.h"

#include "gui/model/document.h"
#include "gui/model/timeline_format.h"
#include "gui/model/timeline_tree_model.h"
#include "gui/views/timeline_canvas.h"
#include "gui/views/timeline_distribution.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>

namespace k3::gui {
namespace {
QString dur(double ns) { return QString::fromStdString(format_duration_ns(ns)); }
}  // namespace

TimelineView::TimelineView(Document* document, QWidget* parent) : QWidget(parent), document_(document) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  auto* bar = new QHBoxLayout;
  search_ = new QLineEdit(this);
  search_->setPlaceholderText("Search kernels and ops (Enter: next match)");
  search_->setClearButtonEnabled(true);
  search_->setMinimumWidth(320);
  search_count_ = new QLabel(this);
  auto* keys = new QLabel(
      "W/S zoom · A/D pan · wheel zooms at the cursor · drag pans · shift-drag selects a range · 0 shows all · "
      "↑/↓ scroll tracks",
      this);
  keys->setStyleSheet("color: #555");
  bar->addWidget(search_);
  bar->addWidget(search_count_);
  bar->addStretch(1);
  bar->addWidget(keys);
  layout->addLayout(bar);

  auto* split = new QSplitter(Qt::Horizontal, this);
  canvas_ = new TimelineCanvas(split);
  auto* side = new QSplitter(Qt::Vertical, split);
  tree_ = new QTreeView(side);
  tree_model_ = new TimelineTreeModel(this);
  tree_->setModel(tree_model_);
  tree_->setUniformRowHeights(true);
  tree_->header()->setStretchLastSection(false);
  tree_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  tree_->header()->setSectionResizeMode(TimelineTreeModel::name_column, QHeaderView::Stretch);
  tree_->hideColumn(TimelineTreeModel::start_column);  // the canvas shows where; the tool tip says when
  stats_ = new QLabel(side);
  stats_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  stats_->setTextFormat(Qt::RichText);
  stats_->setMargin(6);
  stats_->setWordWrap(true);
  distribution_ = new TimelineDistribution(side);
  side->addWidget(tree_);
  side->addWidget(stats_);
  side->addWidget(distribution_);
  side->setStretchFactor(0, 3);
  side->setStretchFactor(1, 2);
  side->setStretchFactor(2, 1);
  split->addWidget(canvas_);
  split->addWidget(side);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  split->setSizes({1000, 560});
  layout->addWidget(split, 1);

  connect(document_, &Document::trace_changed, this, &TimelineView::rebuild_index);
  connect(document_, &Document::prediction_changed, this, &TimelineView::refresh_prediction);
  connect(document_, &Document::selection_changed, this, &TimelineView::show_selection);
  connect(canvas_, &TimelineCanvas::span_clicked, this, [this](int track, std::uint32_t span) {
    const SpanInfo s = index_->info(track, span);
    if (index_->tracks()[static_cast<std::size_t>(track)].kind == TrackKind::steps) {
      canvas_->set_view(s.start_ns, s.end_ns);  // a step: show it whole
    } else if (!s.op.empty()) {
      document_->select_op(s.op);
    }
  });
  connect(canvas_, &TimelineCanvas::range_selected, this,
          [this](std::int64_t t0, std::int64_t t1) { show_range(t0, t1, "Selected range"); });
  connect(tree_, &QTreeView::clicked, this, [this](const QModelIndex& i) {
    const auto start = tree_model_->data(i, TimelineTreeModel::kStartNsRole).toLongLong();
    const auto end = tree_model_->data(i, TimelineTreeModel::kEndNsRole).toLongLong();
    const std::int64_t margin = std::max<std::int64_t>(500, (end - start) / 4);
    canvas_->set_view(start - margin, end + margin);
    const QString op = tree_model_->data(i, TimelineTreeModel::kOpRole).toString();
    if (!op.isEmpty()) document_->select_op(op.toStdString());
  });
  connect(search_, &QLineEdit::textChanged, this, &TimelineView::run_search);
  connect(search_, &QLineEdit::returnPressed, this, &TimelineView::jump_to_next_hit);
  rebuild_index();
}

void TimelineView::rebuild_index() {
  const auto& prediction = document_->prediction();
  index_ = document_->trace_ptr()
               ? std::make_shared<TimelineIndex>(document_->trace_ptr(), prediction ? &*prediction : nullptr)
               : nullptr;
  canvas_->set_index(index_);
  tree_model_->set_index(index_, prediction ? &*prediction : nullptr);
  if (index_) {
    show_range(index_->begin_ns(), index_->end_ns() + 1, "Whole trace");
  } else {
    stats_->setText("No trace: open one with File → Open…");
  }
  run_search();
  show_selection();
}

void TimelineView::refresh_prediction() {
  if (!index_) return;
  const auto& prediction = document_->prediction();
  index_->set_prediction(prediction ? &*prediction : nullptr);
  canvas_->set_index(index_, true);
  tree_model_->set_index(index_, prediction ? &*prediction : nullptr);
  show_selection();
}

void TimelineView::show_selection() {
  const std::string& op = document_->selected_op();
  OpDistribution d = index_ && !op.empty() ? op_distribution(*index_, op) : OpDistribution{};
  d.op = op;
  canvas_->set_selected_op(op, d.outliers);
  const QModelIndex row = tree_model_->find_op(op, canvas_->view_t0_ns());
  if (row.isValid()) {
    tree_->setCurrentIndex(row);
    tree_->scrollTo(row);
  }
  distribution_->set_distribution(std::move(d));
}

void TimelineView::show_range(std::int64_t t0_ns, std::int64_t t1_ns, const QString& title) {
  const RangeStats r = range_stats(*index_, t0_ns, t1_ns);
  const double range_ns = static_cast<double>(t1_ns - t0_ns) * std::max(1, r.devices);
  QString html =
      QStringLiteral(
          "<b>%1</b>: %2 from %3<br>%4 kernels · %5 copies · %6 sets<br>"
          "GPU busy %7 (%8 %) · idle %9")
          .arg(title, dur(static_cast<double>(t1_ns - t0_ns)), dur(static_cast<double>(t0_ns - index_->begin_ns())))
          .arg(r.kernels)
          .arg(r.memcpys)
          .arg(r.memsets)
          .arg(dur(static_cast<double>(r.busy_ns)))
          .arg(100.0 * static_cast<double>(r.busy_ns) / range_ns, 0, 'f', 1)
          .arg(dur(static_cast<double>(r.idle_ns)));
  html +=
      "<table cellspacing=0 cellpadding=1><tr><th align=left>op kind</th><th align=right>GPU time</th>"
      "<th align=right>share</th><th align=right>events</th></tr>";
  for (const KindTime& k : r.by_kind) {
    html +=
        QStringLiteral("<tr><td>%1</td><td align=right>%2</td><td align=right>%3 %</td><td align=right>%4</td></tr>")
            .arg(QString::fromStdString(k.kind), dur(static_cast<double>(k.gpu_ns)))
            .arg(r.gpu_ns ? 100.0 * static_cast<double>(k.gpu_ns) / static_cast<double>(r.gpu_ns) : 0.0, 0, 'f', 1)
            .arg(k.events);
  }
  stats_->setText(html + "</table>");
}

QString TimelineView::stats_text() const {
  QString plain = stats_->text();
  plain.replace("<br>", "\n").replace("</tr>", "\n").replace("</td>", " ").replace("</th>", " ");
  plain.remove(QRegularExpression("<[^>]*>"));
  return plain;
}

QString TimelineView::search_count() const { return search_count_->text(); }

void TimelineView::run_search() {
  hits_ = index_ && search_->text().size() >= 2 ? search(*index_, search_->text().toStdString()) : SearchResult{};
  next_hit_ = 0;
  search_count_->setText(search_->text().size() >= 2 ? QStringLiteral("%1 matches").arg(hits_.total) : QString());
  canvas_->set_search_hits(hits_.hits);
}

void TimelineView::jump_to_next_hit() {
  if (hits_.hits.empty()) return;
  // Enter walks through the hits in time order, centring each one at the current zoom.
  const SpanRef h = hits_.hits[next_hit_++ % hits_.hits.size()];
  const TimelineTrack& t = index_->tracks()[static_cast<std::size_t>(h.track)];
  const std::int64_t width = canvas_->view_t1_ns() - canvas_->view_t0_ns();
  const std::int64_t mid = t.start_ns[h.span] + (t.end_ns[h.span] - t.start_ns[h.span]) / 2;
  canvas_->set_view(mid - width / 2, mid + width / 2);
  const std::string op = index_->info(h.track, h.span).op;
  if (!op.empty()) document_->select_op(op);
}

}  // namespace k3::gui
