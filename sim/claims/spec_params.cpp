#include "sim/claims/spec_params.h"

#include "core/error.h"

#include <fmt/format.h>

namespace k3 {

std::vector<std::string> spec_param_keys(std::vector<std::string> extra) {
  for (const char* k : {"draft_tokens", "drafter", "drafter_layers", "drafter_mlp_intermediate", "rollback",
                        "tokens_per_step", "accept_rates", "accepted_length_weights"}) {
    extra.push_back(k);
  }
  return extra;
}

int claim_draft_tokens(const ClaimInputs& c) {
  return static_cast<int>(param_count(c, "draft_tokens", 7, limit::draft_tokens));
}

DrafterSpec claim_drafter(const ClaimInputs& c) {
  DrafterSpec d;
  const std::string kind = param_string(c, "drafter", "block_parallel");
  try {
    d.kind = parse_drafter_kind(kind);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: key 'params.drafter': {}", c.file, e.what()));
  }
  d.layers = static_cast<int>(param_count(c, "drafter_layers", d.layers, limit::layers));
  d.mlp_intermediate =
      static_cast<int>(param_count(c, "drafter_mlp_intermediate", d.mlp_intermediate, limit::model_dim));
  return d;
}

RollbackKind claim_rollback(const ClaimInputs& c) {
  try {
    return parse_rollback_kind(param_string(c, "rollback", "replay_inputs"));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: key 'params.rollback': {}", c.file, e.what()));
  }
}

AcceptanceModel claim_acceptance(const ClaimInputs& c, int g, const std::string& tokens_key) {
  const bool mean = c.params && c.params->has(tokens_key);
  const bool rates = c.params && c.params->has("accept_rates");
  const bool weights = c.params && c.params->has("accepted_length_weights");
  if (int(mean) + int(rates) + int(weights) != 1) {
    throw InputError(
        fmt::format("{}: give exactly one acceptance: params.{}, params.accept_rates or "
                    "params.accepted_length_weights",
                    c.file, tokens_key));
  }
  try {
    if (mean) return AcceptanceModel::iid(iid_alpha_for_tokens_per_step(param_double(c, tokens_key, 1), g), g);
    if (rates) return AcceptanceModel::per_position(param_list(c, "accept_rates")).truncated(g);
    return AcceptanceModel::empirical(param_list(c, "accepted_length_weights")).truncated(g);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: acceptance params: {}", c.file, e.what()));
  }
}

}  // namespace k3
