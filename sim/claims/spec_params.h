// Claim params shared by the speculative-decoding evaluators (docs/verify.md):
//   draft_tokens (7), drafter (block_parallel | autoregressive), drafter_layers (5),
//   drafter_mlp_intermediate (8192), rollback (replay_inputs | copy_states), and one acceptance:
//   tokens_per_step (mean accepted length, read as an i.i.d. rate), accept_rates (p_1..p_γ) or
//   accepted_length_weights (frequency of 1..γ+1 tokens per step).
#pragma once

#include "sim/claims/claim.h"
#include "sim/spec/acceptance.h"
#include "sim/spec/speculative.h"

#include <string>
#include <vector>

namespace k3 {

std::vector<std::string> spec_param_keys(std::vector<std::string> extra = {});
int claim_draft_tokens(const ClaimInputs& c);
DrafterSpec claim_drafter(const ClaimInputs& c);
RollbackKind claim_rollback(const ClaimInputs& c);
// The acceptance given under `tokens_key` (a mean), `accept_rates` or `accepted_length_weights`;
// InputError naming the claim file when none or more than one is given.
AcceptanceModel claim_acceptance(const ClaimInputs& c, int draft_tokens,
                                 const std::string& tokens_key = "tokens_per_step");

}  // namespace k3
