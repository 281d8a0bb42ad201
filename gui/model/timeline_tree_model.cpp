#include "gui/model/timeline_tree_model.h"

#include "core/error.h"
#include "core/op_names.h"
#include "gui/model/timeline_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

namespace k3::gui {
namespace {

// "layer 4" for L004.mla.attn_decode; the scope for the others ("embed", "head", "decode"), else "other".
std::string group_of(const std::string& op) {
  const auto ref = parse_op_name(op);
  if (ref && ref->layer >= 0) return fmt::format("layer {}", ref->layer + 1);
  const std::size_t dot = op.find('.');
  return ref && dot != std::string::npos ? op.substr(0, dot) : "other";
}

QString us(double ns) { return QString::fromStdString(format_duration_ns(ns)); }

}  // namespace

TimelineTreeModel::TimelineTreeModel(QObject* parent) : QAbstractItemModel(parent) {}

void TimelineTreeModel::set_index(std::shared_ptr<const TimelineIndex> index, const PredictionData* prediction) {
  beginResetModel();
  index_ = std::move(index);
  steps_.clear();
  groups_.clear();
  ops_.clear();
  if (index_) {
    const TimelineTrack& steps = index_->tracks()[static_cast<std::size_t>(index_->track_of(TrackKind::steps))];
    // Op instances by step (the last step starting at or before the op's first kernel), in start order.
    std::vector<std::vector<std::pair<std::int64_t, OpRow>>> by_step(steps.size());
    for (std::size_t tr = 0; tr < index_->tracks().size(); ++tr) {
      const TimelineTrack& t = index_->tracks()[tr];
      if (t.kind != TrackKind::ops) continue;
      for (std::uint32_t k = 0; k < t.size(); ++k) {
        const auto it = std::upper_bound(steps.start_ns.begin(), steps.start_ns.end(), t.start_ns[k]);
        if (it == steps.start_ns.begin()) continue;
        const auto s = static_cast<std::size_t>(it - steps.start_ns.begin()) - 1;
        if (t.start_ns[k] >= steps.end_ns[s]) continue;
        OpRow row;
        row.track = static_cast<int>(tr);
        row.span = k;
        if (prediction) {
          const int p = prediction->find(index_->names()[index_->spans()[t.ref[k]].name]);
          if (p >= 0) row.predicted_us = prediction->ops[static_cast<std::size_t>(p)].exposed_us;
        }
        by_step[s].push_back({t.start_ns[k], row});
      }
    }
    for (std::uint32_t s = 0; s < steps.size(); ++s) {
      auto& rows = by_step[s];
      std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      // Groups in order of first appearance; ops keep their time order inside a group.
      std::vector<std::string> order;
      std::map<std::string, std::vector<OpRow>> grouped;
      for (const auto& [start, row] : rows) {
        const std::string g = group_of(index_->info(row.track, row.span).op);
        auto [it, added] = grouped.emplace(g, std::vector<OpRow>{});
        if (added) order.push_back(g);
        it->second.push_back(row);
      }
      Step step{s, static_cast<std::uint32_t>(groups_.size()), 0};
      for (const std::string& label : order) {
        Group g;
        g.step = s;
        g.label = label;
        g.op_begin = static_cast<std::uint32_t>(ops_.size());
        g.start_ns = std::numeric_limits<std::int64_t>::max();
        g.end_ns = std::numeric_limits<std::int64_t>::min();
        for (OpRow row : grouped[label]) {
          row.group = static_cast<std::uint32_t>(groups_.size());
          const TimelineTrack& t = index_->tracks()[static_cast<std::size_t>(row.track)];
          g.start_ns = std::min(g.start_ns, t.start_ns[row.span]);
          g.end_ns = std::max(g.end_ns, t.end_ns[row.span]);
          g.events += index_->spans()[t.ref[row.span]].kernels;
          ops_.push_back(row);
        }
        g.op_end = static_cast<std::uint32_t>(ops_.size());
        groups_.push_back(g);
      }
      step.group_end = static_cast<std::uint32_t>(groups_.size());
      steps_.push_back(step);
    }
  }
  endResetModel();
}

std::uint32_t TimelineTreeModel::kernels_of(std::uint32_t op_row) const {
  const OpRow& r = ops_[op_row];
  const std::uint32_t span = index_->tracks()[static_cast<std::size_t>(r.track)].ref[r.span];
  return static_cast<std::uint32_t>(index_->span_rows_end(span) - index_->span_rows_begin(span));
}

std::uint32_t TimelineTreeModel::kernel_row(std::uint32_t op_row, std::uint32_t k) const {
  const OpRow& r = ops_[op_row];
  const std::uint32_t span = index_->tracks()[static_cast<std::size_t>(r.track)].ref[r.span];
  return index_->span_rows_begin(span)[k];
}

QModelIndex TimelineTreeModel::find_op(const std::string& op, std::int64_t t_ns) const {
  if (!index_) return {};
  const std::int32_t name = index_->find_name(op);
  if (name == profiler::kNone) return {};
  int first = -1;
  for (std::size_t r = 0; r < ops_.size(); ++r) {
    const TimelineTrack& t = index_->tracks()[static_cast<std::size_t>(ops_[r].track)];
    if (index_->spans()[t.ref[ops_[r].span]].op != name) continue;
    if (first < 0) first = static_cast<int>(r);
    if (t.start_ns[ops_[r].span] >= t_ns) {
      first = static_cast<int>(r);
      break;
    }
  }
  if (first < 0) return {};
  const OpRow& row = ops_[static_cast<std::size_t>(first)];
  return createIndex(static_cast<int>(static_cast<std::uint32_t>(first) - groups_[row.group].op_begin), 0,
                     id(Level::op, static_cast<quintptr>(first)));
}

QModelIndex TimelineTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (row < 0 || column < 0 || column >= column_count || row >= rowCount(parent)) return {};
  const auto r = static_cast<quintptr>(row);
  if (!parent.isValid()) return createIndex(row, column, id(Level::step, r));
  const quintptr p = payload_of(parent);
  switch (level_of(parent)) {
    case Level::step: return createIndex(row, column, id(Level::group, steps_[p].group_begin + r));
    case Level::group: return createIndex(row, column, id(Level::op, groups_[p].op_begin + r));
    case Level::op: return createIndex(row, column, id(Level::kernel, (p << kKernelShift) | r));
    case Level::kernel: return {};
  }
  return {};
}

