// Reports of a serving simulation: a terminal summary, JSON (summary, per-replica utilisation,
// queue series) and CSV (one row per request); the chart of queue lengths is plot/views/sim_charts.h's.
#pragma once

#include "sim/serving/serving_config.h"

#include <nlohmann/json.hpp>

#include <string>

namespace k3::serving {

std::string format_serving(const ServingScenario& s, const ServingResult& r);
nlohmann::ordered_json to_json(const ServingScenario& s, const ServingResult& r);
std::string requests_csv(const ServingResult& r);

}  // namespace k3::serving
