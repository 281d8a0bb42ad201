// Reports of a capacity plan: the ranked table and the Pareto front for the terminal, every
// candidate as CSV and JSON, and the Pareto chart (tokens/s per GPU against tokens/s per user).
#pragma once

#include "plot/chart.h"
#include "sim/plan/plan.h"

#include <nlohmann/json.hpp>

#include <string>

namespace k3::plan {

std::string format_plan(const PlanResult& r, const PlanSpace& space, std::size_t top);
std::string plan_csv(const PlanResult& r);
nlohmann::ordered_json to_json(const PlanResult& r, const PlanSpace& space);
plot::Chart pareto_chart(const PlanResult& r);

}  // namespace k3::plan
