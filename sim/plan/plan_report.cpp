#include "sim/plan/plan_report.h"

#include "core/output_header.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace k3::plan {

namespace {

template <typename T>
std::string joined(const std::vector<T>& values, auto to_text) {
  std::string out;
  for (const T& v : values) out += (out.empty() ? "" : ", ") + to_text(v);
  return out;
}

std::string number(int64_t v) { return std::to_string(v); }

// How sized P:D ratios were chosen, with the per-side rates of the best sized configuration (the first ranked, else
// the first that was sized).
std::string sizing(const PlanResult& r) {
  const Candidate* shown = nullptr;
  for (std::size_t i : r.ranked) {
    if (r.candidates[i].pd_sized) {
      shown = &r.candidates[i];
      break;
    }
  }
  for (std::size_t i = 0; i < r.candidates.size() && !shown; ++i) {
    if (r.candidates[i].pd_sized && r.candidates[i].rated_prefill > 0) shown = &r.candidates[i];
  }
  bool any = false;
  for (const Candidate& c : r.candidates) any = any || c.pd_sized;
  if (!any) return "";
  std::string out =
      "  P:D        sized per configuration from one replica's requests/s on each side (prefill at its token budget,\n"
      "             decode at the largest batch within TPOT): x:y = rate / those rates, then each side is simulated "
      "at\n"
      "             its share and raised until it meets its SLO\n";
  if (!shown) return out;
  return out + fmt::format("             {} ({}): prefill {:.3g}/s, decode {:.3g}/s (batch {}) give {}:{}\n",
                           shown->feasible ? "best sized" : "e.g.", shown->label(), shown->prefill_rate_per_s,
                           shown->decode_rate_per_s, shown->decode_batch, shown->rated_prefill, shown->rated_decode);
}

std::string echo(const PlanResult& r, const PlanSpace& space, const serving::ServingScenario& base) {
  const Precision& p = base.deployment.precision;
  const serving::RequestSource& rq = base.requests;
  const serving::Slo& slo = base.options.slo;
  std::string out;
  out += fmt::format("plan       {} on {}\n", base.deployment.model.name,
                     joined(space.hardware, [](const std::string& h) { return h; }));
  out +=
      fmt::format("  precision  weights {}, routed experts {}, KV {}, KDA state {}, GEMMs {}\n", to_string(p.weights),
                  to_string(p.routed_experts), joined(space.kv_cache, [](StorageFormat f) { return to_string(f); }),
                  joined(space.kda_state, [](StorageFormat f) { return to_string(f); }), to_string(p.gemm_compute));
  if (!rq.trace_path.empty()) {
    out +=
        fmt::format("  workload   trace {} at its mean rate, {:g} requests/s\n", rq.trace_path, r.request_rate_per_s);
  } else {
    out += fmt::format("  workload   {:g} requests/s of {}-token prompts ({} cached) and {}-token answers\n",
                       r.request_rate_per_s, rq.input_tokens, rq.cached_tokens, rq.output_tokens);
  }
  std::string slos;
  if (slo.ttft_ms > 0) slos += fmt::format("TTFT <= {:g} ms", slo.ttft_ms);
  if (slo.tpot_ms > 0) slos += fmt::format("{}TPOT <= {:g} ms", slos.empty() ? "" : ", ", slo.tpot_ms);
  out += fmt::format("  SLOs       p{:g} {}{}\n", space.slo_percentile, slos,
                     space.max_rejected_fraction > 0
                         ? fmt::format(", at most {:g} % rejected", 100 * space.max_rejected_fraction)
                         : "");
  std::string modes = joined(space.modes, [&](const std::string& m) {
    return m == "disaggregated" ? "disaggregated " + joined(space.pd_ratios,
                                                            [](const std::pair<int, int>& pd) {
                                                              return pd.first == 0
                                                                         ? std::string("P:D sized")
                                                                         : fmt::format("{}:{}", pd.first, pd.second);
                                                            })
                                : m;
  });
  out += fmt::format(
      "  search     tp {}; attention_dp {}; ep {}; max_sequences {}; max_batched_tokens {}; {}; up to {} "
      "replicas{}\n",
      joined(space.tp, number), joined(space.attention_dp, number), joined(space.ep, number),
      joined(space.max_sequences, number), joined(space.max_batched_tokens, number), modes, space.max_replicas,
      space.max_gpus > 0 ? fmt::format(" and {} GPUs", space.max_gpus) : "");
  return out + sizing(r) + "\n";
}

// How far a simulated candidate is from its SLOs: the larger of measured / allowed.
double slo_excess(const Candidate& c, const serving::Slo& slo) {
  double x = 0;
  if (slo.ttft_ms > 0) x = std::max(x, c.ttft_ms / slo.ttft_ms);
  if (slo.tpot_ms > 0) x = std::max(x, c.tpot_ms / slo.tpot_ms);
  return x;
}

std::string refusals(const PlanResult& r, const PlanSpace& space, const serving::Slo& slo) {
  std::map<Refusal, std::vector<std::size_t>> by;
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    if (!r.candidates[i].feasible) by[r.candidates[i].refusal].push_back(i);
  }
  if (by.empty()) return "";
  std::vector<std::pair<Refusal, std::vector<std::size_t>>> rows(by.begin(), by.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::string out = "\nwhy not (first refusal of each configuration; e.g. one of them)\n";
  for (const auto& [why, members] : rows) {
    const Candidate& c = r.candidates[members.front()];
    out += fmt::format("  {:>5}  {:<32}{}: {}\n", members.size(), to_string(why), c.label(), c.reason);
  }
  if (!r.ranked.empty()) return out;
  // Nothing feasible: the candidate nearest its limit (needed / limit, replicas or GPUs) names the limit that binds.
  const Candidate* closest = nullptr;
  auto over = [&space](const Candidate& c) {
    return double(c.needed) / (c.refusal == Refusal::estimate_gpus ? space.max_gpus : space.max_replicas);
  };
  for (Refusal limit : {Refusal::estimate_replicas, Refusal::estimate_gpus}) {
    for (std::size_t i : by[limit]) {
      if (!closest || over(r.candidates[i]) < over(*closest)) closest = &r.candidates[i];
    }
  }
  if (closest) {
    const bool gpus = closest->refusal == Refusal::estimate_gpus;
    out += fmt::format("binding limit: {} ({}, the closest); --set {}={} lets it be simulated\n", closest->reason,
                       closest->label(), gpus ? "plan.max_gpus" : "plan.max_replicas", closest->needed);
    return out;
  }
  for (std::size_t i : by[Refusal::slos_missed]) {
    if (!closest || slo_excess(r.candidates[i], slo) < slo_excess(*closest, slo)) closest = &r.candidates[i];
  }
  if (closest) {
    out += fmt::format("binding limit: {} ({}, the closest)\n", closest->reason, closest->label());
  } else {
    out += fmt::format("binding limit: none; every configuration is refused before its replica count matters ({})\n",
                       to_string(rows.front().first));
  }
  return out;
}

std::string row(const Candidate& c) {
  const std::string cost = c.dollars_per_hour > 0 ? fmt::format("{:.2f}", c.dollars_per_hour) : "-";
  return fmt::format("  {:<56}{:>9}{:>6}{:>10}{:>10}{:>10}{:>11.1f}{:>11.1f}\n", c.label(), c.replicas, c.gpus, cost,
                     fmt::format("{:.0f}", c.ttft_ms), fmt::format("{:.1f}", c.tpot_ms), c.tokens_per_s_per_gpu,
                     c.tokens_per_s_per_user);
}

std::string header() {
  return fmt::format("  {:<56}{:>9}{:>6}{:>10}{:>10}{:>10}{:>11}{:>11}\n", "configuration", "replicas", "GPUs",
                     "$/hour", "TTFT ms", "TPOT ms", "tok/s/GPU", "tok/s/user");
}

}  // namespace

