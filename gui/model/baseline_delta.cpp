#include "gui/model/baseline_delta.h"

#include <QBrush>
#include <QColor>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>

namespace k3::gui {
namespace {

double percent_change(double before, double after) {
  return before != 0 ? (after - before) / before * 100.0 : std::numeric_limits<double>::quiet_NaN();
}

constexpr double kGiB = double(1ull << 30);

}  // namespace

double KindDelta::delta_percent() const { return percent_change(baseline_us, current_us); }
double SummaryDelta::delta_percent() const { return percent_change(baseline, current); }

std::vector<KindDelta> kind_deltas(const PredictionData& baseline, const PredictionData& current) {
  std::vector<KindDelta> out;
  std::map<std::string, std::size_t> index;
  for (const GroupRow& g : current.by_kind()) {
    index[g.group] = out.size();
    out.push_back({g.group, 0, g.time_us});
  }
  for (const GroupRow& g : baseline.by_kind()) {
    auto [it, inserted] = index.emplace(g.group, out.size());
    if (inserted) out.push_back({g.group, 0, 0});
    out[it->second].baseline_us = g.time_us;
  }
  return out;
}

std::vector<SummaryDelta> summary_deltas(const PredictionData& baseline, const PredictionData& current) {
  return {
      {"Step time", "ms", baseline.step_us / 1e3, current.step_us / 1e3},
      {"Throughput", "tokens/s", baseline.tokens_per_s, current.tokens_per_s},
      {"Memory per GPU", "GiB", baseline.total_bytes / kGiB, current.total_bytes / kGiB},
  };
}

std::string percent_text(double percent) {
  if (std::isnan(percent)) return "new";
  return fmt::format("{}{:.1f} %", percent > 0 ? "+" : percent < 0 ? "\u2212" : "", std::abs(percent));
}

void BaselineDeltaModel::set_predictions(const PredictionData& baseline, const PredictionData& current) {
  beginResetModel();
  rows_ = kind_deltas(baseline, current);
  endResetModel();
}

void BaselineDeltaModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

int BaselineDeltaModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int BaselineDeltaModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : column_count; }

QVariant BaselineDeltaModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= column_count) return {};
  const KindDelta& r = rows_[static_cast<std::size_t>(index.row())];
  const int column = index.column();
  if (role == Qt::UserRole) {
    switch (column) {
      case kind: return QString::fromStdString(r.kind);
      case baseline_us: return r.baseline_us;
      case current_us: return r.current_us;
      case delta_us: return r.delta_us();
      case delta_percent: return r.delta_percent();
    }
  }
  if (role == Qt::DisplayRole) {
    switch (column) {
      case kind: return QString::fromStdString(r.kind);
      case baseline_us: return QString::number(r.baseline_us, 'f', 1);
      case current_us: return QString::number(r.current_us, 'f', 1);
      case delta_us: return QString::fromStdString(fmt::format("{:+.1f}", r.delta_us()));
      case delta_percent: return QString::fromStdString(percent_text(r.delta_percent()));
    }
  }
  if (role == Qt::ToolTipRole) {
    return QString::fromStdString(
        fmt::format("{}: {:.1f} µs in the baseline, {:.1f} µs now", r.kind, r.baseline_us, r.current_us));
  }
  if (role == Qt::TextAlignmentRole && column != kind) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ForegroundRole && (column == delta_us || column == delta_percent) && r.delta_us() != 0) {
    return QBrush(r.delta_us() > 0 ? QColor(0xB0, 0x20, 0x20) : QColor(0x10, 0x80, 0x30));
  }
  return {};
}

QVariant BaselineDeltaModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kind: return "Op kind";
    case baseline_us: return "Base µs";
    case current_us: return "Now µs";
    case delta_us: return "Δ µs";
    case delta_percent: return "Δ %";
  }
  return {};
}

}  // namespace k3::gui
