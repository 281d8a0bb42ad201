// Terminal and JSON reports of claim checks.
#pragma once

#include "sim/claims/claim.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace k3 {

std::string format_claim_results(const std::vector<ClaimResult>& results);
// `k3perf verify --json`: the common header (core/output_header.h, "k3perf-verify"), `summary` (claims and the count
// per verdict) and `claims`, each with its values: `reported` structured ({value, relative_tolerance} or {min, max},
// null for an open bound; unit; text as printed), `predicted` and `within_tolerance` (null when not modelled).
nlohmann::ordered_json to_json(const std::vector<ClaimResult>& results);
// The verdict as --fail-on and the JSON name it: reproduced, explained, contradicted, not_modelled.
std::string verdict_id(Verdict v);

}  // namespace k3
