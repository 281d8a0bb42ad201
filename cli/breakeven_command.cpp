// `k3perf breakeven`: where K3's hybrid starts to beat its all-MLA counterfactual, per metric
// (docs/breakeven.md): the crossing points, the curves as CSV and charts, and the share of a trace's
// requests on the losing side.
#include "cli/commands.h"
#include "cli/verb_runs.h"
#include "core/atomic_file.h"
#include "plot/views/sim_charts.h"
#include "sim/plan/breakeven.h"

#include <fmt/core.h>

#include <filesystem>

namespace k3::cli {

namespace {

struct BreakevenOptions {
  std::string file;
  std::vector<std::string> sets;
  std::string csv_path;
  std::string json_path;
  std::string plot_dir;
  std::string trace;
};

void write_charts(const BreakevenResult& r, const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const MetricCurve& c : r.curves) {
    const plot::Chart chart = plot::breakeven_chart(r, c);
    for (const char* ext : {"svg", "png"}) {
      const std::string path = fmt::format("{}/breakeven-{}.{}", dir, to_string(c.metric), ext);
      plot::write_chart(chart, path);
      fmt::print(stderr, "wrote {}\n", path);
    }
  }
}

}  // namespace

void add_breakeven_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<BreakevenOptions>();
  CLI::App* cmd = app.add_subcommand("breakeven", "Prompt length where the hybrid beats all-MLA, per metric");
  set_help_footer(*cmd,
                  "k3perf breakeven scenarios/breakeven/k3-h200x16-chat.yaml --trace "
                  "data/traces/AzureLLMInferenceTrace_conv.csv --json breakeven.json");
  cmd->add_option("file", o->file, "break-even YAML (docs/breakeven.md)")->required();
  cmd->add_option("--set", o->sets, "override a key of the deployment scenario (repeatable)")->allow_extra_args(false);
  cmd->add_option("--csv", o->csv_path, "write the curves as CSV");
  cmd->add_option("--json", o->json_path, "write the crossings per metric and the curves (one row per prompt length)");
  cmd->add_option("--plot-dir", o->plot_dir, "write one chart per metric (SVG and PNG)");
  cmd->add_option("--trace", o->trace, "an Azure LLM inference trace (CSV): share of its prompts on the losing side");
  cmd->callback([o, &global] {
    const verbs::BreakevenRun run =
        verbs::run_breakeven(o->file, o->sets, o->trace, DataPaths::resolve(global.data_dir));
    const BreakevenResult& r = run.result;
    fmt::print("{}", format_breakeven(r));
    if (!o->trace.empty()) {
      fmt::print("\n{} requests of {}: share on the losing side (prompt length only)\n", run.trace_input_tokens.size(),
                 o->trace);
      for (const MetricCurve& c : r.curves)
        fmt::print("  {:<26} {:5.1f}%\n", to_string(c.metric), 100 * losing_share(c, run.trace_input_tokens));
    }
    if (!o->json_path.empty()) {
      write_file_atomically(o->json_path, verbs::breakeven_json(run).dump(2) + "\n");
      fmt::print(stderr, "wrote {}\n", o->json_path);
    }
    if (!o->csv_path.empty()) {
      write_file_atomically(o->csv_path, breakeven_csv(r));
      fmt::print(stderr, "wrote {}\n", o->csv_path);
    }
    if (!o->plot_dir.empty()) write_charts(r, o->plot_dir);
  });
}

}  // namespace k3::cli
