// The fidelity report of a calibration (docs/fidelity.md, "Against the engine"): Markdown tables of a fit's checks
// per run and per op kind, before and after, each run judged against the goals of its phase.
#pragma once

#include "profiler/compare/calibrate.h"

#include <string>

namespace k3::profiler {

// The goals a held-out run is judged on (docs/fidelity.md): per-op median |error| and |step error|, in percent.
struct FidelityGoal {
  double op_percent = 0;
  double step_percent = 0;
};
FidelityGoal fidelity_goal(const std::string& phase);  // decode 5 / 3, prefill 10 / 5; other phases as decode

// Three tables: every run (trained or held out) with its per-op and step errors before and after and whether a
// held-out run meets its goal; then per phase and op kind over the held-out runs, the median |error| before and
// after and the kind's share of the measured time.
std::string calibration_markdown(const Calibration& c);

}  // namespace k3::profiler
