// Capacity planning (docs/plan.md): search hardware type, tensor/attention-DP/expert parallelism,
// batch limits and aggregated vs prefill/decode-disaggregated (with P:D ratios) for the fewest
// replicas that meet the serving SLOs at a request rate; rank by GPUs or $/hour; report the
// Pareto front of output tokens/s per GPU against tokens/s per user.
//
// One candidate: the replica count comes from a first estimate (prefill work and decode steps at
// the batch limit) and is raised until a simulation of one replica (or one P:D unit) at its share
// of the rate meets the SLOs at the given percentile. Replicas behind least-loaded routing see
// about rate / replicas each, so one replica's simulation stands for all: a fixed-rate stream at
// that rate, or for a trace the requests one replica gets when the trace is dealt out in turn (so
// its bursts are split as routing splits them), arrivals scaled to the rate.
#pragma once

#include "core/yaml_reader.h"
#include "sim/serving/serving_config.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace k3::plan {

struct PlanSpace {
  std::vector<std::string> hardware;  // names or paths, as in a scenario's `hardware:`
  std::vector<int> tp, attention_dp, ep;
  std::vector<int64_t> max_sequences;
  std::vector<int64_t> max_batched_tokens;
  std::vector<std::string> modes;              // "aggregated", "disaggregated"
  std::vector<std::pair<int, int>> pd_ratios;  // prefill:decode replicas per unit
  int max_replicas = 64;                       // per candidate (aggregated replicas or P:D units)
  double slo_percentile = 90;                  // TTFT and TPOT at this percentile must meet the SLOs
  double max_rejected_fraction = 0.0;          // with admission control: rejections allowed
  int64_t sample_requests = 400;               // requests simulated per trial
  std::string rank_by = "gpus";                // "gpus" or "cost"
};

// Reads the `plan:` section (docs/plan.md#the-plan-section); the deployment's own values fill the
// lists it leaves out.
PlanSpace read_plan_space(const YamlNode& plan, const serving::ServingScenario& base);

// $/GPU-hour by hardware name, with the source of each (scenarios/prices/*.yaml).
struct Prices {
  std::map<std::string, double> per_gpu_hour;
  std::map<std::string, std::string> source;
};
Prices load_prices(const std::string& path);

struct Candidate {
  std::string hardware;  // the name as given in the plan
  Parallelism parallelism;
  serving::BatchLimits limits;
  bool disaggregated = false;
  int prefill_per_unit = 0, decode_per_unit = 0;
  // Outcome.
  bool feasible = false;
  std::string reason;  // why not, when infeasible
  int replicas = 0;    // aggregated replicas, or P:D units
  int gpus = 0;
  double dollars_per_hour = 0;      // 0 when the hardware has no price
  double ttft_ms = 0, tpot_ms = 0;  // at the SLO percentile, in the final trial
  double tokens_per_s_per_gpu = 0;
  double tokens_per_s_per_user = 0;
  int trials = 0;
  std::string label() const;  // "h200-sxm tp8 dp1 ep8 b64 t8192 agg"
};

struct PlanResult {
  std::vector<Candidate> candidates;  // every candidate, in search order
  std::vector<std::size_t> ranked;    // feasible ones, best first
  std::vector<std::size_t> pareto;    // feasible, not dominated in (tokens/s/GPU, tokens/s/user); by tokens/s/user
  double request_rate_per_s = 0;
};

// `workload` is the request mix (its arrival times are replaced by the rate being tested);
// `rate_per_s` the load to serve. `progress(done, total)` is called after each candidate.
PlanResult run_plan(const serving::ServingScenario& base, const PlanSpace& space, const serving::Workload& workload,
                    double rate_per_s, const Prices& prices, const DataPaths& data,
                    const std::function<void(std::size_t, std::size_t)>& progress = {});

// Indices of the points not dominated when both coordinates are better larger, sorted by x.
std::vector<std::size_t> pareto_front(const std::vector<std::pair<double, double>>& points);

}  // namespace k3::plan
