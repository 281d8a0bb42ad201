#include "gui/views/whatif_panel.h"

#include "gui/model/baseline_delta.h"
#include "gui/model/document.h"

#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

#include <fmt/format.h>

#include <algorithm>

namespace k3::gui {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// How a summary value reads in its unit.
std::string summary_value(const SummaryDelta& s, double value) {
  if (s.unit == "ms") return fmt::format("{:.3f} ms", value);
  if (s.unit == "GiB") return fmt::format("{:.1f} GiB", value);
  return fmt::format("{:.0f} {}", value, s.unit);
}

QLabel* error_label(QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setWordWrap(true);
  label->setStyleSheet("color: #b00020;");
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  label->hide();
  return label;
}

}  // namespace

WhatifPanel::WhatifPanel(Document* document, QWidget* parent)
    : QWidget(parent), document_(document), fields_(scenario_fields(document->data())) {
  auto* layout = new QVBoxLayout(this);
  std::map<std::string, QGridLayout*> groups;
  for (const ScenarioField& f : fields_) {
    QGridLayout*& grid = groups[f.group];
    if (!grid) {
      auto* box = new QGroupBox(q(f.group), this);
      grid = new QGridLayout(box);
      grid->setColumnStretch(1, 1);
      layout->addWidget(box);
    }
    FieldWidgets w{f};
    QWidget* box = grid->parentWidget();
    w.label = new QLabel(q(f.label), box);
    w.editor = make_editor(f);
    w.editor->setParent(box);
    w.error = error_label(box);
    const int row = grid->rowCount();
    grid->addWidget(w.label, row, 0);
    grid->addWidget(w.editor, row, 1);
    grid->addWidget(w.error, row + 1, 0, 1, 2);
    widgets_.emplace(f.key, w);
  }
  // One label column width for every group, so the editors line up.
  int label_px = 0;
  for (const auto& [key, w] : widgets_) label_px = std::max(label_px, w.label->sizeHint().width());
  for (const auto& [group, grid] : groups) grid->setColumnMinimumWidth(0, label_px);
  other_error_ = error_label(this);
  layout->addWidget(other_error_);

  auto* baseline = new QGroupBox("Baseline", this);
  auto* baseline_layout = new QVBoxLayout(baseline);
  auto* buttons = new QHBoxLayout;
  pin_ = new QPushButton("Pin baseline", baseline);
  clear_baseline_ = new QPushButton("Clear", baseline);
  buttons->addWidget(pin_);
  buttons->addWidget(clear_baseline_);
  buttons->addStretch(1);
  baseline_layout->addLayout(buttons);
  baseline_origin_ = new QLabel(baseline);
  baseline_origin_->setWordWrap(true);
  baseline_layout->addWidget(baseline_origin_);
  summary_ = new QGridLayout;
  const char* headers[] = {"", "Baseline", "Current", "Change"};
  for (int c = 0; c < 4; ++c) {
    auto* h = new QLabel(QString("<b>%1</b>").arg(headers[c]), baseline);
    summary_->addWidget(h, 0, c, c == 0 ? Qt::AlignLeft : Qt::AlignRight);
  }
  for (int r = 1; r <= 3; ++r) {
    for (int c = 0; c < 4; ++c) {
      auto* cell = new QLabel(baseline);
      summary_->addWidget(cell, r, c, c == 0 ? Qt::AlignLeft : Qt::AlignRight);
      summary_cells_.push_back(cell);
    }
  }
  baseline_layout->addLayout(summary_);
  baseline_model_ = new BaselineDeltaModel(this);
  auto* sorted = new QSortFilterProxyModel(this);
  sorted->setSourceModel(baseline_model_);
  sorted->setSortRole(Qt::UserRole);
  deltas_ = new QTableView(baseline);
  deltas_->setModel(sorted);
  deltas_->setSortingEnabled(true);
  deltas_->sortByColumn(-1, Qt::AscendingOrder);  // the model's order until a header is clicked
  deltas_->verticalHeader()->hide();
  deltas_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  deltas_->setSelectionBehavior(QAbstractItemView::SelectRows);
  deltas_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  deltas_->setMinimumHeight(260);
  // The dock is narrow: the table shows the changes, each row's tooltip the two times.
  deltas_->setColumnHidden(BaselineDeltaModel::baseline_us, true);
  deltas_->setColumnHidden(BaselineDeltaModel::current_us, true);
  deltas_->horizontalHeader()->setStretchLastSection(true);
  baseline_layout->addWidget(deltas_);
  layout->addWidget(baseline);
  layout->addStretch(1);

  connect(pin_, &QPushButton::clicked, document_, &Document::pin_baseline);
  connect(clear_baseline_, &QPushButton::clicked, document_, &Document::clear_baseline);
  connect(document_, &Document::prediction_changed, this, [this] {
    refresh_fields();
    refresh_baseline();
  });
  connect(document_, &Document::baseline_changed, this, &WhatifPanel::refresh_baseline);
  connect(document_, &Document::selection_changed, this, &WhatifPanel::refresh_baseline);
  refresh_fields();
  refresh_baseline();
}

