// Request-level discrete-event simulation of serving (docs/serving.md): requests arrive, wait,
// are admitted into a replica's running batch when its memory holds them, and advance one
// iteration at a time. Each iteration is continuous batching with chunked prefill: every decoding
// sequence adds one token, prefill chunks fill the rest of the token budget (the default scheduler;
// sim/serving/scheduler.h), and the iteration takes StepTimeModel::step_us of exactly that batch. With prefill/decode
// disaggregation, prefill replicas hand each sequence's KV and KDA state to a decode replica over the fabric.
//
// Events are ordered by (time, kind, id): iteration ends first (they free memory), then transfers,
// then arrivals; ids break ties. No clocks, no randomness: the same input gives the same output.
// Invariants checked as it runs (k3::Error when broken): time never goes back, memory reserved on a
// replica never exceeds its capacity, and every token is processed exactly once.
#pragma once

#include "core/registry.h"
#include "core/scenario.h"
#include "sim/serving/scheduler.h"
#include "sim/serving/step_time_model.h"
#include "sim/workload/request.h"

#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

namespace k3::serving {

// Service-level objectives; 0 = no objective. A request meets them when its own TTFT and TPOT do.
struct Slo {
  double ttft_ms = 0;
  double tpot_ms = 0;
};

enum class Admission {
  accept_all,  // every request waits until it fits
  slo,         // reject at arrival when the predicted TTFT already misses the SLO, and admit into a
               // running batch only while the decode step stays within the TPOT SLO
};

struct ServingOptions {
  bool disaggregated = false;
  int replicas = 1;          // aggregated: replicas doing both phases
  int prefill_replicas = 1;  // disaggregated
  int decode_replicas = 1;
  BatchLimits limits;         // aggregated replicas, and prefill replicas
  BatchLimits decode_limits;  // decode replicas (disaggregated)
  Slo slo;
  Admission admission = Admission::accept_all;
  std::string scheduler = "fcfs";          // a registered scheduler (sim/serving/scheduler.h)
  Params scheduler_params;                 // read by that scheduler
  double queue_sample_interval_ms = 1000;  // spacing of the queue-length series
  bool record_schedule = false;            // keep every iteration (ServingResult::schedule), for a trace
  // Called with (requests finished or rejected, all requests) as they finish, at most 1,001 times. May be empty.
  std::function<void(int64_t done, int64_t total)> progress;
};

// What one replica of the deployment holds and costs, derived from the scenario.
struct ReplicaModel {
  explicit ReplicaModel(const Scenario& s, int64_t max_batched_tokens);
  StepTimeModel step;
  int gpus = 1;
  int attention_dp = 1;
  double kv_bytes_per_token = 0;        // per GPU of the attention group that holds the sequence
  double state_bytes_per_sequence = 0;  // per GPU (KDA recurrent + conv state)
  double capacity_bytes = 0;            // per GPU, for KV and state: usable HBM − weights − activations − reserve
  double transfer_latency_us = 0;       // KV/state hand-off (disaggregated), alpha
  double transfer_us_per_byte = 0;      // and per byte of one GPU's share
  long long max_positions = 0;          // the model's max_position_embeddings (0: no limit)
  // Bytes a sequence of `tokens` cached tokens holds on one GPU of its group.
  double sequence_bytes(double tokens) const { return tokens * kv_bytes_per_token + state_bytes_per_sequence; }
};

// Why a request was turned away at arrival.
enum class Rejection {
  none,
  beyond_positions,  // prompt + output exceed the model's positions
  memory,            // its KV and state never fit one replica's KV/state space, even alone
  ttft_admission,    // the queue ahead of it already exceeds the TTFT SLO (admission: slo)
};
inline constexpr Rejection kAllRejections[] = {Rejection::beyond_positions, Rejection::memory,
                                               Rejection::ttft_admission};

struct RequestOutcome {
  int64_t id = 0;
  double arrival_ms = 0;
  double first_token_ms = -1;  // -1 when rejected
  double finish_ms = -1;
  int64_t input_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  int64_t output_tokens = 0;
  bool rejected = false;
  Rejection rejection = Rejection::none;
  // Where and when it ran (-1: not reached): admitted into `replica`'s running batch (aggregated, or the prefill
  // replica); disaggregated, its KV and state arrived at `decode_replica` at handoff_ms and it was admitted there.
  int replica = -1;
  double admitted_ms = -1;
  int decode_replica = -1;
  double handoff_ms = -1;
  double decode_admitted_ms = -1;
  double ttft_ms() const { return first_token_ms - arrival_ms; }
  double e2e_ms() const { return finish_ms - arrival_ms; }
  // Mean time per output token after the first; 0 for one-token answers.
  double tpot_ms() const { return output_tokens > 1 ? (finish_ms - first_token_ms) / double(output_tokens - 1) : 0.0; }
};

struct Percentiles {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t count = 0;
};
// Nearest-rank percentiles (the smallest value with at least p% of the values at or below it).
Percentiles percentiles(std::vector<double> values);

struct QueueSample {
  double time_ms = 0;
  int64_t waiting = 0;         // arrived, not yet admitted (incl. sequences waiting for a decode replica)
  int64_t running = 0;         // in a running batch
  double memory_fraction = 0;  // reserved / capacity, busiest replica
};

// One iteration of one replica's running batch (ServingOptions::record_schedule).
struct IterationRecord {
  int replica = 0;
  double start_ms = 0, end_ms = 0;
  int64_t decode_sequences = 0;   // one token each
  int64_t prefill_sequences = 0;  // a chunk each
  int64_t prefill_tokens = 0;
};

struct ServingResult {
  std::vector<RequestOutcome> requests;  // in input order
  Percentiles ttft_ms, tpot_ms, e2e_ms;  // over completed requests
  int64_t completed = 0, rejected = 0, met_slo = 0;
  int64_t rejected_by[std::size(kAllRejections) + 1] = {};  // indexed by Rejection
  long long max_positions = 0;                              // the limits the rejections met: the model's positions,
  double kv_capacity_bytes_per_gpu = 0;                     // the smallest replica's KV/state space per GPU
  double duration_ms = 0;                                   // first arrival to last completion
  double output_tokens_per_s = 0;                           // over the duration
  double goodput_requests_per_s = 0;                        // completed requests that met the SLOs
  double goodput_tokens_per_s = 0;                          // their output tokens
  double tokens_per_s_per_gpu = 0;                          // output tokens over all GPUs of the deployment
  double tokens_per_s_per_user = 0;                         // mean over completed requests of 1 / TPOT
  int gpus = 0;
  std::vector<double> utilisation;  // per replica: busy time / duration (prefill replicas first)
  double max_memory_fraction = 0;   // largest reserved / capacity seen on any replica
  std::vector<QueueSample> queue;
  int64_t iterations = 0;
  int64_t prefill_tokens = 0;  // prompt tokens computed (cached ones excluded)
  int64_t decode_tokens = 0;   // output tokens produced by decode iterations
  // With record_schedule: every iteration in start order, and each replica's role ("aggregated", "prefill",
  // "decode"; prefill replicas first, as in `utilisation`).
  std::vector<IterationRecord> schedule;
  std::vector<std::string> replica_roles;
};

// `cached_prefix_tokens`, one per request or empty (none cached), comes from the prefix cache:
// those prompt tokens are not computed (their KV and state are loaded), at least one token is.
ServingResult simulate(const std::vector<workload::Request>& requests, const std::vector<int64_t>& cached_prefix_tokens,
                       const ReplicaModel& replica, const ServingOptions& options);
// The same with separate prefill and decode replica models (disaggregated deployments may differ).
ServingResult simulate(const std::vector<workload::Request>& requests, const std::vector<int64_t>& cached_prefix_tokens,
                       const ReplicaModel& prefill_replica, const ReplicaModel& decode_replica,
                       const ServingOptions& options);

}  // namespace k3::serving
