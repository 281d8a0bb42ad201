// Reports of a capacity plan: the ranked table and the Pareto front for the terminal, every
// candidate as CSV and JSON (the Pareto chart is plot/views/sim_charts.h's).
#pragma once

#include "sim/plan/plan.h"

#include <nlohmann/json.hpp>

#include <string>

namespace k3::plan {

// The header echoes what the search ran with (model, precision, workload, SLOs, the space); when candidates are
// refused, a histogram of why, and when none is feasible, the limit that binds and what lifts it.
std::string format_plan(const PlanResult& r, const PlanSpace& space, const serving::ServingScenario& base,
                        std::size_t top);
std::string plan_csv(const PlanResult& r);
nlohmann::ordered_json to_json(const PlanResult& r, const PlanSpace& space);

}  // namespace k3::plan
