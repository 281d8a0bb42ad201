// The what-if editor docked beside the views: one editor per scenario field (gui/model/scenario_fields.h),
// each edit a `--set` through the Document, predicted at once. The library's message for an edit that
// does not read shows in red under the field it names. Below: Pin baseline and the current scenario
// against the baseline (step time, throughput, memory per GPU, per-op-kind deltas).
#pragma once

#include "gui/model/scenario_fields.h"

#include <QWidget>

#include <map>
#include <string>
#include <vector>

class QLabel;
class QGridLayout;
class QPushButton;
class QTableView;

namespace k3::gui {

class Document;
class BaselineDeltaModel;

class WhatifPanel : public QWidget {
  Q_OBJECT

 public:
  WhatifPanel(Document* document, QWidget* parent = nullptr);
  QSize sizeHint() const override;

  // For tests and the screenshot: the editor of a key (QComboBox or QCheckBox), the red message under it
  // ("" when hidden), the baseline table's model.
  QWidget* editor(const std::string& key) const;
  QString error_text(const std::string& key) const;
  const BaselineDeltaModel* baseline_model() const { return baseline_model_; }
  QString baseline_summary_text() const;

 private:
  struct FieldWidgets {
    ScenarioField field;
    QLabel* label = nullptr;
    QWidget* editor = nullptr;
    QLabel* error = nullptr;
  };
  QWidget* make_editor(const ScenarioField& field);
  void apply(const ScenarioField& field, const std::string& value);
  void refresh_fields();
  void refresh_baseline();

  Document* document_;
  std::vector<ScenarioField> fields_;
  std::map<std::string, FieldWidgets> widgets_;
  FieldValues values_;
  QLabel* other_error_ = nullptr;  // an error no visible field names
  QPushButton* pin_ = nullptr;
  QPushButton* clear_baseline_ = nullptr;
  QGridLayout* summary_ = nullptr;
  QLabel* baseline_origin_ = nullptr;
  std::vector<QLabel*> summary_cells_;
  QTableView* deltas_ = nullptr;
  BaselineDeltaModel* baseline_model_ = nullptr;
};

}  // namespace k3::gui
