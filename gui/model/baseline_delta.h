// The current prediction against a pinned baseline: step time, throughput and memory per GPU side by side,
// and the exposed time of each op kind with its change in µs and %. UI-free.
#pragma once

#include "gui/model/prediction_data.h"

#include <QAbstractTableModel>

#include <string>
#include <vector>

namespace k3::gui {

struct KindDelta {
  std::string kind;  // op kind: "gemm", "mla_attention", ...
  double baseline_us = 0, current_us = 0;
  double delta_us() const { return current_us - baseline_us; }
  double delta_percent() const;  // NaN when the baseline has no time of this kind
};

// Exposed µs per op kind in either prediction: the current one's kinds in their order, then the kinds
// only the baseline has.
std::vector<KindDelta> kind_deltas(const PredictionData& baseline, const PredictionData& current);

struct SummaryDelta {
  std::string metric;  // "Step time"
  std::string unit;    // "ms"
  double baseline = 0, current = 0;
  double delta_percent() const;  // NaN when the baseline is 0
};
// Step time (ms), throughput (tokens/s) and memory per GPU (GiB).
std::vector<SummaryDelta> summary_deltas(const PredictionData& baseline, const PredictionData& current);

// "+12.3 %", "−4.0 %", "new" (NaN): how the deltas read.
std::string percent_text(double percent);

// The per-kind deltas as a table: Op kind | Base µs | Now µs | Δ µs | Δ %. Qt::UserRole
// holds the number of each cell for sorting, the tooltip both times; the Δ cells are red when slower, green when
// faster.
class BaselineDeltaModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kind, baseline_us, current_us, delta_us, delta_percent, column_count };
  using QAbstractTableModel::QAbstractTableModel;

  void set_predictions(const PredictionData& baseline, const PredictionData& current);
  void clear();
  const std::vector<KindDelta>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<KindDelta> rows_;
};

}  // namespace k3::gui
