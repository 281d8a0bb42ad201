#include "plot/views/sim_charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace k3::plot {

namespace {

// 1234567 -> "1,234,567".
std::string grouped(long long n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace

Chart pareto_chart(const plan::PlanResult& r) {
  Chart c;
  c.title = fmt::format("Configurations meeting the SLOs at {:g} requests/s", r.request_rate_per_s);
  c.x_label = "output tokens/s per GPU";
  c.y_label = "tokens/s per user (1 / TPOT)";
  Series all{"configurations", {}, SeriesStyle::scatter};
  Series front{"Pareto front", {}, SeriesStyle::line_and_markers};
  for (std::size_t i : r.ranked) {
    all.points.emplace_back(r.candidates[i].tokens_per_s_per_gpu, r.candidates[i].tokens_per_s_per_user);
  }
  for (std::size_t i : r.pareto) {
    front.points.emplace_back(r.candidates[i].tokens_per_s_per_gpu, r.candidates[i].tokens_per_s_per_user);
  }
  c.series = {all, front};
  return c;
}

std::vector<std::vector<std::string>> pareto_point_labels(const plan::PlanResult& r) {
  std::vector<std::vector<std::string>> labels(2);
  for (std::size_t i : r.ranked) labels[0].push_back(r.candidates[i].label());
  for (std::size_t i : r.pareto) labels[1].push_back(r.candidates[i].label());
  return labels;
}

Chart queue_chart(const serving::ServingResult& r) {
  Chart c;
  c.title = "Sequences over time";
  c.x_label = "time (s)";
  c.y_label = "sequences";
  Series waiting{"waiting", {}, SeriesStyle::line}, running{"running", {}, SeriesStyle::line};
  for (const serving::QueueSample& q : r.queue) {
    waiting.points.emplace_back(q.time_ms / 1000, double(q.waiting));
    running.points.emplace_back(q.time_ms / 1000, double(q.running));
  }
  c.series = {running, waiting};
  return c;
}

Chart spec_speedup_chart(const Scenario& base, const std::vector<SpecSweepRow>& rows) {
  std::map<std::string, Series> series;  // "profile, context" in name order
  for (const SpecSweepRow& row : rows) {
    Series& line = series[fmt::format("{}, {} tokens", row.profile, row.context_tokens)];
    line.name = fmt::format("{}, {} tokens", row.profile, row.context_tokens);
    line.style = SeriesStyle::line_and_markers;
    line.points.emplace_back(double(row.batch), row.outcome.speedup);
  }
  Chart c;
  c.title =
      fmt::format("speculative decoding: {} on {} x{}", base.model.name, base.hardware.name, base.parallelism.gpus());
  c.x_label = "batch (sequences)";
  c.y_label = "speedup over plain decode";
  c.x_log = true;
  for (auto& [key, line] : series) c.series.push_back(line);
  return c;
}

Chart cache_curve_chart(const std::vector<cache::CurvePoint>& curve, const std::string& tier, const std::string& source,
                        const std::string& model) {
  Chart c;
  c.title = fmt::format("Token hit rate vs {} capacity: {} ({})", tier, source, model);
  c.x_label = "capacity (tokens of KV)";
  c.y_label = "token hit rate (%)";
  c.x_log = true;
  c.y_range = AxisRange{0, 100};
  Series hybrid{"hybrid: KV and KDA state at the same boundary", {}, SeriesStyle::line_and_markers};
  Series kv_only{"KV only (a hit needing no state)", {}, SeriesStyle::line_and_markers};
  for (const cache::CurvePoint& p : curve) {
    hybrid.points.emplace_back(p.capacity_tokens, 100.0 * p.token_hit_rate);
    kv_only.points.emplace_back(p.capacity_tokens, 100.0 * p.kv_only_hit_rate);
  }
  c.series = {hybrid, kv_only};
  return c;
}

Chart breakeven_chart(const BreakevenResult& r, const MetricCurve& curve) {
  Chart c;
  c.title = fmt::format("{}: {} vs all-MLA", to_string(curve.metric), r.spec.deployment.model.name);
  c.x_label = "prompt tokens";
  c.y_label = unit_of(curve.metric);
  c.x_log = true;
  Series hybrid{"hybrid", {}, SeriesStyle::line_and_markers};
  Series mla{"all-MLA", {}, SeriesStyle::line_and_markers};
  for (std::size_t i = 0; i < curve.input_tokens.size(); ++i) {
    const double x = double(curve.input_tokens[i]);
    hybrid.points.emplace_back(x, curve.values[i].hybrid);  // non-finite points (nothing fits) are not drawn
    mla.points.emplace_back(x, curve.values[i].all_mla);
  }
  c.series = {hybrid, mla};
  // A log y axis when the values are positive and span more than two decades (memory and cost grow
  // from near nothing), so the crossing stays readable.
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  bool positive = true;
  for (const MetricPair& v : curve.values) {
    for (double y : {v.hybrid, v.all_mla}) {
      if (!std::isfinite(y)) continue;
      positive = positive && y > 0;
      lo = std::min(lo, y);
      hi = std::max(hi, y);
    }
  }
  c.y_log = positive && hi > 100 * lo;
  for (const Crossing& x : curve.crossings) {
    const MetricPair at = evaluate_breakeven_metric(r.spec, curve.metric, x.input_tokens);
    c.markers.push_back(
        {double(x.input_tokens), at.hybrid,
         fmt::format("{} wins from {} tokens", x.hybrid_wins_above ? "hybrid" : "all-MLA", grouped(x.input_tokens))});
  }
  return c;
}

}  // namespace k3::plot
