// Speculative decoding from first principles (docs/spec.md). One round of a batch:
//   draft     the drafter proposes γ tokens per sequence, from its own op graph on the same GPUs:
//             autoregressive = γ one-token decode steps; block-parallel (DSpark) = one pass over a
//             γ-token block;
//   verify    the target's op graph in its verify phase: γ + 1 query tokens per sequence (attention
//             FLOPs grow, weights are read once, distinct experts touched grow with the tokens);
//   rollback  KDA state cannot be truncated: either every position's state is written during verify
//             (copy_states: γ extra state writes per KDA layer, always), or the small projected
//             inputs are kept and, when a draft is rejected, the accepted tokens are replayed from
//             the pre-verify state (replay_inputs: one state read + write, only on rejection).
// The round emits E[A + 1] tokens per sequence (sim/spec/acceptance.h); the baseline emits one per
// plain decode step. speedup = E[A + 1] · t_decode / (t_draft + t_verify + E[t_rollback]).
#pragma once

#include "core/model_config.h"
#include "core/scenario.h"
#include "sim/spec/acceptance.h"

#include <string>
#include <vector>

namespace k3 {

enum class DrafterKind { autoregressive, block_parallel };
enum class RollbackKind { replay_inputs, copy_states };
std::string to_string(DrafterKind k);
std::string to_string(RollbackKind k);
DrafterKind parse_drafter_kind(const std::string& name);    // "autoregressive" | "block_parallel"; InputError otherwise
RollbackKind parse_rollback_kind(const std::string& name);  // "replay_inputs" | "copy_states"

// The drafter: a small all-MLA model with the target's width, attention and vocabulary (K3-SPEC §8:
// public DSpark drafters are 2.3–3.6 B parameters over 5 MLA layers). Its input embedding is the
// target's; its dense MLP width sets its size (8192 gives ≈3.2 B with its own lm_head).
struct DrafterSpec {
  DrafterKind kind = DrafterKind::block_parallel;
  int layers = 5;
  int mlp_intermediate = 8192;
};
ModelConfig make_drafter_model(const ModelConfig& target, const DrafterSpec& spec);

// Costs of one round that do not depend on the acceptance, for one batch on one scenario's GPUs.
struct SpecStepCosts {
  int draft_tokens = 0;  // γ
  long long batch = 0;
  double decode_us = 0;                // plain one-token decode step of the target (the baseline)
  double draft_us = 0;                 // the drafter, for γ tokens
  double verify_us = 0;                // the target over γ + 1 tokens per sequence
  double replay_us = 0;                // replay_inputs, when a rejection happens (all sequences, worst case a = γ - 1)
  double copy_states_us = 0;           // copy_states, every round
  double decode_distinct_experts = 0;  // per GPU per MoE layer
  double verify_distinct_experts = 0;
  double drafter_params = 0;  // parameters of the drafter (with its lm_head)
};

// `target` is a decode scenario (its phase gives batch and context); the drafter runs with the
// target's tensor-parallel layout (no expert parallelism: it has no experts).
SpecStepCosts speculative_step_costs(const Scenario& target, const DrafterSpec& drafter, int draft_tokens);
// The drafter alone: time to propose `draft_tokens` tokens per sequence.
double draft_time_us(const Scenario& target, const DrafterSpec& drafter, int draft_tokens);
// KDA rollback time for one round in which `committed_tokens` of the γ + 1 verified are kept.
double rollback_time_us(const Scenario& target, RollbackKind kind, int draft_tokens, long long committed_tokens);

struct SpecOutcome {
  double tokens_per_step = 0;      // E[A + 1]
  double tokens_per_step_std = 0;  // sqrt(Var(A + 1))
  double rollback_us = 0;          // expected per round
  double round_us = 0;             // draft + verify + expected rollback
  double tokens_per_s = 0;         // whole batch
  double baseline_tokens_per_s = 0;
  double speedup = 0;
};
SpecOutcome speculative_outcome(const Scenario& target, const SpecStepCosts& costs, const AcceptanceModel& acceptance,
                                RollbackKind rollback);

// Claim inversion: the i.i.d. acceptance rate, and the tokens per step it gives, that a target
// speedup requires under these costs (bisection on α). `attainable` is false when even α = 1
// falls short; alpha is then 1.
struct RequiredAcceptance {
  bool attainable = false;
  double alpha = 0;
  double tokens_per_step = 0;
};
RequiredAcceptance acceptance_for_speedup(const Scenario& target, const SpecStepCosts& costs, RollbackKind rollback,
                                          double target_speedup);

}  // namespace k3
