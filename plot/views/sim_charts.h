// Charts of the simulators' results, built here so that sim/ returns data only: the capacity
// plan's Pareto front, the serving simulation's queue lengths and the spec sweep's speedups. The
// CLI writes them (plot::write_chart); a GUI draws the same Chart.
#pragma once

#include "plot/chart.h"
#include "sim/plan/plan.h"
#include "sim/serving/simulator.h"
#include "sim/spec/spec_sweep.h"

#include <vector>

namespace k3::plot {

// Tokens/s per GPU against tokens/s per user: every ranked configuration, and the Pareto front.
Chart pareto_chart(const plan::PlanResult& r);
// Running and waiting sequences over time.
Chart queue_chart(const serving::ServingResult& r);
// Speedup over plain decode against log2(batch), one line per profile and context.
Chart spec_speedup_chart(const Scenario& base, const std::vector<SpecSweepRow>& rows);

}  // namespace k3::plot