QModelIndex TimelineTreeModel::parent(const QModelIndex& child) const {
  if (!child.isValid()) return {};
  const quintptr p = payload_of(child);
  switch (level_of(child)) {
    case Level::step: return {};
    case Level::group: {
      const std::uint32_t s = groups_[p].step;
      return createIndex(static_cast<int>(s), 0, id(Level::step, s));
    }
    case Level::op: {
      const std::uint32_t g = ops_[p].group;
      return createIndex(static_cast<int>(g - steps_[groups_[g].step].group_begin), 0, id(Level::group, g));
    }
    case Level::kernel: {
      const quintptr r = p >> kKernelShift;
      return createIndex(static_cast<int>(r - groups_[ops_[r].group].op_begin), 0, id(Level::op, r));
    }
  }
  return {};
}

int TimelineTreeModel::rowCount(const QModelIndex& parent) const {
  if (parent.column() > 0) return 0;
  if (!parent.isValid()) return static_cast<int>(steps_.size());
  const quintptr p = payload_of(parent);
  switch (level_of(parent)) {
    case Level::step: return static_cast<int>(steps_[p].group_end - steps_[p].group_begin);
    case Level::group: return static_cast<int>(groups_[p].op_end - groups_[p].op_begin);
    case Level::op: return static_cast<int>(kernels_of(static_cast<std::uint32_t>(p)));
    case Level::kernel: return 0;
  }
  return 0;
}

int TimelineTreeModel::columnCount(const QModelIndex&) const { return column_count; }

QVariant TimelineTreeModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !index_) return {};
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole && role != kOpRole && role != kStartNsRole &&
      role != kEndNsRole && role != Qt::TextAlignmentRole) {
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    return index.column() == name_column ? QVariant() : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
  }
  const quintptr p = payload_of(index);
  QString name, tooltip;
  std::string op;
  std::int64_t start = 0, end = 0;
  std::size_t events = 0;
  double predicted_us = -1;
  switch (level_of(index)) {
    case Level::step: {
      const int st = index_->track_of(TrackKind::steps);
      const SpanInfo s = index_->info(st, steps_[p].span);
      name = QString::fromStdString(s.name);
      start = s.start_ns, end = s.end_ns;
      events = index_->spans()[index_->tracks()[static_cast<std::size_t>(st)].ref[steps_[p].span]].kernels;
      break;
    }
    case Level::group: {
      const Group& g = groups_[p];
      name = QString::fromStdString(g.label);
      start = g.start_ns, end = g.end_ns, events = g.events;
      break;
    }
    case Level::op: {
      const OpRow& r = ops_[p];
      const SpanInfo s = index_->info(r.track, r.span);
      op = s.op;
      name = QString::fromStdString(s.op);
      start = s.start_ns, end = s.end_ns;
      events = kernels_of(static_cast<std::uint32_t>(p));
      predicted_us = r.predicted_us;
      break;
    }
    case Level::kernel: {
      const std::uint32_t row = kernel_row(static_cast<std::uint32_t>(p >> kKernelShift),
                                           static_cast<std::uint32_t>(p & ((quintptr{1} << kKernelShift) - 1)));
      const profiler::Trace& t = index_->trace();
      op = t.op_of(row);
      name = QString::fromStdString(short_kernel_name(t.name_of(row)));
      tooltip = QString::fromStdString(t.name_of(row));
      start = t.start_ns[row], end = t.end_ns[row], events = 1;
      break;
    }
  }
  if (role == kOpRole) return QString::fromStdString(op);
  if (role == kStartNsRole) return QVariant::fromValue<qint64>(start);
  if (role == kEndNsRole) return QVariant::fromValue<qint64>(end);
  if (role == Qt::ToolTipRole) {
    return (tooltip.isEmpty() ? name : tooltip) + "\nat " + us(static_cast<double>(start - index_->begin_ns()));
  }
  switch (index.column()) {
    case name_column: return name;
    case start_column: return us(static_cast<double>(start - index_->begin_ns()));
    case duration_column: return us(static_cast<double>(end - start));
    case events_column: return QString::number(events);
    case predicted_column: return predicted_us < 0 ? QString() : us(predicted_us * 1e3);
    default: return {};
  }
}

QVariant TimelineTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case name_column: return QStringLiteral("Step / layer / op / kernel");
    case start_column: return QStringLiteral("Start");
    case duration_column: return QStringLiteral("Duration");
    case events_column: return QStringLiteral("GPU events");
    case predicted_column: return QStringLiteral("Predicted");
    default: return {};
  }
}

}  // namespace k3::gui
