#include "gui/model/compare_group_model.h"

#include "gui/model/compare_format.h"

#include <algorithm>
#include <cmath>

namespace k3::gui {
namespace {
using Column = CompareGroupModel::Column;
const std::vector<CompareGroupRow> kNoRows;
}  // namespace

CompareGroupModel::CompareGroupModel(Groups groups, QObject* parent) : QAbstractTableModel(parent), groups_(groups) {}

void CompareGroupModel::set_comparison(std::shared_ptr<const CompareData> data) {
  beginResetModel();
  data_ = std::move(data);
  columns_ = {Column::group,
              Column::ops,
              Column::predicted_us,
              Column::measured_us,
              Column::error_us,
              Column::error_percent,
              Column::median_abs_error_percent};
  if (groups_ == Groups::by_kind && data_ && data_->has_counters) {
    columns_.insert(columns_.end(), {Column::predicted_mb, Column::measured_dram_mb});
  }
  endResetModel();
}

int CompareGroupModel::column_of(Column c) const {
  const auto it = std::find(columns_.begin(), columns_.end(), c);
  return it == columns_.end() ? -1 : static_cast<int>(it - columns_.begin());
}

const std::vector<CompareGroupRow>& CompareGroupModel::rows() const {
  if (!data_) return kNoRows;
  return groups_ == Groups::by_kind ? data_->by_kind : data_->by_step;
}

const CompareGroupRow& CompareGroupModel::group(int row) const { return rows()[static_cast<std::size_t>(row)]; }

const CounterKindRow* CompareGroupModel::counters_of(const CompareGroupRow& g) const {
  for (const CounterKindRow& k : data_->counters_by_kind) {
    if (k.kind == g.group) return &k;
  }
  return nullptr;
}

int CompareGroupModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows().size());
}

int CompareGroupModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(columns_.size());
}

QVariant CompareGroupModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  const CompareGroupRow& g = group(index.row());
  const Column c = columns_[static_cast<std::size_t>(index.column())];
  if (role == Qt::TextAlignmentRole) return compare::alignment(c != Column::group);
  const CounterKindRow* k = c == Column::predicted_mb || c == Column::measured_dram_mb ? counters_of(g) : nullptr;
  if (role == compare::kSortRole) {
    switch (c) {
      case Column::group:
        return groups_ == Groups::by_step ? QVariant(QString::fromStdString(g.group).toInt())
                                          : QVariant(QString::fromStdString(g.group));
      case Column::ops: return g.ops;
      case Column::predicted_us: return g.predicted_us;
      case Column::measured_us: return g.measured_us;
      case Column::error_us: return std::fabs(g.error_us());
      case Column::error_percent: return std::fabs(g.error_percent());
      case Column::median_abs_error_percent: return g.median_abs_error_percent;
      case Column::predicted_mb: return k ? k->predicted_bytes : -1.0;
      case Column::measured_dram_mb: return k ? k->measured_bytes : -1.0;
    }
  }
  if (role != Qt::DisplayRole) return {};
  using namespace compare;
  switch (c) {
    case Column::group: return QString::fromStdString(g.group);
    case Column::ops: return QString::number(g.ops);
    case Column::predicted_us: return us_text(g.predicted_us);
    case Column::measured_us: return us_text(g.measured_us);
    case Column::error_us: return signed_us_text(g.error_us());
    case Column::error_percent: return signed_percent_text(g.error_percent());
    case Column::median_abs_error_percent: return percent_text(g.median_abs_error_percent);
    case Column::predicted_mb: return k ? megabytes_text(k->predicted_bytes) : "—";
    case Column::measured_dram_mb: return k ? megabytes_text(k->measured_bytes) : "—";
  }
  return {};
}

QVariant CompareGroupModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const Column c = columns_[static_cast<std::size_t>(section)];
  if (role == Qt::TextAlignmentRole) return compare::alignment(c != Column::group);
  if (role == Qt::ToolTipRole && c == Column::median_abs_error_percent) return "median of |error %| over the ops";
  if (role != Qt::DisplayRole) return {};
  switch (c) {
    case Column::group: return groups_ == Groups::by_kind ? "kind" : "step";
    case Column::ops: return "ops";
    case Column::predicted_us: return "predicted µs";
    case Column::measured_us: return "measured µs";
    case Column::error_us: return "error µs";
    case Column::error_percent: return "error %";
    case Column::median_abs_error_percent: return "median |error| %";
    case Column::predicted_mb: return "predicted MB";
    case Column::measured_dram_mb: return "DRAM MB";
  }
  return {};
}

}  // namespace k3::gui
