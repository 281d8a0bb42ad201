// Break-even of the hybrid against its all-MLA counterfactual (docs/breakeven.md): for a workload
// shape (prompt length, answer length, cached prefix, batch) on one deployment, the prompt length at
// which K3's hybrid starts to win, separately per metric:
//   memory_per_request      KV + KDA state of one request at its end (whole replica), lower wins
//   tpot                    decode step time at the workload's batch, context = prefix + prompt + answer/2
//   throughput_at_budget    decode tokens/s with each model at the largest batch its memory allows
//   cost_per_million_tokens $ per million generated tokens: the prompt's prefill (batch 1, the whole
//                           replica) plus the answer's decode at the throughput-at-budget batch
// Curves are sampled on a log grid; each sign change of the advantage is refined by bisection on
// integer token counts. Deterministic.
#pragma once

#include "core/scenario.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace k3 {

enum class BreakevenMetric { memory_per_request, tpot, throughput_at_budget, cost_per_million_tokens };
inline constexpr BreakevenMetric kAllBreakevenMetrics[] = {BreakevenMetric::memory_per_request, BreakevenMetric::tpot,
                                                           BreakevenMetric::throughput_at_budget,
                                                           BreakevenMetric::cost_per_million_tokens};
std::string to_string(BreakevenMetric m);
std::string unit_of(BreakevenMetric m);  // "GiB", "ms", "tok/s", "USD/M tokens"
bool higher_is_better(BreakevenMetric m);

struct BreakevenSpec {
  Scenario deployment;  // the hybrid model on its GPUs; its phase is ignored
  long long output_tokens = 512;
  long long cached_prefix_tokens = 0;
  long long batch = 16;  // the TPOT batch
  long long min_input_tokens = 256;
  long long max_input_tokens = 1 << 20;
  int points = 33;           // log-spaced curve points
  double gpu_hour_usd = 0;   // price of one GPU-hour; 0 leaves the cost metric out
  std::string price_source;  // where the price came from
};

// Reads a break-even file (docs/breakeven.md): `scenario:` (a path relative to the file), `workload:`
// {output_tokens, cached_prefix_tokens, batch}, `input_tokens:` {min, max, points}, optional
// `gpu_hour_usd: {value, source}`. `sets` edit the deployment scenario as `k3perf predict --set` does.
BreakevenSpec load_breakeven_spec(const std::string& path, const DataPaths& data,
                                  const std::vector<std::string>& sets = {});

struct MetricPair {
  double hybrid = 0;
  double all_mla = 0;
};
// One metric at one prompt length, for both models.
MetricPair evaluate_breakeven_metric(const BreakevenSpec& spec, BreakevenMetric m, long long input_tokens);
// > 0 where the hybrid is better (lower, or higher for throughput), < 0 where it loses, 0 at a tie.
double hybrid_advantage(BreakevenMetric m, const MetricPair& v);

// The smallest integer in (lo, hi] whose advantage has the sign of advantage(hi), given that
// advantage(lo) and advantage(hi) have different signs (zero counts as its own side).
long long bisect_crossing(const std::function<double(long long)>& advantage, long long lo, long long hi);

struct Crossing {
  long long input_tokens = 0;  // first prompt length on the new side
  bool hybrid_wins_above = false;
};

struct MetricCurve {
  BreakevenMetric metric;
  std::vector<long long> input_tokens;
  std::vector<MetricPair> values;
  std::vector<Crossing> crossings;
  bool hybrid_wins_at_min = false;
  long long longest_comparable_tokens = 0;         // > 0 when neither model fits a request beyond this length
  bool hybrid_wins(long long input_tokens) const;  // from the sign at the minimum and the crossings
};

struct BreakevenResult {
  BreakevenSpec spec;
  std::vector<MetricCurve> curves;  // one per metric (cost only with a price)
};

BreakevenResult solve_breakeven(const BreakevenSpec& spec);

// Share of `input_lengths` (e.g. a trace's prompt lengths) on which the hybrid loses this metric;
// lengths that fit neither model are left out.
double losing_share(const MetricCurve& curve, const std::vector<long long>& input_lengths);

// One row per prompt length, both models per metric; columns carry units ("tpot_ms_hybrid", "tpot_ms_all_mla",
// "tpot_hybrid_wins").
std::string breakeven_csv(const BreakevenResult& r);
std::string format_breakeven(const BreakevenResult& r);  // the terminal summary
// The deployment and workload, per metric its unit, crossings and reach, and `curve`: one object per prompt length
// with the CSV's columns (a list of rows, as a data frame reads it; null where the CSV has inf: the model does not
// fit). `losing_shares`, when given (one per curve), adds each metric's share of a trace's prompts on the losing side.
nlohmann::ordered_json to_json(const BreakevenResult& r, const std::vector<double>& losing_shares = {});

}  // namespace k3
