// The Breakdown view's per-op table: ops grouped by name across layers ("mla.attn_decode": count, total
// exposed µs, share of the step, per instance, bound, intensity), each group expandable to its per-layer
// ops. A group of one op has no children: its row is the op. Qt::UserRole holds each cell's number (or
// text) for sorting. UI-free.
#pragma once

#include "gui/model/prediction_data.h"

#include <QAbstractItemModel>
#include <QModelIndexList>

#include <string>
#include <vector>

namespace k3::gui {

struct OpGroup {
  std::string name;      // base name: "mla.attn_decode"
  std::vector<int> ops;  // indices into PredictionData::ops, in graph order
  double total_us = 0;   // exposed
  double flops = 0, bytes = 0;
  std::string bound;         // the bound of every op, or "mixed"
  double share_percent = 0;  // of the step's exposed time
};

// The groups of a prediction in order of first appearance.
std::vector<OpGroup> group_ops(const PredictionData& p);

class BreakdownTreeModel : public QAbstractItemModel {
  Q_OBJECT

 public:
  enum Column { op, count, total_us, share_percent, per_instance_us, bound, intensity, column_count };
  using QAbstractItemModel::QAbstractItemModel;

  void set_prediction(const PredictionData& p);
  void clear();
  const std::vector<OpGroup>& groups() const { return groups_; }

  // The full op name a row stands for: the op of a child row, the first layer's op of a group row.
  std::string op_name(const QModelIndex& index) const;
  // The row of `op_name`: its child row, or the row of its group when the group has one op; invalid if none.
  QModelIndex index_of_op(const std::string& op_name) const;

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  QVariant group_cell(const OpGroup& g, int column, int role) const;
  QVariant op_cell(const PredictedOpRow& o, int column, int role) const;

  std::vector<PredictedOpRow> ops_;
  double step_us_ = 0;
  std::vector<OpGroup> groups_;
};

// The rows as tab-separated text: a header line of the model's column titles, then one line per row of
// `rows` (any column of a row selects it; each row once, in the order given), as the cells display.
QString rows_as_tsv(const QAbstractItemModel& model, const QModelIndexList& rows);

}  // namespace k3::gui
