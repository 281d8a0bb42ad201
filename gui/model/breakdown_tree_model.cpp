#include "gui/model/breakdown_tree_model.h"

#include <QSet>

#include <map>

namespace k3::gui {
namespace {

constexpr quintptr kGroupRow = 0;  // internalId of a group row; a child's is its group's index + 1

double intensity_of(double flops, double bytes) { return bytes > 0 ? flops / bytes : 0.0; }

}  // namespace

std::vector<OpGroup> group_ops(const PredictionData& p) {
  std::vector<OpGroup> out;
  std::map<std::string, std::size_t> index;
  double exposed_total = 0;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const PredictedOpRow& o = p.ops[i];
    auto [it, inserted] = index.emplace(o.base_name(), out.size());
    if (inserted) out.push_back(OpGroup{o.base_name(), {}, 0, 0, 0, o.bound, 0});
    OpGroup& g = out[it->second];
    g.ops.push_back(static_cast<int>(i));
    g.total_us += o.exposed_us;
    g.flops += o.flops;
    g.bytes += o.bytes;
    if (g.bound != o.bound) g.bound = "mixed";
    exposed_total += o.exposed_us;
  }
  for (OpGroup& g : out) g.share_percent = exposed_total > 0 ? g.total_us / exposed_total * 100.0 : 0.0;
  return out;
}

void BreakdownTreeModel::set_prediction(const PredictionData& p) {
  beginResetModel();
  ops_ = p.ops;
  step_us_ = 0;
  for (const PredictedOpRow& o : ops_) step_us_ += o.exposed_us;
  groups_ = group_ops(p);
  endResetModel();
}

void BreakdownTreeModel::clear() {
  beginResetModel();
  ops_.clear();
  groups_.clear();
  step_us_ = 0;
  endResetModel();
}

std::string BreakdownTreeModel::op_name(const QModelIndex& index) const {
  if (!index.isValid()) return "";
  if (index.internalId() == kGroupRow) {
    return ops_[static_cast<std::size_t>(groups_[static_cast<std::size_t>(index.row())].ops.front())].name;
  }
  const OpGroup& g = groups_[index.internalId() - 1];
  return ops_[static_cast<std::size_t>(g.ops[static_cast<std::size_t>(index.row())])].name;
}

QModelIndex BreakdownTreeModel::index_of_op(const std::string& name) const {
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    const OpGroup& g = groups_[gi];
    for (std::size_t k = 0; k < g.ops.size(); ++k) {
      if (ops_[static_cast<std::size_t>(g.ops[k])].name != name) continue;
      if (g.ops.size() == 1) return createIndex(static_cast<int>(gi), 0, kGroupRow);
      return createIndex(static_cast<int>(k), 0, static_cast<quintptr>(gi + 1));
    }
  }
  return {};
}

QModelIndex BreakdownTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (!hasIndex(row, column, parent)) return {};
  if (!parent.isValid()) return createIndex(row, column, kGroupRow);
  return createIndex(row, column, static_cast<quintptr>(parent.row() + 1));
}

QModelIndex BreakdownTreeModel::parent(const QModelIndex& child) const {
  if (!child.isValid() || child.internalId() == kGroupRow) return {};
  return createIndex(static_cast<int>(child.internalId() - 1), 0, kGroupRow);
}

int BreakdownTreeModel::rowCount(const QModelIndex& parent) const {
  if (!parent.isValid()) return static_cast<int>(groups_.size());
  if (parent.column() != 0 || parent.internalId() != kGroupRow) return 0;
  const OpGroup& g = groups_[static_cast<std::size_t>(parent.row())];
  return g.ops.size() > 1 ? static_cast<int>(g.ops.size()) : 0;
}

int BreakdownTreeModel::columnCount(const QModelIndex&) const { return column_count; }

