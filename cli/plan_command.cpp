// `k3perf plan <serving.yaml>`: capacity planning over hardware, parallelism, batch limits and
// P/D ratios (docs/plan.md).
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "plot/views/sim_charts.h"
#include "sim/plan/plan.h"
#include "sim/plan/plan_report.h"
#include "sim/serving/trace_workload.h"

#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

namespace k3::cli {

namespace {

struct PlanOptions {
  std::string scenario;
  std::string json_path, csv_path, plot_path, prices_path;
  std::vector<std::string> sets, prices;
  int top = 10;
  bool quiet = false;
};

}  // namespace

void add_plan_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Search deployments that meet the SLOs at a request rate; Pareto front");
  cmd->add_option("scenario", opts->scenario, "serving scenario YAML with a plan: section (see docs/plan.md)")
      ->required();
  cmd->add_option("--set", opts->sets, "override a key, e.g. --set plan.tp=[4,8] (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--prices", opts->prices_path, "prices file (default: scenarios/prices/gpu-prices.yaml)");
  cmd->add_option("--price", opts->prices, "a price of your own, name=dollars per GPU-hour (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--json", opts->json_path, "write every candidate, the ranking and the Pareto front as JSON");
  cmd->add_option("--csv", opts->csv_path, "write every candidate as CSV");
  cmd->add_option("--plot", opts->plot_path, "draw the Pareto front (.svg or .png)");
  cmd->add_option("--top", opts->top, "how many ranked configurations to list")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--quiet", opts->quiet, "no progress line");
  cmd->callback([opts, &global] {
    const DataPaths data = DataPaths::resolve(global.data_dir);
    const serving::ServingScenario s = serving::load_serving_scenario(opts->scenario, data, opts->sets);
    if (!s.plan) throw InputError(fmt::format("{}: no 'plan:' section (see docs/plan.md)", opts->scenario));
    const plan::PlanSpace space = plan::read_plan_space(*s.plan, s);
    std::optional<serving::TraceWorkload> trace;
    const serving::Workload w = serving::serving_workload(s, &trace);
    // A trace is planned for at its own mean rate (after time_scale), a stream at its rate_per_s.
    const double rate_per_s = trace ? serving::mean_rate_per_s(w.requests) : s.requests.rate_per_s;
    if (trace) fmt::print("{}", serving::format_trace(s, *trace));
    const std::string prices_path =
        !opts->prices_path.empty() ? opts->prices_path : data.prices_dir + "/gpu-prices.yaml";
    plan::Prices prices = plan::load_prices(prices_path);
    for (const std::string& p : opts->prices) {
      const std::size_t eq = p.find('=');
      double value = 0;
      if (eq == std::string::npos || std::sscanf(p.c_str() + eq + 1, "%lf", &value) != 1 || value <= 0) {
        throw InputError(fmt::format("--price '{}': expected name=dollars per GPU-hour", p));
      }
      prices.per_gpu_hour[p.substr(0, eq)] = value;
      prices.source[p.substr(0, eq)] = "--price";
    }
    const bool progress = !opts->quiet;
    const plan::PlanResult r =
        plan::run_plan(s, space, w, rate_per_s, prices, data, [progress](std::size_t done, std::size_t total) {
          // One update per percent: a line, not a flood, when redirected.
          if (progress && (done * 100 / total != (done - 1) * 100 / total || done == total)) {
            fmt::print(stderr, "\rplan: {}/{} configurations", done, total);
          }
        });
    if (progress) fmt::print(stderr, "\n");
    fmt::print("{}", plan::format_plan(r, space, static_cast<std::size_t>(opts->top)));
    if (!opts->json_path.empty()) {
      write_file_atomically(opts->json_path, plan::to_json(r, space).dump(2) + "\n");
      fmt::print(stderr, "wrote {}\n", opts->json_path);
    }
    if (!opts->csv_path.empty()) {
      write_file_atomically(opts->csv_path, plan::plan_csv(r));
      fmt::print(stderr, "wrote {}\n", opts->csv_path);
    }
    if (!opts->plot_path.empty()) {
      plot::write_chart(plot::pareto_chart(r), opts->plot_path);
      fmt::print(stderr, "wrote {}\n", opts->plot_path);
    }
  });
}

}  // namespace k3::cli
