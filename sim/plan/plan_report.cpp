#include "sim/plan/plan_report.h"

#include <fmt/format.h>

namespace k3::plan {

namespace {

std::string row(const Candidate& c) {
  const std::string cost = c.dollars_per_hour > 0 ? fmt::format("{:.2f}", c.dollars_per_hour) : "-";
  return fmt::format("  {:<44}{:>9}{:>6}{:>10}{:>10}{:>10}{:>11.1f}{:>11.1f}\n", c.label(), c.replicas, c.gpus, cost,
                     fmt::format("{:.0f}", c.ttft_ms), fmt::format("{:.1f}", c.tpot_ms), c.tokens_per_s_per_gpu,
                     c.tokens_per_s_per_user);
}

std::string header() {
  return fmt::format("  {:<44}{:>9}{:>6}{:>10}{:>10}{:>10}{:>11}{:>11}\n", "configuration", "replicas", "GPUs",
                     "$/hour", "TTFT ms", "TPOT ms", "tok/s/GPU", "tok/s/user");
}

}  // namespace

std::string format_plan(const PlanResult& r, const PlanSpace& space, std::size_t top) {
  std::size_t infeasible = r.candidates.size() - r.ranked.size();
  std::string out =
      fmt::format("{} configurations at {:g} requests/s: {} meet the SLOs (p{:g}), {} do not\n", r.candidates.size(),
                  r.request_rate_per_s, r.ranked.size(), space.slo_percentile, infeasible);
  out += fmt::format("\nbest by {} (replicas = aggregated replicas or P:D units)\n",
                     space.rank_by == "cost" ? "$/hour" : "GPUs");
  out += header();
  for (std::size_t i = 0; i < std::min(top, r.ranked.size()); ++i) out += row(r.candidates[r.ranked[i]]);
  out += "\nPareto front (tokens/s per GPU vs tokens/s per user)\n" + header();
  for (std::size_t i : r.pareto) out += row(r.candidates[i]);
  return out;
}

std::string plan_csv(const PlanResult& r) {
  std::string out =
      "hardware,tp,attention_dp,ep,max_sequences,max_batched_tokens,mode,prefill_per_unit,decode_per_unit,feasible,"
      "replicas,gpus,dollars_per_hour,ttft_ms,tpot_ms,tokens_per_s_per_gpu,tokens_per_s_per_user,pareto,reason\n";
  std::vector<bool> on_front(r.candidates.size(), false);
  for (std::size_t i : r.pareto) on_front[i] = true;
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const Candidate& c = r.candidates[i];
    std::string reason = c.reason;
    for (char& ch : reason) {
      if (ch == ',' || ch == '"') ch = ';';
    }
    out +=
        fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{},{}\n", c.hardware,
                    c.parallelism.tp, c.parallelism.attention_dp, c.parallelism.ep, c.limits.max_sequences,
                    c.limits.max_batched_tokens, c.disaggregated ? "disaggregated" : "aggregated", c.prefill_per_unit,
                    c.decode_per_unit, c.feasible ? 1 : 0, c.replicas, c.gpus, c.dollars_per_hour, c.ttft_ms, c.tpot_ms,
                    c.tokens_per_s_per_gpu, c.tokens_per_s_per_user, on_front[i] ? 1 : 0, reason);
  }
  return out;
}

nlohmann::ordered_json to_json(const PlanResult& r, const PlanSpace& space) {
  nlohmann::ordered_json j;
  j["request_rate_per_s"] = r.request_rate_per_s;
  j["rank_by"] = space.rank_by;
  j["slo_percentile"] = space.slo_percentile;
  auto cand = [](const Candidate& c) {
    return nlohmann::ordered_json{{"label", c.label()},
                                  {"hardware", c.hardware},
                                  {"tp", c.parallelism.tp},
                                  {"attention_dp", c.parallelism.attention_dp},
                                  {"ep", c.parallelism.ep},
                                  {"max_sequences", c.limits.max_sequences},
                                  {"max_batched_tokens", c.limits.max_batched_tokens},
                                  {"mode", c.disaggregated ? "disaggregated" : "aggregated"},
                                  {"prefill_per_unit", c.prefill_per_unit},
                                  {"decode_per_unit", c.decode_per_unit},
                                  {"feasible", c.feasible},
                                  {"reason", c.reason},
                                  {"replicas", c.replicas},
                                  {"gpus", c.gpus},
                                  {"dollars_per_hour", c.dollars_per_hour},
                                  {"ttft_ms", c.ttft_ms},
                                  {"tpot_ms", c.tpot_ms},
                                  {"tokens_per_s_per_gpu", c.tokens_per_s_per_gpu},
                                  {"tokens_per_s_per_user", c.tokens_per_s_per_user},
                                  {"trials", c.trials}};
  };
  j["ranked"] = nlohmann::ordered_json::array();
  for (std::size_t i : r.ranked) j["ranked"].push_back(cand(r.candidates[i]));
  j["pareto"] = nlohmann::ordered_json::array();
  for (std::size_t i : r.pareto) j["pareto"].push_back(cand(r.candidates[i]));
  j["candidates"] = nlohmann::ordered_json::array();
  for (const Candidate& c : r.candidates) j["candidates"].push_back(cand(c));
  return j;
}

}  // namespace k3::plan
