// What the Compare view's join left over, as one table: kernels attributed to no op, ops measured but not
// predicted, ops predicted but not measured, and predicted ops the engine fuses into a neighbour's range
// (their prediction counts toward the host). UI-free.
#pragma once

#include "gui/model/compare_data.h"

#include <QAbstractTableModel>
#include <QString>

#include <memory>
#include <vector>

namespace k3::gui {

class CompareLeftoverModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum class What { unattributed_kernel, not_predicted, not_measured, fused };
  enum Column { what_column, name_column, count_column, total_us_column, column_count };

  struct Row {
    What what;
    std::string name;                // kernel name, op name, or "op -> host" for a fusion
    std::string op;                  // the op to select for this row ("" for a kernel)
    int count = 0;                   // kernel launches, or measured instances; 0: none to show
    std::optional<double> total_us;  // all launches of a kernel; an op's median instance
    bool engine_only = false;        // not_predicted: the prediction lists it as the engine's own range
  };

  explicit CompareLeftoverModel(QObject* parent = nullptr);

  void set_comparison(std::shared_ptr<const CompareData> data);
  const Row& row(int r) const { return rows_[static_cast<std::size_t>(r)]; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<Row> rows_;
};

QString to_text(CompareLeftoverModel::What what, bool engine_only = false);

}  // namespace k3::gui
