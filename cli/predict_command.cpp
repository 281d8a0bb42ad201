#include "cli/commands.h"
#include "cli/default_scenario.h"
#include "core/atomic_file.h"
#include "core/engine_sources.h"
#include "core/scenario.h"
#include "sim/predict.h"
#include "sim/text_report.h"

#include <fmt/core.h>

#include <vector>

namespace k3::cli {

namespace {

struct PredictOptions {
  std::string scenario;
  std::string json_path;
  std::string csv_path;
  std::vector<std::string> sets;
  int top = 15;
  bool by_layer = false;
  bool require_fit = false;
};

void write_outputs(const Prediction& p, const PredictOptions& o) {
  if (!o.json_path.empty()) {
    write_file_atomically(o.json_path, to_json(p).dump(2) + "\n");
    fmt::print(stderr, "wrote {}\n", o.json_path);
  }
  if (!o.csv_path.empty()) {
    write_file_atomically(o.csv_path, to_csv(p));
    fmt::print(stderr, "wrote {}\n", o.csv_path);
  }
}

}  // namespace

void add_predict_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand("predict", "Predict one scenario: per-op roofline, step time, memory");
  cmd->add_option("scenario", opts->scenario, "scenario YAML (see docs/scenarios.md)")->required();
  cmd->add_option("--json", opts->json_path, "write the full prediction as JSON");
  cmd->add_option("--csv", opts->csv_path, "write the per-op table as CSV");
  // One value per --set, so `--set a=1 scenario.yaml` leaves the scenario path alone.
  cmd->add_option("--set", opts->sets, "override a scenario key, e.g. --set workload.batch=64 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--top", opts->top, "how many ops to list by time (summed over layers)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--by-layer", opts->by_layer, "list the top ops one row per layer instead of summed over layers");
  cmd->add_flag("--require-fit", opts->require_fit,
                "exit with status 4 when the scenario does not fit the GPUs' memory (the report is printed first)");
  cmd->callback([opts, &global] {
    const Scenario s = load_scenario(opts->scenario, DataPaths::resolve(global.data_dir), opts->sets);
    if (const auto stale = calibration_staleness(s.hardware)) fmt::print(stderr, "warning: {}\n", *stale);
    const Prediction p = predict(s);
    fmt::print("{}", format_prediction(p, opts->top, opts->by_layer));
    write_outputs(p, *opts);
    if (opts->require_fit && !p.memory.fits()) {
      throw ExitStatus(4, fmt::format("the scenario does not fit: {} per GPU needed of {} usable",
                                      format_gib(p.memory.total_bytes), format_gib(p.memory.usable_bytes)));
    }
  });
}

int run_default(const GlobalOptions& global) {
  const Scenario s =
      parse_scenario(kDefaultScenarioYaml, "<embedded default: " + std::string(kDefaultScenarioFile) + ">",
                     DataPaths::resolve(global.data_dir));
  fmt::print("{}", format_prediction(predict(s), 15));
  fmt::print(
      "\n(the embedded default scenario; run `k3perf predict <scenario.yaml>` for your own, `k3perf --help` "
      "for all verbs)\n");
  return 0;
}

}  // namespace k3::cli
