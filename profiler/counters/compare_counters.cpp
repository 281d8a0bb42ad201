#include "profiler/counters/compare_counters.h"

#include "core/error.h"
#include "profiler/compare/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace k3::profiler {

namespace {

// A range's values of the metrics that are present (0 for those that are not).
struct Occurrence {
  double read = 0, write = 0, tensor_ops = 0;
};

std::optional<double> error_percent_if_measured(double predicted, double measured) {
  if (measured <= 0) return std::nullopt;
  return (predicted - measured) / measured * 100;
}

std::optional<double> median_abs(const std::vector<double>& errors) {
  if (errors.empty()) return std::nullopt;
  std::vector<double> abs;
  for (double e : errors) abs.push_back(std::fabs(e));
  return median(abs);
}

nlohmann::ordered_json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

std::string percent_text(const std::optional<double>& v) { return v ? fmt::format("{:.1f}%", *v) : "-"; }

}  // namespace

CounterComparison compare_counters(const PredictionFile& prediction, const RangeCounters& counters) {
  const std::string origin = counters.origin.empty() ? "counters" : counters.origin;
  const std::set<std::string> metrics(counters.metrics.begin(), counters.metrics.end());
  for (const char* m : {kDramBytesRead, kDramBytesWrite}) {
    if (!metrics.count(m)) {
      throw InputError(fmt::format("{}: key 'metrics': has no '{}'; the bytes comparison needs {} and {}", origin, m,
                                   kDramBytesRead, kDramBytesWrite));
    }
  }
  std::vector<const char*> tensor_metrics;
  for (const char* m : {kTensorOpsBf16, kTensorOpsFp8}) {
    if (metrics.count(m)) tensor_metrics.push_back(m);
  }

  std::map<std::string, std::vector<Occurrence>> by_name;  // occurrences in order
  for (const CounterRange& r : counters.ranges) {
    auto value = [&r](const char* m) {
      const auto v = r.values.find(m);
      return v == r.values.end() ? 0.0 : v->second;
    };
    Occurrence o{value(kDramBytesRead), value(kDramBytesWrite), 0};
    for (const char* m : tensor_metrics) o.tensor_ops += value(m);
    by_name[r.name].push_back(o);
  }

  CounterComparison c;
  c.prediction_origin = prediction.origin;
  c.counters_origin = counters.origin;
  c.counters_metadata = counters.metadata;
  c.lost_ranges = counters.lost_ranges;
  std::set<std::string> predicted_names;
  std::vector<double> all_bytes_errors, all_flops_errors;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> kind_errors;  // bytes, FLOPs
  for (const PredictedOp& p : prediction.ops) {
    predicted_names.insert(p.name);
    const auto found = by_name.find(p.name);
    if (found == by_name.end()) {
      c.not_measured.push_back(p.name);
      continue;
    }
    OpCounterComparison o;
    o.predicted = &p;
    std::vector<double> reads, writes, tensor_flops;
    for (const Occurrence& occ : found->second) {
      reads.push_back(occ.read);
      writes.push_back(occ.write);
      o.measured_bytes_by_occurrence.push_back(occ.read + occ.write);
      tensor_flops.push_back(occ.tensor_ops * kTensorFlopsPerMathOp);
    }
    o.measured_read_bytes = median(reads);
    o.measured_write_bytes = median(writes);
    o.measured_bytes = median(o.measured_bytes_by_occurrence);
    if (!p.collective()) o.bytes_error_percent = error_percent_if_measured(p.bytes, o.measured_bytes);
    if (!tensor_metrics.empty()) {
      o.measured_tensor_flops = median(tensor_flops);
      if (!p.collective()) o.flops_error_percent = error_percent_if_measured(p.flops, *o.measured_tensor_flops);
    }

    const std::string kind = to_string(p.kind);
    auto group = std::find_if(c.by_kind.begin(), c.by_kind.end(),
                              [&kind](const CounterGroupError& g) { return g.group == kind; });
    if (group == c.by_kind.end()) {
      c.by_kind.push_back({});
      group = c.by_kind.end() - 1;
      group->group = kind;
    }
    ++group->ops;
    group->predicted_bytes += p.bytes;
    group->measured_bytes += o.measured_bytes;
    c.predicted_bytes += p.bytes;
    c.measured_bytes += o.measured_bytes;
    if (o.bytes_error_percent) {
      kind_errors[kind].first.push_back(*o.bytes_error_percent);
      all_bytes_errors.push_back(*o.bytes_error_percent);
    }
    if (o.flops_error_percent) {
      ++group->ops_with_tensor_flops;
      kind_errors[kind].second.push_back(*o.flops_error_percent);
      all_flops_errors.push_back(*o.flops_error_percent);
    }
    c.ops.push_back(std::move(o));
  }
  for (CounterGroupError& g : c.by_kind) {
    g.median_abs_bytes_error_percent = median_abs(kind_errors[g.group].first);
    g.median_abs_flops_error_percent = median_abs(kind_errors[g.group].second);
  }
  c.median_abs_bytes_error_percent = median_abs(all_bytes_errors);
  c.median_abs_flops_error_percent = median_abs(all_flops_errors);
  for (const auto& [name, occurrences] : by_name) {  // std::map: sorted by name
    if (predicted_names.count(name)) continue;
    std::vector<double> bytes;
    for (const Occurrence& occ : occurrences) bytes.push_back(occ.read + occ.write);
    c.not_predicted.push_back({name, occurrences.size(), median(bytes)});
  }
  return c;
}