QVariant BreakdownTreeModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  if (role == Qt::TextAlignmentRole) {
    return index.column() == op || index.column() == bound ? int(Qt::AlignLeft | Qt::AlignVCenter)
                                                           : int(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole && role != Qt::UserRole && role != Qt::ToolTipRole) return {};
  if (index.internalId() == kGroupRow)
    return group_cell(groups_[static_cast<std::size_t>(index.row())], index.column(), role);
  const OpGroup& g = groups_[index.internalId() - 1];
  return op_cell(ops_[static_cast<std::size_t>(g.ops[static_cast<std::size_t>(index.row())])], index.column(), role);
}

QVariant BreakdownTreeModel::group_cell(const OpGroup& g, int column, int role) const {
  const bool number = role == Qt::UserRole;
  if (role == Qt::ToolTipRole) {
    return QString("%1: %2 op(s), %3 µs exposed")
        .arg(QString::fromStdString(g.name))
        .arg(g.ops.size())
        .arg(g.total_us, 0, 'f', 2);
  }
  const double per_instance = g.total_us / static_cast<double>(g.ops.size());
  switch (column) {
    case op: return QString::fromStdString(g.ops.size() == 1 ? ops_[static_cast<std::size_t>(g.ops[0])].name : g.name);
    case count: return number ? QVariant(static_cast<int>(g.ops.size())) : QVariant(QString::number(g.ops.size()));
    case total_us: return number ? QVariant(g.total_us) : QVariant(QString::number(g.total_us, 'f', 1));
    case share_percent: return number ? QVariant(g.share_percent) : QVariant(QString::number(g.share_percent, 'f', 2));
    case per_instance_us: return number ? QVariant(per_instance) : QVariant(QString::number(per_instance, 'f', 2));
    case bound: return QString::fromStdString(g.bound);
    case intensity: {
      const double i = intensity_of(g.flops, g.bytes);
      return number ? QVariant(i) : QVariant(QString::number(i, 'f', 1));
    }
  }
  return {};
}

QVariant BreakdownTreeModel::op_cell(const PredictedOpRow& o, int column, int role) const {
  const bool number = role == Qt::UserRole;
  if (role == Qt::ToolTipRole) {
    return QString("%1 (%2): %3 µs alone, %4 µs exposed")
        .arg(QString::fromStdString(o.name), QString::fromStdString(o.kind))
        .arg(o.time_us, 0, 'f', 2)
        .arg(o.exposed_us, 0, 'f', 2);
  }
  const double share = step_us_ > 0 ? o.exposed_us / step_us_ * 100.0 : 0.0;
  switch (column) {
    case op: return QString::fromStdString(o.name);
    case count: return number ? QVariant(1) : QVariant(QString("1"));
    case total_us: return number ? QVariant(o.exposed_us) : QVariant(QString::number(o.exposed_us, 'f', 1));
    case share_percent: return number ? QVariant(share) : QVariant(QString::number(share, 'f', 2));
    case per_instance_us: return number ? QVariant(o.exposed_us) : QVariant(QString::number(o.exposed_us, 'f', 2));
    case bound: return QString::fromStdString(o.bound);
    case intensity: {
      const double i = intensity_of(o.flops, o.bytes);
      return number ? QVariant(i) : QVariant(QString::number(i, 'f', 1));
    }
  }
  return {};
}

QVariant BreakdownTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case op: return "Op";
    case count: return "Count";
    case total_us: return "Total (µs)";
    case share_percent: return "Share (%)";
    case per_instance_us: return "Per instance (µs)";
    case bound: return "Bound";
    case intensity: return "Intensity (FLOP/B)";
  }
  return {};
}

QString rows_as_tsv(const QAbstractItemModel& model, const QModelIndexList& rows) {
  const int columns = model.columnCount();
  QStringList lines, header;
  for (int c = 0; c < columns; ++c) header << model.headerData(c, Qt::Horizontal).toString();
  lines << header.join('\t');
  QSet<QModelIndex> seen;
  for (const QModelIndex& i : rows) {
    const QModelIndex first = i.siblingAtColumn(0);
    if (seen.contains(first)) continue;
    seen.insert(first);
    QStringList cells;
    for (int c = 0; c < columns; ++c) cells << model.index(i.row(), c, i.parent()).data().toString();
    lines << cells.join('\t');
  }
  return lines.join('\n') + '\n';
}

}  // namespace k3::gui
