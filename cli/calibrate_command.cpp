// `k3perf calibrate`: fits per-class efficiencies and per-op-kind kernel latencies to measured runs
// (prediction + attributed trace pairs), checks the fit per op and per step on the training and
// held-out runs and writes a hardware file citing the runs (docs/profile.md). All the work is in
// profiler/compare/calibrate.
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hardware_writer.h"
#include "core/scenario.h"
#include "profiler/compare/calibrate.h"
#include "profiler/compare/calibration_report.h"

#include <fmt/core.h>

namespace k3::cli {

namespace {
struct CalibrateOptions {
  std::vector<std::string> runs;
  std::vector<std::string> held_out;
  std::string base = "h200-sxm";
  std::string name = "H200 SXM (validated)";
  std::string source_id = "k3perf-calibration";
  std::string out;
  std::string json;
  std::string markdown;
};

std::vector<profiler::CalibrationRun> load_runs(const std::vector<std::string>& pairs, const char* flag) {
  std::vector<profiler::CalibrationRun> runs;
  for (const std::string& pair : pairs) {
    const auto comma = pair.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == pair.size()) {
      throw InputError(fmt::format("{} '{}': expected PREDICTION.json,TRACE.json[.gz]", flag, pair));
    }
    runs.push_back(profiler::load_calibration_run(pair.substr(0, comma), pair.substr(comma + 1)));
  }
  return runs;
}
}  // namespace

void add_calibrate_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd =
      app.add_subcommand("calibrate", "Fit efficiencies and kernel latencies to measured runs; write hardware YAML");
  set_help_footer(
      *cmd,
      "k3perf calibrate --run bench/results/2026-12-01-h200-engine-traces-9/pred_decode_b1_ctx8192.json,"
      "bench/results/2026-12-01-h200-engine-traces-9/trace_decode_b1_ctx8192.json.gz --held-out "
      "bench/results/2026-12-01-h200-engine-traces-9/pred_decode_b1_ctx131072.json,"
      "bench/results/2026-12-01-h200-engine-traces-9/trace_decode_b1_ctx131072.json.gz --json calibration.json");
  cmd->add_option("--run", o->runs, "a training run: PREDICTION.json,TRACE.json[.gz] (repeat)")->required();
  cmd->add_option("--held-out", o->held_out, "a run the fit is checked on, not fitted to (repeat)");
  cmd->add_option("--base", o->base, "hardware the runs were measured on (name or path)");
  cmd->add_option("--name", o->name, "name of the written hardware entry");
  cmd->add_option("--source-id", o->source_id, "source id the fitted numbers cite (kebab-case)");
  cmd->add_option("--out", o->out, "the hardware YAML to write, e.g. scenarios/hardware/h200-validated.yaml");
  cmd->add_option("--json", o->json, "write the fit and its checks as JSON");
  cmd->add_option("--markdown", o->markdown,
                  "write the checks as Markdown tables: per run and per op kind, against the goals (docs/fidelity.md)");
  cmd->callback([o, &global] {
    const Hardware base = load_hardware_by_name(o->base, DataPaths::resolve(global.data_dir).hardware_dir);
    const auto training = load_runs(o->runs, "--run");
    const auto held_out = load_runs(o->held_out, "--held-out");
    const profiler::Calibration c = profiler::calibrate(training, held_out, base);
    fmt::print("{}", profiler::to_text(c));
    if (!o->json.empty()) {
      write_file_atomically(o->json, profiler::to_json(c).dump(1) + "\n");
      fmt::print(stderr, "wrote {}\n", o->json);
    }
    if (!o->markdown.empty()) {
      write_file_atomically(o->markdown, profiler::calibration_markdown(c));
      fmt::print(stderr, "wrote {}\n", o->markdown);
    }
    if (!o->out.empty()) {
      write_hardware_file(o->out, profiler::calibrated_hardware_yaml(base, c, o->name, o->source_id));
      fmt::print(stderr, "wrote {}\n", o->out);
    }
  });
}

}  // namespace k3::cli
