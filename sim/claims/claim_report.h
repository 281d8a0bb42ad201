// Terminal and JSON reports of claim checks.
#pragma once

#include "sim/claims/claim.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace k3 {

std::string format_claim_results(const std::vector<ClaimResult>& results);
nlohmann::ordered_json to_json(const std::vector<ClaimResult>& results);

}  // namespace k3