nlohmann::ordered_json to_json(const CounterComparison& c) {
  nlohmann::ordered_json j;
  j["prediction"] = c.prediction_origin;
  j["counters"] = c.counters_origin;
  j["counters_metadata"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : c.counters_metadata) j["counters_metadata"][key] = value;
  j["lost_ranges"] = c.lost_ranges;
  j["predicted_bytes"] = c.predicted_bytes;
  j["measured_bytes"] = c.measured_bytes;
  j["median_abs_bytes_error_percent"] = optional_json(c.median_abs_bytes_error_percent);
  j["median_abs_flops_error_percent"] = optional_json(c.median_abs_flops_error_percent);
  j["by_kind"] = nlohmann::ordered_json::array();
  for (const CounterGroupError& g : c.by_kind) {
    j["by_kind"].push_back({{"kind", g.group},
                            {"ops", g.ops},
                            {"predicted_bytes", g.predicted_bytes},
                            {"measured_bytes", g.measured_bytes},
                            {"median_abs_bytes_error_percent", optional_json(g.median_abs_bytes_error_percent)},
                            {"ops_with_tensor_flops", g.ops_with_tensor_flops},
                            {"median_abs_flops_error_percent", optional_json(g.median_abs_flops_error_percent)}});
  }
  j["ops"] = nlohmann::ordered_json::array();
  for (const OpCounterComparison& o : c.ops) {
    const PredictedOp& p = *o.predicted;
    j["ops"].push_back({{"name", p.name},
                        {"kind", to_string(p.kind)},
                        {"occurrences", o.measured_bytes_by_occurrence.size()},
                        {"predicted_bytes", p.bytes},
                        {"measured_read_bytes", o.measured_read_bytes},
                        {"measured_write_bytes", o.measured_write_bytes},
                        {"measured_bytes", o.measured_bytes},
                        {"measured_bytes_by_occurrence", o.measured_bytes_by_occurrence},
                        {"bytes_error_percent", optional_json(o.bytes_error_percent)},
                        {"predicted_flops", p.flops},
                        {"measured_tensor_flops", optional_json(o.measured_tensor_flops)},
                        {"flops_error_percent", optional_json(o.flops_error_percent)}});
  }
  j["not_measured"] = c.not_measured;
  j["not_predicted"] = nlohmann::ordered_json::array();
  for (const MeasuredOnlyCounterOp& m : c.not_predicted) {
    j["not_predicted"].push_back(
        {{"name", m.name}, {"occurrences", m.occurrences}, {"measured_bytes", m.measured_bytes}});
  }
  return j;
}

std::string to_text(const CounterComparison& c) {
  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  line(
      fmt::format("DRAM bytes: {} ops measured of {} predicted; {} predicted ops not measured, {} measured ops not "
                  "predicted; {} ranges lost",
                  c.ops.size(), c.ops.size() + c.not_measured.size(), c.not_measured.size(), c.not_predicted.size(),
                  c.lost_ranges));
  line(
      fmt::format("one step on the measured ops: predicted {:.3f} MB, measured {:.3f} MB; median |error| {} (bytes), "
                  "{} (tensor FLOPs)",
                  c.predicted_bytes / 1e6, c.measured_bytes / 1e6, percent_text(c.median_abs_bytes_error_percent),
                  percent_text(c.median_abs_flops_error_percent)));
  line("");
  line(fmt::format("{:<18} {:>5} {:>14} {:>14} {:>12} {:>10} {:>12}", "by op kind", "ops", "predicted MB",
                   "measured MB", "median |err|", "FLOP ops", "median |err|"));
  for (const CounterGroupError& g : c.by_kind) {
    line(fmt::format("{:<18} {:>5} {:>14.3f} {:>14.3f} {:>12} {:>10} {:>12}", g.group, g.ops, g.predicted_bytes / 1e6,
                     g.measured_bytes / 1e6, percent_text(g.median_abs_bytes_error_percent), g.ops_with_tensor_flops,
                     percent_text(g.median_abs_flops_error_percent)));
  }
  line("");
  line(fmt::format("  {:<28} {:<14} {:>12} {:>10} {:>10} {:>12} {:>8} {:>12} {:>12} {:>8}", "name", "kind",
                   "predicted MB", "read MB", "write MB", "measured MB", "error", "pred GFLOP", "tensor GFLOP",
                   "error"));
  for (const OpCounterComparison& o : c.ops) {
    const PredictedOp& p = *o.predicted;
    line(fmt::format("  {:<28} {:<14} {:>12.3f} {:>10.3f} {:>10.3f} {:>12.3f} {:>8} {:>12.4f} {:>12} {:>8}", p.name,
                     to_string(p.kind), p.bytes / 1e6, o.measured_read_bytes / 1e6, o.measured_write_bytes / 1e6,
                     o.measured_bytes / 1e6, percent_text(o.bytes_error_percent), p.flops / 1e9,
                     o.measured_tensor_flops ? fmt::format("{:.4f}", *o.measured_tensor_flops / 1e9) : "-",
                     percent_text(o.flops_error_percent)));
  }
  if (!c.not_predicted.empty()) {
    line("");
    line("measured ranges the prediction does not have");
    for (const MeasuredOnlyCounterOp& m : c.not_predicted) {
      line(fmt::format("  {:<28} {:>4} occurrences, median {:.3f} MB", m.name, m.occurrences, m.measured_bytes / 1e6));
    }
  }
  return out;
}

}  // namespace k3::profiler
