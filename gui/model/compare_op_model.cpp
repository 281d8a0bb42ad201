#include "gui/model/compare_op_model.h"

#include "gui/model/compare_format.h"

#include <QFont>

#include <algorithm>
#include <cmath>

namespace k3::gui {
namespace {

using Column = CompareOpModel::Column;

bool numeric(Column c) { return c != Column::name && c != Column::kind && c != Column::bound; }

QString title(Column c) {
  switch (c) {
    case Column::name: return "op";
    case Column::kind: return "kind";
    case Column::bound: return "bound";
    case Column::predicted_us: return "predicted µs";
    case Column::measured_us: return "measured µs";
    case Column::error_us: return "error µs";
    case Column::error_percent: return "error %";
    case Column::kernels: return "kernels";
    case Column::achieved_gb_per_s: return "achieved GB/s";
    case Column::roofline_percent: return "% of roofline";
    case Column::predicted_mb: return "predicted MB";
    case Column::measured_dram_mb: return "DRAM MB";
    case Column::dram_error_percent: return "bytes error %";
    case Column::predicted_gflop: return "predicted GFLOP";
    case Column::measured_tensor_gflop: return "tensor GFLOP";
    case Column::tensor_flops_error_percent: return "FLOP error %";
  }
  return {};
}

QString tooltip(Column c) {
  switch (c) {
    case Column::measured_us: return "median over the traced steps of the op's GPU busy time";
    case Column::error_us: return "predicted − measured; sorts by magnitude";
    case Column::error_percent: return "(predicted − measured) / measured; sorts by magnitude";
    case Column::kernels: return "kernels attributed to the op, all steps";
    case Column::achieved_gb_per_s: return "the prediction's bytes over the measured time";
    case Column::roofline_percent: return "roofline time at the hardware's peaks over the measured time";
    case Column::measured_dram_mb: return "DRAM bytes read + written, measured by the counters";
    case Column::dram_error_percent: return "(predicted − measured DRAM bytes) / measured; sorts by magnitude";
    case Column::measured_tensor_gflop: return "tensor-core FLOPs measured by the counters";
    case Column::tensor_flops_error_percent:
      return "(predicted − measured tensor FLOPs) / measured; sorts by magnitude";
    default: return {};
  }
}

double magnitude_or_none(const std::optional<double>& v) { return v ? std::fabs(*v) : -1.0; }

QVariant display(const CompareOpRow& o, Column c) {
  using namespace compare;
  const std::optional<CounterRow>& k = o.counters;
  switch (c) {
    case Column::name: return QString::fromStdString(o.name);
    case Column::kind: return QString::fromStdString(o.kind);
    case Column::bound: return QString::fromStdString(o.bound);
    case Column::predicted_us: return us_text(o.predicted_us);
    case Column::measured_us: return us_text(o.measured_us);
    case Column::error_us: return signed_us_text(o.error_us());
    case Column::error_percent: return signed_percent_text(o.error_percent);
    case Column::kernels: return QString::number(o.kernels);
    case Column::achieved_gb_per_s: return gigabytes_per_s_text(o.achieved_bytes_per_s);
    case Column::roofline_percent: return percent_text(o.roofline_percent);
    case Column::predicted_mb: return megabytes_text(o.bytes);
    case Column::measured_dram_mb: return k ? megabytes_text(k->measured_bytes) : "—";
    case Column::dram_error_percent: return signed_percent_text(k ? k->bytes_error_percent : std::nullopt);
    case Column::predicted_gflop: return gigaflop_text(o.flops);
    case Column::measured_tensor_gflop:
      return k && k->measured_tensor_flops ? gigaflop_text(*k->measured_tensor_flops) : "—";
    case Column::tensor_flops_error_percent: return signed_percent_text(k ? k->flops_error_percent : std::nullopt);
  }
  return {};
}

QVariant sort_key(const CompareOpRow& o, Column c) {
  const std::optional<CounterRow>& k = o.counters;
  switch (c) {
    case Column::name:
    case Column::kind:
    case Column::bound: return display(o, c);
    case Column::predicted_us: return o.predicted_us;
    case Column::measured_us: return o.measured_us;
    case Column::error_us: return std::fabs(o.error_us());
    case Column::error_percent: return std::fabs(o.error_percent);
    case Column::kernels: return o.kernels;
    case Column::achieved_gb_per_s: return o.achieved_bytes_per_s;
    case Column::roofline_percent: return o.roofline_percent ? *o.roofline_percent : -1.0;
    case Column::predicted_mb: return o.bytes;
    case Column::measured_dram_mb: return k ? k->measured_bytes : -1.0;
    case Column::dram_error_percent: return magnitude_or_none(k ? k->bytes_error_percent : std::nullopt);
    case Column::predicted_gflop: return o.flops;
    case Column::measured_tensor_gflop: return k && k->measured_tensor_flops ? *k->measured_tensor_flops : -1.0;
    case Column::tensor_flops_error_percent: return magnitude_or_none(k ? k->flops_error_percent : std::nullopt);
  }
  return {};
}

}  // namespace

CompareOpModel::CompareOpModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareOpModel::set_comparison(std::shared_ptr<const CompareData> data) {
  beginResetModel();
  data_ = std::move(data);
  columns_ = {
      Column::name,        Column::kind,          Column::bound,   Column::predicted_us,      Column::measured_us,
      Column::error_us,    Column::error_percent, Column::kernels, Column::achieved_gb_per_s, Column::roofline_percent,
      Column::predicted_mb};
  if (data_ && data_->has_counters)
    columns_.insert(columns_.end(), {Column::measured_dram_mb, Column::dram_error_percent});
  columns_.push_back(Column::predicted_gflop);
  if (data_ && data_->has_counters) {
    columns_.insert(columns_.end(), {Column::measured_tensor_gflop, Column::tensor_flops_error_percent});
  }
  endResetModel();
}

void CompareOpModel::set_selected_op(const std::string& name) {
  if (name == selected_op_) return;
  const int before = row_of(selected_op_);
  selected_op_ = name;
  for (const int row : {before, row_of(name)}) {
    if (row >= 0) emit dataChanged(index(row, 0), index(row, columnCount() - 1), {Qt::FontRole});
  }
}

int CompareOpModel::column_of(Column c) const {
  const auto it = std::find(columns_.begin(), columns_.end(), c);
  return it == columns_.end() ? -1 : static_cast<int>(it - columns_.begin());
}

int CompareOpModel::row_of(const std::string& name) const { return data_ ? data_->find(name) : -1; }

int CompareOpModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !data_ ? 0 : static_cast<int>(data_->ops.size());
}

int CompareOpModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(columns_.size());
}

QVariant CompareOpModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !data_ || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  const CompareOpRow& o = op(index.row());
  const Column c = columns_[static_cast<std::size_t>(index.column())];
  switch (role) {
    case Qt::DisplayRole: return display(o, c);
    case Qt::TextAlignmentRole: return compare::alignment(numeric(c));
    case compare::kSortRole: return sort_key(o, c);
    case Qt::FontRole: {
      if (o.name != selected_op_) return {};
      QFont bold;
      bold.setBold(true);
      return bold;
    }
    case compare::kFilterRole:
      return index.column() == 0 ? QVariant(QString::fromStdString(o.name + " " + o.kind + " " + o.bound)) : QVariant();
    default: return {};
  }
}

QVariant CompareOpModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const Column c = columns_[static_cast<std::size_t>(section)];
  if (role == Qt::DisplayRole) return title(c);
  if (role == Qt::ToolTipRole) return tooltip(c);
  if (role == Qt::TextAlignmentRole) return compare::alignment(numeric(c));
  return {};
}

CompareOpProxy::CompareOpProxy(CompareOpModel* source, QObject* parent)
    : QSortFilterProxyModel(parent), source_(source) {
  setSourceModel(source);
  setSortRole(compare::kSortRole);
  setFilterRole(compare::kFilterRole);
  setFilterKeyColumn(0);
  setFilterCaseSensitivity(Qt::CaseInsensitive);
  // The ranking survives a new comparison (its columns may move when counters come or go).
  connect(source, &QAbstractItemModel::modelReset, this, [this] { rank_by(rank_); });
  rank_by(rank_);
}

void CompareOpProxy::rank_by(Rank rank) {
  rank_ = rank;
  const int column = source_->column_of(rank == Rank::abs_error_us ? CompareOpModel::Column::error_us
                                                                   : CompareOpModel::Column::error_percent);
  sort(column, Qt::DescendingOrder);
}

void CompareOpProxy::set_filter_text(const QString& text) { setFilterFixedString(text); }

}  // namespace k3::gui