QWidget* WhatifPanel::make_editor(const ScenarioField& field) {
  if (field.kind == FieldKind::boolean) {
    auto* box = new QCheckBox;
    connect(box, &QCheckBox::clicked, this, [this, field](bool on) { apply(field, on ? "true" : "false"); });
    return box;
  }
  auto* combo = new QComboBox;
  // Narrow enough for the dock; long names elide.
  combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  combo->setMinimumContentsLength(8);
  for (const std::string& c : field.choices) combo->addItem(q(c));
  combo->setToolTip(q(field.key));
  connect(combo, &QComboBox::activated, this,
          [this, field, combo](int index) { apply(field, combo->itemText(index).toStdString()); });
  if (field.kind == FieldKind::integer) {
    // Any text: the reader decides what is valid and says why not.
    combo->setEditable(true);
    combo->setInsertPolicy(QComboBox::NoInsert);
    connect(combo->lineEdit(), &QLineEdit::editingFinished, this,
            [this, field, combo] { apply(field, combo->currentText().trimmed().toStdString()); });
  }
  return combo;
}

void WhatifPanel::apply(const ScenarioField& field, const std::string& value) {
  if (value == shown_value(field, *document_) && document_->error().empty()) return;
  for (const auto& [key, v] : edits_for(field, value, fields_, *document_)) document_->set_edit(key, v);
}

void WhatifPanel::refresh_fields() {
  values_.refresh(*document_);
  const std::string phase = values_.shown(widgets_.at("phase").field, *document_);
  const std::string& error = document_->error();
  bool error_placed = error.empty();
  for (auto& [key, w] : widgets_) {
    const ScenarioField& f = w.field;
    const bool visible = f.applies_to(phase) && (!f.only_if_in_scenario || !document_->value_of(f.key).empty());
    w.label->setVisible(visible);
    w.editor->setVisible(visible);
    w.editor->setEnabled(document_->has_scenario());
    const std::string value = values_.shown(f, *document_);
    if (auto* box = qobject_cast<QCheckBox*>(w.editor)) {
      const QSignalBlocker block(box);
      box->setChecked(is_true(value));
    } else if (auto* combo = qobject_cast<QComboBox*>(w.editor)) {
      const QSignalBlocker block(combo);
      if (combo->isEditable()) {
        combo->setEditText(q(value));
      } else {
        if (combo->findText(q(value)) < 0) combo->addItem(q(value));  // a path, or a name not in the folder
        combo->setCurrentIndex(combo->findText(q(value)));
      }
    }
    const bool here = !error.empty() && key == document_->error_key() && visible;
    w.error->setText(here ? q(error) : QString());
    w.error->setVisible(here);
    error_placed = error_placed || here;
  }
  other_error_->setText(error_placed ? QString() : q(error));
  other_error_->setVisible(!error_placed);
}

void WhatifPanel::refresh_baseline() {
  const auto& base = document_->baseline();
  const auto& now = document_->prediction();
  pin_->setEnabled(now.has_value());
  clear_baseline_->setEnabled(base.has_value());
  const bool shown = base && now;
  deltas_->setVisible(shown);
  for (QLabel* cell : summary_cells_) cell->clear();
  for (int c = 0; c < 4; ++c) summary_->itemAtPosition(0, c)->widget()->setVisible(shown);
  if (!shown) {
    baseline_origin_->setText("Pin the current scenario to compare what-ifs against it.");
    baseline_model_->clear();
    return;
  }
  baseline_origin_->setText("Baseline: " + q(base->title()));
  const std::vector<SummaryDelta> summary = summary_deltas(*base, *now);
  for (std::size_t r = 0; r < summary.size(); ++r) {
    const SummaryDelta& s = summary[r];
    summary_cells_[r * 4 + 0]->setText(q(s.metric));
    summary_cells_[r * 4 + 1]->setText(q(summary_value(s, s.baseline)));
    summary_cells_[r * 4 + 2]->setText(q(summary_value(s, s.current)));
    summary_cells_[r * 4 + 3]->setText(q(percent_text(s.delta_percent())));
  }
  baseline_model_->set_predictions(*base, *now);
  deltas_->resizeColumnsToContents();
  // The kind of the op selected elsewhere.
  const int op = now->find(document_->selected_op());
  if (op >= 0) {
    const auto* sorted = static_cast<const QSortFilterProxyModel*>(deltas_->model());
    for (int row = 0; row < baseline_model_->rowCount(); ++row) {
      if (baseline_model_->rows()[static_cast<std::size_t>(row)].kind == now->ops[static_cast<std::size_t>(op)].kind) {
        deltas_->selectRow(sorted->mapFromSource(baseline_model_->index(row, 0)).row());
      }
    }
  }
}

QSize WhatifPanel::sizeHint() const {
  // Wide enough for the baseline table's five columns without scrolling.
  const QSize hint = QWidget::sizeHint();
  return {std::max(hint.width(), fontMetrics().averageCharWidth() * 62), hint.height()};
}

QWidget* WhatifPanel::editor(const std::string& key) const {
  auto it = widgets_.find(key);
  return it == widgets_.end() ? nullptr : it->second.editor;
}

QString WhatifPanel::error_text(const std::string& key) const {
  auto it = widgets_.find(key);
  return it == widgets_.end() || it->second.error->isHidden() ? QString() : it->second.error->text();
}

QString WhatifPanel::baseline_summary_text() const {
  QStringList rows;
  for (std::size_t r = 0; r < summary_cells_.size() / 4; ++r) {
    QStringList cells;
    for (std::size_t c = 0; c < 4; ++c) cells << summary_cells_[r * 4 + c]->text();
    rows << cells.join(" | ");
  }
  return rows.join("\n");
}

}  // namespace k3::gui
