// Builds scenarios for claim evaluators from a mapping of scenario keys (a claim's params, or the
// `scenario` of a scenario_metric claim):
//   model, hardware, tp, attention_dp, ep, pp, weights, routed_experts, kda_state, kv_cache,
//   cuda_graphs, and for scenario_metric also phase, batch, context_tokens, prompt_tokens.
#pragma once

#include "core/scenario.h"
#include "sim/claims/claim.h"

#include <optional>
#include <string>
#include <vector>

namespace k3 {

// The params claim_scenario reads; evaluators add their own and call expect_params with both.
std::vector<std::string> scenario_param_keys(std::vector<std::string> extra = {});

// From the claim's params, with the phase given by the evaluator; validated.
Scenario claim_scenario(const ClaimInputs& c, const DataPaths& data, const Phase& phase,
                        const std::string& default_model, const std::string& default_hardware);
// From `keys` (a mapping of scenario_param_keys; an absent model or hardware takes the default;
// an empty default makes it required, and an absent hardware leaves a Hardware with no rates).
// Not validated: the caller validates, or skips an alternative whose layout is invalid.
Scenario scenario_from_keys(const YamlNode& keys, const std::string& claim_file, const DataPaths& data,
                            const Phase& phase, const std::string& default_model, const std::string& default_hardware);
// The same scenario with another model (a counterfactual or a baseline), precision defaults kept.
Scenario with_model(const Scenario& s, const ModelConfig& model);
// The same scenario on other hardware with `tp` (and ep = tp) GPUs; nullopt when the layout is invalid.
std::optional<Scenario> on_hardware(const Scenario& s, const Hardware& hw, int tp);

std::string gib(double bytes);  // "27.216 GiB"

}  // namespace k3
