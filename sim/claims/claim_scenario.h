// Builds scenarios for claim evaluators from a claim's params:
//   model, hardware, tp, attention_dp, ep, pp, kda_state, kv_cache, routed_experts, cuda_graphs.
#pragma once

#include "core/scenario.h"
#include "sim/claims/claim.h"

#include <optional>
#include <string>
#include <vector>

namespace k3 {

// The params claim_scenario reads; evaluators add their own and call expect_params with both.
std::vector<std::string> scenario_param_keys(std::vector<std::string> extra = {});

Scenario claim_scenario(const Claim& c, const DataPaths& data, const Phase& phase,
                        const std::string& default_model, const std::string& default_hardware);
// The same scenario with another model (a counterfactual or a baseline), precision defaults kept.
Scenario with_model(const Scenario& s, const ModelConfig& model);
// The same scenario on other hardware with `tp` (and ep = tp) GPUs; nullopt when the layout is invalid.
std::optional<Scenario> on_hardware(const Scenario& s, const Hardware& hw, int tp);

std::string gib(double bytes);  // "27.216 GiB"

}  // namespace k3
