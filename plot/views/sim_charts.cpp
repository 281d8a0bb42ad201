#include "plot/views/sim_charts.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace k3::plot {

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
    line.points.emplace_back(std::log2(double(row.batch)), row.outcome.speedup);
  }
  Chart c;
  c.title =
      fmt::format("speculative decoding: {} on {} x{}", base.model.name, base.hardware.name, base.parallelism.gpus());
  c.x_label = "batch (log2)";
  c.y_label = "speedup over plain decode";
  for (auto& [key, line] : series) c.series.push_back(line);
  return c;
}

}  // namespace k3::plot
