// Reports of a serving simulation: a terminal summary, JSON (summary, per-replica utilisation,
// queue series), CSV (one row per request) and a chart of queue lengths over time.
#pragma once

#include "plot/chart.h"
#include "sim/serving/serving_config.h"

#include <nlohmann/json.hpp>

#include <string>

namespace k3::serving {

std::string format_serving(const ServingScenario& s, const ServingResult& r);
nlohmann::ordered_json to_json(const ServingScenario& s, const ServingResult& r);
std::string requests_csv(const ServingResult& r);
plot::Chart queue_chart(const ServingResult& r);

}  // namespace k3::serving
