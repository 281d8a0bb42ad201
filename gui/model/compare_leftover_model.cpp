#include "gui/model/compare_leftover_model.h"

#include "gui/model/compare_format.h"

namespace k3::gui {

QString to_text(CompareLeftoverModel::What what, bool engine_only) {
  switch (what) {
    case CompareLeftoverModel::What::unattributed_kernel: return "kernel on no op";
    case CompareLeftoverModel::What::not_predicted:
      return engine_only ? "measured, engine's own" : "measured, not predicted";
    case CompareLeftoverModel::What::not_measured: return "predicted, not measured";
    case CompareLeftoverModel::What::fused: return "fused into its host";
  }
  return {};
}

CompareLeftoverModel::CompareLeftoverModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareLeftoverModel::set_comparison(std::shared_ptr<const CompareData> data) {
  beginResetModel();
  rows_.clear();
  if (data) {
    for (const UnattributedKernelRow& k : data->unattributed_kernels) {
      rows_.push_back({What::unattributed_kernel, k.name, "", k.count, k.total_us});
    }
    for (const NotPredictedRow& m : data->not_predicted) {
      rows_.push_back({What::not_predicted, m.name, m.name, m.instances, m.measured_us, m.engine_only});
    }
    for (const std::string& name : data->not_measured) rows_.push_back({What::not_measured, name, name, 0, {}});
    for (const std::string& fusion : data->fused) {
      // "L001.norm.attn_in -> L001.attnres.pre_attn": the host carries the comparison.
      const std::size_t arrow = fusion.find(" -> ");
      const std::string host = arrow == std::string::npos ? fusion : fusion.substr(arrow + 4);
      rows_.push_back({What::fused, fusion, host, 0, {}});
    }
  }
  endResetModel();
}

int CompareLeftoverModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CompareLeftoverModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : column_count; }

QVariant CompareLeftoverModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= column_count) return {};
  const Row& r = row(index.row());
  const bool numeric = index.column() == count_column || index.column() == total_us_column;
  if (role == Qt::TextAlignmentRole) return compare::alignment(numeric);
  if (role == Qt::ToolTipRole && index.column() == name_column) return QString::fromStdString(r.name);
  if (role == compare::kSortRole) {
    switch (index.column()) {
      case what_column: return static_cast<int>(r.what);
      case name_column: return QString::fromStdString(r.name);
      case count_column: return r.count;
      case total_us_column: return r.total_us ? *r.total_us : -1.0;
      default: return {};
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case what_column: return to_text(r.what, r.engine_only);
    case name_column: return QString::fromStdString(r.name);
    case count_column: return r.count > 0 ? QString::number(r.count) : QString();
    case total_us_column: return r.total_us ? compare::us_text(*r.total_us) : QString();
    default: return {};
  }
}

QVariant CompareLeftoverModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= column_count) return {};
  if (role == Qt::TextAlignmentRole) return compare::alignment(section == count_column || section == total_us_column);
  if (role == Qt::ToolTipRole && section == total_us_column) {
    return "a kernel's total over all its launches; an op's median instance";
  }
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case what_column: return "left over";
    case name_column: return "name";
    case count_column: return "count";
    case total_us_column: return "µs";
    default: return {};
  }
}

}  // namespace k3::gui