std::string format_plan(const PlanResult& r, const PlanSpace& space, const serving::ServingScenario& base,
                        std::size_t top) {
  std::size_t infeasible = r.candidates.size() - r.ranked.size();
  std::string out = echo(r, space, base);
  out += fmt::format("{} configurations at {:g} requests/s: {} meet the SLOs (p{:g}), {} do not\n", r.candidates.size(),
                     r.request_rate_per_s, r.ranked.size(), space.slo_percentile, infeasible);
  if (!r.ranked.empty()) {
    out += fmt::format("\nbest by {} (replicas = aggregated replicas or P:D units; a sized P:D is one unit)\n",
                       space.rank_by == "cost" ? "$/hour" : "GPUs");
    out += header();
    for (std::size_t i = 0; i < std::min(top, r.ranked.size()); ++i) out += row(r.candidates[r.ranked[i]]);
    out += "\nPareto front (tokens/s per GPU vs tokens/s per user)\n" + header();
    for (std::size_t i : r.pareto) out += row(r.candidates[i]);
  }
  return out + refusals(r, space, base.options.slo);
}

std::string plan_csv(const PlanResult& r) {
  std::string out =
      "hardware,tp,attention_dp,ep,max_sequences,max_batched_tokens,mode,prefill_per_unit,decode_per_unit,kv_cache,"
      "kda_state,feasible,replicas,gpus,dollars_per_hour,ttft_ms,tpot_ms,tokens_per_s_per_gpu,tokens_per_s_per_user,"
      "pareto,refusal,reason\n";
  std::vector<bool> on_front(r.candidates.size(), false);
  for (std::size_t i : r.pareto) on_front[i] = true;
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const Candidate& c = r.candidates[i];
    std::string reason = c.reason;
    for (char& ch : reason) {
      if (ch == ',' || ch == '"') ch = ';';
    }
    // A candidate refused before any simulation has no TTFT or TPOT: empty cells, not zeros.
    const std::string ttft = c.trials > 0 ? fmt::format("{:.4f}", c.ttft_ms) : "";
    const std::string tpot = c.trials > 0 ? fmt::format("{:.4f}", c.tpot_ms) : "";
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.4f},{},{},{:.4f},{:.4f},{},{},{}\n", c.hardware,
                       c.parallelism.tp, c.parallelism.attention_dp, c.parallelism.ep, c.limits.max_sequences,
                       c.limits.max_batched_tokens, c.disaggregated ? "disaggregated" : "aggregated",
                       c.prefill_per_unit, c.decode_per_unit, to_string(c.kv_cache), to_string(c.kda_state),
                       c.feasible ? 1 : 0, c.replicas, c.gpus, c.dollars_per_hour, ttft, tpot, c.tokens_per_s_per_gpu,
                       c.tokens_per_s_per_user, on_front[i] ? 1 : 0, c.feasible ? "" : to_string(c.refusal), reason);
  }
  return out;
}

