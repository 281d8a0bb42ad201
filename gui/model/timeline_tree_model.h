// The trace as a tree beside the timeline: step → layer → op → kernel, with start, duration, GPU event count
// and the op's predicted exposed time. An op instance belongs to the step in which its first kernel starts;
// ops group by layer ("layer 4" for L004.*, else their scope: "embed", "head", "decode"). UI-free.
#pragma once

#include "gui/model/prediction_data.h"
#include "gui/model/timeline_index.h"

#include <QAbstractItemModel>

#include <memory>
#include <string>
#include <vector>

namespace k3::gui {

class TimelineTreeModel : public QAbstractItemModel {
  Q_OBJECT

 public:
  enum Column { name_column, start_column, duration_column, events_column, predicted_column, column_count };
  // The op name of a row (op and kernel rows; "" otherwise).
  static constexpr int kOpRole = Qt::UserRole + 1;
  // The row's start and end in trace nanoseconds (qint64).
  static constexpr int kStartNsRole = Qt::UserRole + 2;
  static constexpr int kEndNsRole = Qt::UserRole + 3;

  explicit TimelineTreeModel(QObject* parent = nullptr);
  // Rebuilds the tree (null index: empty); `prediction` (may be null) fills the predicted column.
  void set_index(std::shared_ptr<const TimelineIndex> index, const PredictionData* prediction);

  // The op row of `op`'s instance that starts first at or after `t_ns` (the first one when none does), or invalid.
  QModelIndex find_op(const std::string& op, std::int64_t t_ns = 0) const;

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Step {
    std::uint32_t span = 0;  // in the steps track
    std::uint32_t group_begin = 0, group_end = 0;
  };
  struct Group {
    std::uint32_t step = 0;
    std::string label;
    std::uint32_t op_begin = 0, op_end = 0;
    std::int64_t start_ns = 0, end_ns = 0;
    std::size_t events = 0;
  };
  struct OpRow {
    std::uint32_t group = 0;
    int track = 0;
    std::uint32_t span = 0;    // in its ops track
    double predicted_us = -1;  // < 0: not predicted
  };
  enum class Level : quintptr { step = 0, group = 1, op = 2, kernel = 3 };
  static constexpr int kLevelShift = 62;
  static constexpr int kKernelShift = 24;  // kernel ids: op row << 24 | kernel within the op
  static Level level_of(const QModelIndex& i) { return static_cast<Level>(i.internalId() >> kLevelShift); }
  static quintptr payload_of(const QModelIndex& i) { return i.internalId() & ((quintptr{1} << kLevelShift) - 1); }
  static quintptr id(Level level, quintptr payload) { return (static_cast<quintptr>(level) << kLevelShift) | payload; }
  std::uint32_t kernels_of(std::uint32_t op_row) const;
  std::uint32_t kernel_row(std::uint32_t op_row, std::uint32_t k) const;

  std::shared_ptr<const TimelineIndex> index_;
  std::vector<Step> steps_;
  std::vector<Group> groups_;
  std::vector<OpRow> ops_;
};

}  // namespace k3::gui
