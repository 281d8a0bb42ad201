// Synthetic request workloads, seeded and deterministic (the same spec and seed give the same
// requests on every platform: the generator draws from std::mt19937_64, whose sequence the C++
// standard fixes, through its own uniform and exponential transforms).
//
// One generator covers the shapes the cache questions need: sessions (conversations or agent loops)
// of several turns, where turn t's prompt is the shared system prompt + every earlier turn's user
// tokens and answer + turn t's new tokens (so each turn resends the previous prompt and adds to it),
// with sessions starting as a Poisson process or in bursts. One turn per session with a few shared
// system prompts is the "shared system prompt" workload.
//
// Block hashes are prefix-chained over content identities (system prompt k, session s's turn t user
// tokens or answer), so two prompts have equal hashes at block i exactly when their first i+1 blocks
// hold the same content.
#pragma once

#include "core/yaml_reader.h"
#include "sim/workload/request.h"

#include <cstdint>
#include <string>
#include <vector>

namespace k3::workload {

enum class ArrivalKind { poisson, bursty };

struct SessionWorkloadSpec {
  int64_t sessions = 1;
  int64_t turns_min = 1, turns_max = 1;                          // turns per session, uniform
  int64_t system_prompts = 1;                                    // distinct system prompts, one per session, uniform
  int64_t system_prompt_tokens = 0;                              // 0: none
  int64_t first_user_tokens_min = 1, first_user_tokens_max = 1;  // turn 1's own tokens (task, files)
  int64_t new_tokens_min = 1, new_tokens_max = 1;                // each later turn's new tokens (user or tool output)
  int64_t output_tokens_min = 1, output_tokens_max = 1;          // each turn's answer
  double think_time_ms_min = 0, think_time_ms_max = 0;           // from one turn's arrival to the next turn's
  ArrivalKind arrivals = ArrivalKind::poisson;                   // of session starts
  double sessions_per_s = 1;                                     // mean rate of session starts
  double mean_burst_sessions = 1;                                // bursty: sessions per burst (uniform in [1, 2m-1])
  int64_t block_tokens = 512;                                    // hash granularity of the generated block hashes
};

// Requests sorted by arrival (ties: by session, then turn), ids 0..n-1, session_id set.
std::vector<Request> generate_sessions(const SessionWorkloadSpec& spec, uint64_t seed);

// Reads a spec from YAML (scenarios/workloads/*.yaml, docs/cache.md): keys named as the fields,
// ranges as `[min, max]` or one number; `arrivals: poisson | bursty`. Unknown keys are errors.
// A prompt longer than limit::tokens, or requests whose memory (session_workload_bytes) exceeds
// limit::input_memory, is an InputError naming the figure.
SessionWorkloadSpec parse_session_workload(const YamlNode& node);

// An upper bound on the bytes generate_sessions(spec) holds at its peak (the requests and their block hashes).
double session_workload_bytes(const SessionWorkloadSpec& spec);

}  // namespace k3::workload
