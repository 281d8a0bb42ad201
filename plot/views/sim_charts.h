// Charts of the simulators' results, built here so that sim/ returns data only: the capacity plan's
// Pareto front, the serving simulation's queue lengths, the spec sweep's speedups, the prefix cache's
// hit-rate curve and the break-even curves. The CLI writes them (plot::write_chart); the GUI draws the
// very same Chart (gui/views/chart_widget.h).
#pragma once

#include "plot/chart.h"
#include "sim/cache/cache_metrics.h"
#include "sim/plan/breakeven.h"
#include "sim/plan/plan.h"
#include "sim/serving/simulator.h"
#include "sim/spec/spec_sweep.h"

#include <string>
#include <vector>

namespace k3::plot {

// Tokens/s per GPU against tokens/s per user: every ranked configuration, and the Pareto front.
Chart pareto_chart(const plan::PlanResult& r);
// Each point's configuration ("h200-sxm tp8 dp1 ep8 b64 t8192 agg"), parallel to pareto_chart's series.
std::vector<std::vector<std::string>> pareto_point_labels(const plan::PlanResult& r);
// Running and waiting sequences over time.
Chart queue_chart(const serving::ServingResult& r);
// Speedup over plain decode against batch (log axis), one line per profile and context.
Chart spec_speedup_chart(const Scenario& base, const std::vector<SpecSweepRow>& rows);
// Token hit rate (%) against the first tier's capacity in tokens of KV (log axis): the hybrid cache and
// a KV-only cache of the same bytes. `source` names the requests (a trace file), `tier` the first tier.
Chart cache_curve_chart(const std::vector<cache::CurvePoint>& curve, const std::string& tier, const std::string& source,
                        const std::string& model);
// One metric of a break-even result against prompt tokens (log axis): hybrid and all-MLA, with each
// crossing marked and labelled with its prompt length; log y too when the values span > 2 decades.
Chart breakeven_chart(const BreakevenResult& r, const MetricCurve& curve);

}  // namespace k3::plot
