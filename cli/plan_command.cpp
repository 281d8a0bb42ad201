// `k3perf plan [serving.yaml] [--model M --hardware H --isl N --osl N --rate R --ttft-ms T --tpot-ms T]`: capacity
// planning over hardware, parallelism, batch limits, P/D ratios and KV / state formats (docs/plan.md); without a
// file the flags edit scenarios/serving/plan-defaults.yaml.
#include "cli/commands.h"
#include "cli/verb_runs.h"
#include "core/atomic_file.h"
#include "plot/views/sim_charts.h"
#include "sim/plan/plan.h"
#include "sim/plan/plan_report.h"
#include "sim/serving/trace_workload.h"

#include <fmt/core.h>

#include <unistd.h>

#include <cstdio>
#include <memory>

namespace k3::cli {

namespace {

struct PlanOptions {
  verbs::PlanRequest request;
  std::string json_path, csv_path, plot_path;
  int top = 10;
  bool quiet = false;
};

}  // namespace

void add_plan_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Search deployments that meet the SLOs at a request rate; Pareto front");
  set_help_footer(*cmd,
                  "k3perf plan --model kimi-k3 --hardware h200-sxm --isl 8192 --osl 1024 --rate 10 --ttft-ms 2000 "
                  "--tpot-ms 50 --set plan.attention_dp=[2] --set plan.ep=[8] --set plan.modes=[aggregated] "
                  "--json plan.json  # without the --set edits: the whole search of docs/plan.md");
  cmd->add_option("scenario", opts->request.scenario,
                  "serving scenario YAML with a plan: section (see docs/plan.md); without one, the flags below edit "
                  "scenarios/serving/plan-defaults.yaml");
  plan::PlanQuestion& q = opts->request.question;
  cmd->add_option("--model", q.model, "model name or config.json (default: the file's, kimi-k3)");
  cmd->add_option("--hardware", q.hardware, "hardware to search, e.g. h200-sxm (repeatable; the first is the file's)")
      ->delimiter(',')
      ->allow_extra_args(false);
  // Not given: the file's value stands (no default to show).
  cmd->add_option("--isl", q.input_tokens, "prompt tokens per request")->check(CLI::PositiveNumber)->default_str("");
  cmd->add_option("--osl", q.output_tokens, "output tokens per request")->check(CLI::PositiveNumber)->default_str("");
  cmd->add_option("--rate", q.rate_per_s, "requests per second to serve")->check(CLI::PositiveNumber)->default_str("");
  cmd->add_option("--prefix-hit", q.prefix_hit, "fraction of each prompt the prefix cache holds, in [0, 1)")
      ->check(CLI::Range(0.0, 0.999999))
      ->default_str("");
  cmd->add_option("--ttft-ms", q.ttft_ms, "time-to-first-token SLO (ms, at plan.slo_percentile)")
      ->check(CLI::PositiveNumber)
      ->default_str("");
  cmd->add_option("--tpot-ms", q.tpot_ms, "time-per-output-token SLO (ms, at plan.slo_percentile)")
      ->check(CLI::PositiveNumber)
      ->default_str("");
  cmd->add_option("--gpus-max", q.max_gpus, "most GPUs of a configuration, all replicas together (plan.max_gpus)")
      ->check(CLI::PositiveNumber)
      ->default_str("");
  cmd->add_option("--set", opts->request.sets, "override a key, e.g. --set plan.tp=[4,8] (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--prices", opts->request.prices_path, "prices file (default: scenarios/prices/gpu-prices.yaml)");
  cmd->add_option("--price", opts->request.prices, "a price of your own, name=dollars per GPU-hour (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--json", opts->json_path, "write every candidate, the ranking and the Pareto front as JSON");
  cmd->add_option("--csv", opts->csv_path, "write every candidate as CSV");
  cmd->add_option("--plot", opts->plot_path, "draw the Pareto front (.svg or .png)");
  cmd->add_option("--top", opts->top, "how many ranked configurations to list")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--quiet", opts->quiet, "no progress line (on a terminal) or line of the search done (in a log)");
  cmd->callback([opts, &global] {
    const DataPaths data = DataPaths::resolve(global.data_dir);
    // On a terminal a progress line, redrawn once per percent; in a log one line when the search is done.
    const bool progress = !opts->quiet && isatty(fileno(stderr));
    const verbs::PlanRun run = verbs::run_plan(opts->request, data, [progress](std::size_t done, std::size_t total) {
      if (progress && (done * 100 / total != (done - 1) * 100 / total || done == total)) {
        fmt::print(stderr, "\rplan: {}/{} configurations", done, total);
      }
    });
    const plan::PlanResult& r = run.result;
    if (run.trace) fmt::print("{}", serving::format_trace(run.scenario, *run.trace));
    if (progress) {
      fmt::print(stderr, "\n");
    } else if (!opts->quiet) {
      fmt::print(stderr, "plan: {} configurations searched\n", r.candidates.size());
    }
    fmt::print("{}", plan::format_plan(r, run.space, run.scenario, static_cast<std::size_t>(opts->top)));
    if (!opts->json_path.empty()) {
      write_file_atomically(opts->json_path, verbs::plan_json(run).dump(2) + "\n");
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