nlohmann::ordered_json to_json(const PlanResult& r, const PlanSpace& space) {
  nlohmann::ordered_json j = output_header("k3perf-plan", 1);
  j["request_rate_per_s"] = r.request_rate_per_s;
  j["rank_by"] = space.rank_by;
  j["slo_percentile"] = space.slo_percentile;
  auto cand = [](const Candidate& c) {
    return nlohmann::ordered_json{
        {"label", c.label()},
        {"hardware", c.hardware},
        {"tp", c.parallelism.tp},
        {"attention_dp", c.parallelism.attention_dp},
        {"ep", c.parallelism.ep},
        {"max_sequences", c.limits.max_sequences},
        {"max_batched_tokens", c.limits.max_batched_tokens},
        {"mode", c.disaggregated ? "disaggregated" : "aggregated"},
        {"prefill_per_unit", c.prefill_per_unit},
        {"decode_per_unit", c.decode_per_unit},
        {"pd_sized", c.pd_sized},
        {"prefill_replica_rate_per_s", c.prefill_rate_per_s},
        {"decode_replica_rate_per_s", c.decode_rate_per_s},
        {"decode_batch", c.decode_batch},
        {"rated_prefill", c.rated_prefill},
        {"rated_decode", c.rated_decode},
        {"kv_cache", to_string(c.kv_cache)},
        {"kda_state", to_string(c.kda_state)},
        {"feasible", c.feasible},
        {"refusal", c.feasible ? nlohmann::ordered_json() : nlohmann::ordered_json(to_string(c.refusal))},
        {"reason", c.reason},
        {"replicas", c.replicas},
        {"gpus", c.gpus},
        {"dollars_per_hour", c.dollars_per_hour},
        {"ttft_ms", c.trials > 0 ? nlohmann::ordered_json(c.ttft_ms) : nlohmann::ordered_json()},
        {"tpot_ms", c.trials > 0 ? nlohmann::ordered_json(c.tpot_ms) : nlohmann::ordered_json()},
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
