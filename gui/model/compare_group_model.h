// The Compare view's per-kind and per-step tables: predicted against measured sums of a comparison's
// groups (by_kind, by_step) with their error and median |error| over the group's ops; per kind with the
// counters' predicted and measured DRAM bytes when the comparison holds them. UI-free.
#pragma once

#include "gui/model/compare_data.h"

#include <QAbstractTableModel>

#include <memory>
#include <vector>

namespace k3::gui {

class CompareGroupModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum class Groups { by_kind, by_step };
  enum class Column {
    group,
    ops,
    predicted_us,
    measured_us,
    error_us,
    error_percent,
    median_abs_error_percent,
    predicted_mb,  // per kind, counters only
    measured_dram_mb,
  };

  explicit CompareGroupModel(Groups groups, QObject* parent = nullptr);

  void set_comparison(std::shared_ptr<const CompareData> data);
  int column_of(Column c) const;  // -1 when absent
  const CompareGroupRow& group(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  const std::vector<CompareGroupRow>& rows() const;
  const CounterKindRow* counters_of(const CompareGroupRow& g) const;

  Groups groups_;
  std::shared_ptr<const CompareData> data_;
  std::vector<Column> columns_;
};

}  // namespace k3::gui
