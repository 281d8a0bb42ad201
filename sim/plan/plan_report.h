// Reports of a capacity plan: the ranked table and the Pareto front for the terminal, every
// candidate as CSV and JSON (the Pareto chart is plot/views/sim_charts.h's).
#pragma once

#include "sim/plan/plan.h"

#include <nlohmann/json.hpp>

#include <string>

namespace k3::plan {

std::string format_plan(const PlanResult& r, const PlanSpace& space, std::size_t top);
std::string plan_csv(const PlanResult& r);
nlohmann::ordered_json to_json(const PlanResult& r, const PlanSpace& space);

}  // namespace k3::plan
