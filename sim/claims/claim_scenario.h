// Builds scenarios for claim evaluators from a claim's params:
//   model, hardware, tp, attention_dp, ep, pp, kda_state, kv_cache, routed_experts, cuda_graphs.
#pragma once

#include "core/scenario.h"
#include "sim/claims/claim.h"

namespace k3 {

Scenario claim_scenario(const Claim& c, const DataPaths& data, const Phase& phase,
                        const std::string& default_model, const std::string& default_hardware);
// The same scenario with another model (a counterfactual or a baseline), precision defaults kept.
Scenario with_model(const Scenario& s, const ModelConfig& model);

std::string gib(double bytes);  // "27.22 GiB"

}  // namespace k3
