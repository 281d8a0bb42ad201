// The Compare view's per-op table: one row per measured op of a comparison, in prediction order (a
// CompareOpProxy ranks and filters it). The columns with counters (measured DRAM bytes, tensor FLOPs) are
// there only when the comparison holds them. UI-free.
#pragma once

#include "gui/model/compare_data.h"

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>

#include <memory>
#include <vector>

namespace k3::gui {

class CompareOpModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum class Column {
    name,
    kind,
    bound,
    predicted_us,
    measured_us,
    error_us,  // predicted − measured
    error_percent,
    kernels,
    achieved_gb_per_s,
    roofline_percent,
    predicted_mb,
    measured_dram_mb,  // counters only
    dram_error_percent,
    predicted_gflop,
    measured_tensor_gflop,  // counters only
    tensor_flops_error_percent,
  };

  explicit CompareOpModel(QObject* parent = nullptr);

  void set_comparison(std::shared_ptr<const CompareData> data);  // nullptr: empty
  const CompareData* comparison() const { return data_.get(); }
  // The op shown in bold (Document::selected_op(), whatever the table's selection is).
  void set_selected_op(const std::string& name);

  // The model column of `c`, or -1 when this comparison has no such column.
  int column_of(Column c) const;
  // The row of the op named `name`, or -1.
  int row_of(const std::string& name) const;
  const CompareOpRow& op(int row) const { return data_->ops[static_cast<std::size_t>(row)]; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::shared_ptr<const CompareData> data_;
  std::vector<Column> columns_;
  std::string selected_op_;
};

// The ops ranked and filtered: by |error µs| (largest first) unless told to rank by |error %|; any column
// sorts (errors by magnitude); the filter matches name, kind or bound, case-insensitively.
class CompareOpProxy : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  enum class Rank { abs_error_us, abs_error_percent };

  explicit CompareOpProxy(CompareOpModel* source, QObject* parent = nullptr);

  void rank_by(Rank rank);  // sorts descending on that error's column
  void set_filter_text(const QString& text);

 private:
  CompareOpModel* source_;
  Rank rank_ = Rank::abs_error_us;
};

}  // namespace k3::gui
