#include "profiler/compare/calibration_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace k3::profiler {
namespace {

// "pred_decode_b1_ctx8192.json + trace_… (commit c, date d)" -> "decode_b1_ctx8192"
std::string short_name(const std::string& run) {
  std::string file = run.substr(0, run.find(" + "));
  for (const char* ext : {".gz", ".json"}) {
    if (file.ends_with(ext)) file.resize(file.size() - std::string(ext).size());
  }
  for (const char* prefix : {"prediction_", "pred_"}) {
    if (file.starts_with(prefix)) return file.substr(std::string(prefix).size());
  }
  return file;
}

bool meets(const RunCheck& r) {
  const FidelityGoal g = fidelity_goal(r.phase);
  return r.op_error_after_percent <= g.op_percent && std::fabs(r.step_error_after_percent()) <= g.step_percent;
}

void run_rows(std::string& out, const char* role, const FitCheck& f, bool judged) {
  for (const RunCheck& r : f.runs) {
    out += fmt::format("| {} | {} | {} | {} | {:.1f} → {:.1f} | {:.1f} | {:+.1f} → {:+.1f} | {} |\n", short_name(r.run),
                       r.phase.empty() ? "—" : r.phase, role, r.ops.size(), r.op_error_before_percent,
                       r.op_error_after_percent, r.measured_step_us / 1000, r.step_error_before_percent(),
                       r.step_error_after_percent(), judged ? (meets(r) ? "met" : "**missed**") : "(fitted)");
  }
}

}  // namespace

FidelityGoal fidelity_goal(const std::string& phase) {
  return phase == "prefill" ? FidelityGoal{10, 5} : FidelityGoal{5, 3};
}

std::string calibration_markdown(const Calibration& c) {
  std::string out =
      "| run | phase | role | ops | per-op median \\|error\\| % before → after | measured step ms | step error % "
      "before → after | goal |\n| --- | --- | --- | ---: | ---: | ---: | ---: | --- |\n";
  run_rows(out, "trained", c.training, false);
  run_rows(out, "held out", c.held_out, true);
  std::size_t met = 0;
  for (const RunCheck& r : c.held_out.runs) met += meets(r);
  out += fmt::format(
      "\nHeld out: {} of {} runs meet their goal (decode: per op ≤ {:g} %, step ≤ {:g} %; prefill: ≤ {:g} %, "
      "≤ {:g} %). Median |error| per op over the held-out ops {:.2f} % before, {:.2f} % after ({} ops).\n",
      met, c.held_out.runs.size(), fidelity_goal("decode").op_percent, fidelity_goal("decode").step_percent,
      fidelity_goal("prefill").op_percent, fidelity_goal("prefill").step_percent, c.held_out.before_percent,
      c.held_out.after_percent, c.held_out.ops);
  // Per phase and kind over the held-out runs.
  struct Kind {
    std::vector<double> before, after;
    double measured_us = 0;
  };
  std::map<std::string, std::map<std::string, Kind>> by_phase;
  std::map<std::string, double> phase_us;
  for (const RunCheck& r : c.held_out.runs) {
    for (const OpCheck& o : r.ops) {
      Kind& k = by_phase[r.phase][to_string(o.kind)];
      k.before.push_back(std::fabs(error_percent(o.before_us, o.measured_us)));
      k.after.push_back(std::fabs(error_percent(o.after_us, o.measured_us)));
      k.measured_us += o.measured_us;
      phase_us[r.phase] += o.measured_us;
    }
  }
  for (const auto& [phase, kinds] : by_phase) {
    out += fmt::format(
        "\nHeld-out {} runs, per op kind:\n\n| op kind | ops | share of measured time | median \\|error\\| % before "
        "→ after |\n| --- | ---: | ---: | ---: |\n",
        phase.empty() ? "(no phase)" : phase);
    std::vector<std::pair<std::string, const Kind*>> sorted;
    for (const auto& [name, k] : kinds) sorted.emplace_back(name, &k);
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second->measured_us > b.second->measured_us; });
    for (const auto& [name, k] : sorted) {
      out += fmt::format("| {} | {} | {:.1f} % | {:.1f} → {:.1f} |\n", name, k->before.size(),
                         100 * k->measured_us / phase_us.at(phase), median(k->before), median(k->after));
    }
  }
  return out;
}

}  // namespace k3::profiler
