// Capacity planning (docs/plan.md): search hardware type, tensor/attention-DP/expert parallelism,
// batch limits and aggregated vs prefill/decode-disaggregated (P:D sized from the workload, or fixed
// ratios) for the fewest replicas that meet the serving SLOs at a request rate; rank by GPUs or
// $/hour; report the Pareto front of output tokens/s per GPU against tokens/s per user.
//
// One candidate: the replica count comes from a first estimate (prefill work and decode steps at
// the batch limit) and is raised until a simulation of one replica (or one P:D unit) at its share
// of the rate meets the SLOs at the given percentile. Replicas behind least-loaded routing see
// about rate / replicas each, so one replica's simulation stands for all: a fixed-rate stream at
// that rate, or for a trace the requests one replica gets when the trace is dealt out in turn (so
// its bursts are split as routing splits them), arrivals scaled to the rate.
//
// A sized P:D (`pd_ratios: auto`) is one unit of x prefill and y decode replicas: one replica of
// each side has a sustainable rate from the step-time model (prefill: its token budget's throughput;
// decode: the largest batch whose step meets the TPOT SLO, over the answer's steps), x and y are the
// fewest replicas that carry the rate at those rates, and each side is then simulated at its share
// (rate / x, rate / y) and raised until its SLO holds.
#pragma once

#include "core/dtype.h"
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
  std::vector<std::pair<int, int>> pd_ratios;  // prefill:decode replicas per unit; {0, 0}: sized ("auto")
  std::vector<StorageFormat> kv_cache;         // MLA cache formats (bf16, fp8)
  std::vector<StorageFormat> kda_state;        // KDA state formats (fp32, bf16)
  int max_replicas = 64;       // per candidate: aggregated replicas, P:D units, or a sized P:D's replicas of each side
  int max_gpus = 0;            // GPUs of all replicas of a candidate; 0: no limit
  double slo_percentile = 90;  // TTFT and TPOT at this percentile must meet the SLOs
  double max_rejected_fraction = 0.0;  // with admission control: rejections allowed
  int64_t sample_requests = 400;       // requests simulated per trial
  std::string rank_by = "gpus";        // "gpus" or "cost"
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

// Why a candidate is not feasible, from the first check that refuses it.
enum class Refusal {
  none,
  layout,             // the deployment does not validate (e.g. ep does not divide the GPUs)
  weights,            // the weights leave no memory for KV and state
  one_sequence,       // one sequence alone decodes slower than the TPOT SLO
  request_memory,     // a mean request's KV and state do not fit
  estimate_replicas,  // the first estimate needs more than plan.max_replicas
  estimate_gpus,      // the first estimate needs more than plan.max_gpus
  slos_missed,        // simulated up to the limit, or until more replicas stopped helping, without meeting the SLOs
};
std::string to_string(Refusal r);  // a short phrase for the report's histogram

struct Candidate {
  std::string hardware;  // the name as given in the plan
  Parallelism parallelism;
  serving::BatchLimits limits;
  bool disaggregated = false;
  bool pd_sized = false;                          // P:D sized from the per-side rates: one unit of x:y
  int prefill_per_unit = 0, decode_per_unit = 0;  // sized: x and y once sized (0 before)
  StorageFormat kv_cache = StorageFormat::bf16, kda_state = StorageFormat::fp32;
  // Outcome.
  bool feasible = false;
  Refusal refusal = Refusal::none;
  std::string reason;  // why not, when infeasible
  int needed = 0;      // the first estimate's replicas (or units), or GPUs for estimate_gpus; slos_missed: last tried
  int replicas = 0;    // aggregated replicas, or P:D units
  int gpus = 0;
  double dollars_per_hour = 0;      // 0 when the hardware has no price
  double ttft_ms = 0, tpot_ms = 0;  // at the SLO percentile, in the final trial (none when trials == 0)
  double tokens_per_s_per_gpu = 0;
  double tokens_per_s_per_user = 0;
  int trials = 0;
  // Sized P:D: one replica's sustainable requests/s on each side (step-time model), the decode batch that meets
  // the TPOT SLO, and the x:y those rates give before the simulated check raised either side.
  double prefill_rate_per_s = 0, decode_rate_per_s = 0;
  int64_t decode_batch = 0;
  int rated_prefill = 0, rated_decode = 0;
  // "h200-sxm tp8 dp1 ep8 b64 t8192 agg"; " kv fp8", " state bf16" before the mode when not bf16 / fp32.
  std::string label() const;
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

// The fewest prefill and decode replicas x, y whose rates carry `rate_per_s` (x · prefill_rate and y · decode_rate
// at least the rate), hence the fewest GPUs: the sides carry the rate independently, so GPUs = x · prefill GPUs +
// y · decode GPUs is least at each side's fewest (the balanced ratio prefill_rate : decode_rate rounded up on both
// sides). A count beyond the range of an int (or from a rate that is not positive) is INT_MAX.
std::pair<int, int> size_pd(double rate_per_s, double prefill_rate_per_s, double decode_rate_per_s);

// The one-command question (`k3perf plan --model M --hardware H --isl ... --rate ... --ttft-ms ...`): each value
// given becomes an edit of the serving file, as `--set` would write it, so a file's keys are overridden and
// checked the same way. Without a file the edits apply to scenarios/serving/plan-defaults.yaml.
struct PlanQuestion {
  std::string model;
  std::vector<std::string> hardware;  // the first is the deployment's; all are searched
  int64_t input_tokens = 0, output_tokens = 0;
  double rate_per_s = 0;
  double prefix_hit = -1;  // fraction of each prompt the prefix cache holds; < 0: not given
  double ttft_ms = 0, tpot_ms = 0;
  int max_gpus = 0;
  std::vector<std::string> sets() const;
};
// scenarios/serving/plan-defaults.yaml of the data folder (the serving folder beside its prices folder).
std::string plan_defaults_file(const DataPaths& data);

// Indices of the points not dominated when both coordinates are better larger, sorted by x.
std::vector<std::size_t> pareto_front(const std::vector<std::pair<double, double>>& points);

}  // namespace k3::plan
