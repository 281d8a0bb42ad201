#include "cli/commands.h"
#include "cli/default_scenario.h"
#include "core/atomic_file.h"
#include "core/engine_sources.h"
#include "core/scenario.h"
#include "profiler/trace/chrome_json.h"
#include "profiler/trace/prediction_trace.h"
#include "sim/predict.h"
#include "sim/text_report.h"
#include "sim/whatif.h"

#include <fmt/core.h>

#include <functional>
#include <vector>

namespace k3::cli {

namespace {

struct PredictOptions {
  std::string scenario;
  std::string json_path;
  std::string csv_path;
  std::string trace_path;               // --trace: the predicted step as a Chrome trace
  std::string trace_format = "k3perf";  // --trace-format
  std::vector<std::string> sets;
  std::vector<std::string> baseline_sets;  // --baseline-set: the baseline is the scenario with these edits too
  std::string compare_path;                // --compare: the baseline is another scenario file
  std::vector<std::string> sweeps;         // --sweep key=v1,v2,...: one prediction per point of the product
  int top = 15;
  bool by_layer = false;
  bool require_fit = false;
};

std::string label(const std::string& path, const std::vector<std::string>& sets) {
  std::string out = path;
  for (const std::string& s : sets) out += " --set " + s;
  return out;
}

// Each output only when its flag was given; the text is built only then.
void write_output(const std::string& path, const std::function<std::string()>& text) {
  if (path.empty()) return;
  write_file_atomically(path, text());
  fmt::print(stderr, "wrote {}\n", path);
}

void write_outputs(const Prediction& p, const PredictOptions& o) {
  write_output(o.json_path, [&] { return to_json(p).dump(2) + "\n"; });
  write_output(o.csv_path, [&] { return to_csv(p); });
}

void write_trace(const Prediction& p, const PredictOptions& o) {
  if (o.trace_path.empty()) return;
  profiler::TraceFormat format = profiler::TraceFormat::k3perf;
  profiler::parse_trace_format(o.trace_format, &format);
  profiler::write_chrome_trace(profiler::prediction_trace(p), o.trace_path, 1, format);
  fmt::print(stderr, "wrote {}\n", o.trace_path);
}

// --baseline-set / --compare: both predictions and their deltas; --json and --csv write the comparison.
void run_diff(const PredictOptions& o, const DataPaths& data, const Prediction& p) {
  std::vector<std::string> base_sets = o.sets;
  base_sets.insert(base_sets.end(), o.baseline_sets.begin(), o.baseline_sets.end());
  const std::string base_path = o.compare_path.empty() ? o.scenario : o.compare_path;
  const Prediction base = predict(load_scenario(base_path, data, o.compare_path.empty() ? base_sets : o.sets));
  const std::string base_label = label(base_path, o.compare_path.empty() ? base_sets : o.sets);
  const std::string label_here = label(o.scenario, o.sets);
  fmt::print("{}", format_prediction_diff(base, p, base_label, label_here));
  write_output(o.json_path, [&] { return prediction_diff_json(base, p, base_label, label_here).dump(2) + "\n"; });
  write_output(o.csv_path, [&] { return prediction_diff_csv(base, p); });
}

void run_sweep_command(const PredictOptions& o, const DataPaths& data) {
  std::vector<SweepAxis> axes;
  for (const std::string& text : o.sweeps) axes.push_back(parse_sweep_axis(text));
  const std::vector<SweepRow> rows = run_sweep(axes, [&](const std::vector<std::string>& point) {
    std::vector<std::string> sets = o.sets;
    sets.insert(sets.end(), point.begin(), point.end());
    return load_scenario(o.scenario, data, sets);
  });
  fmt::print("{}", format_sweep(axes, rows));
  write_output(o.json_path, [&] { return sweep_json(axes, rows).dump(2) + "\n"; });
  write_output(o.csv_path, [&] { return sweep_csv(axes, rows); });
}

}  // namespace

void add_predict_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand("predict", "Predict one scenario: per-op roofline, step time, memory");
  set_help_footer(*cmd,
                  "k3perf predict scenarios/k3-h200x16-decode-128k.yaml --set workload.batch=2 --json prediction.json",
                  {{"4", "with --require-fit: the scenario does not fit the GPUs' memory (after the report)"}});
  cmd->add_option("scenario", opts->scenario, "scenario YAML (see docs/scenarios.md)")->required();
  cmd->add_option("--json", opts->json_path, "write the full prediction as JSON");
  cmd->add_option("--csv", opts->csv_path, "write the per-op table as CSV");
  // One value per --set, so `--set a=1 scenario.yaml` leaves the scenario path alone.
  cmd->add_option("--set", opts->sets, "override a scenario key, e.g. --set workload.batch=64 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--top", opts->top, "how many ops to list by time (summed over layers)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--by-layer", opts->by_layer, "list the top ops one row per layer instead of summed over layers");
  cmd->add_option("--baseline-set", opts->baseline_sets,
                  "compare with a baseline: the scenario with this edit too, e.g. --baseline-set workload.batch=8 "
                  "(repeatable); prints both and the deltas per op kind, memory and step")
      ->allow_extra_args(false);
  cmd->add_option("--compare", opts->compare_path,
                  "compare with another scenario file as the baseline (with the same --set edits)");
  cmd->add_option("--sweep", opts->sweeps,
                  "one prediction per point: --sweep workload.batch=1,8,64 (repeatable: the cross product); "
                  "--csv and --json write the sweep table")
      ->allow_extra_args(false);
  cmd->add_option("--trace", opts->trace_path,
                  "write the predicted step as a Chrome trace (.json, or .json.gz): each op on GPU 0 in graph order "
                  "with its predicted time, named as the measured trace's ops, so both open side by side in "
                  "Perfetto (docs/profile.md#the-predicted-step-as-a-trace)");
  cmd->add_option("--trace-format", opts->trace_format,
                  "k3perf, or kineto: the categories, names and fields of PyTorch's profiler, for HTA")
      ->check(CLI::IsMember({"k3perf", "kineto"}))
      ->capture_default_str();
  cmd->add_flag("--require-fit", opts->require_fit,
                "exit with status 4 when the scenario does not fit the GPUs' memory (the report is printed first)");
  cmd->get_option("--compare")->excludes("--baseline-set");
  cmd->get_option("--sweep")->excludes("--baseline-set")->excludes("--compare")->excludes("--trace");
  cmd->callback([opts, &global] {
    const DataPaths data = DataPaths::resolve(global.data_dir);
    if (!opts->sweeps.empty()) {
      run_sweep_command(*opts, data);
      return;
    }
    const Scenario s = load_scenario(opts->scenario, data, opts->sets);
    if (const auto stale = calibration_staleness(s.hardware)) fmt::print(stderr, "warning: {}\n", *stale);
    const Prediction p = predict(s);
    if (!opts->baseline_sets.empty() || !opts->compare_path.empty()) {
      run_diff(*opts, data, p);
    } else {
      fmt::print("{}", format_prediction(p, opts->top, opts->by_layer));
      write_outputs(p, *opts);
    }
    write_trace(p, *opts);
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
