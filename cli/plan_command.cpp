// `k3perf plan [serving.yaml] [--model M --hardware H --isl N --osl N --rate R --ttft-ms T --tpot-ms T]`: capacity
// planning over hardware, parallelism, batch limits, P/D ratios and KV / state formats (docs/plan.md); without a
// file the flags edit scenarios/serving/plan-defaults.yaml.
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "plot/views/sim_charts.h"
#include "sim/plan/plan.h"
#include "sim/plan/plan_report.h"
#include "sim/serving/trace_workload.h"

#include <fmt/core.h>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

namespace k3::cli {

namespace {

struct PlanOptions {
  std::string scenario;
  plan::PlanQuestion question;
  std::string json_path, csv_path, plot_path, prices_path;
  std::vector<std::string> sets, prices;
  int top = 10;
  bool quiet = false;
};

// Without a serving file the question must be whole: a request shape, a rate and an SLO.
void check_question(const PlanOptions& o) {
  if (!o.scenario.empty()) return;
  std::vector<std::string> missing;
  if (o.question.input_tokens <= 0) missing.push_back("--isl");
  if (o.question.output_tokens <= 0) missing.push_back("--osl");
  if (o.question.rate_per_s <= 0) missing.push_back("--rate");
  if (o.question.ttft_ms <= 0 && o.question.tpot_ms <= 0) missing.push_back("--ttft-ms or --tpot-ms");
  if (missing.empty()) return;
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
  throw InputError(
      fmt::format("plan: without a serving file give --isl, --osl, --rate and --ttft-ms and/or "
                  "--tpot-ms (missing: {}); or name a serving YAML (docs/plan.md)",
                  list));
}

}  // namespace

void add_plan_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Search deployments that meet the SLOs at a request rate; Pareto front");
  cmd->add_option("scenario", opts->scenario,
                  "serving scenario YAML with a plan: section (see docs/plan.md); without one, the flags below edit "
                  "scenarios/serving/plan-defaults.yaml");
  plan::PlanQuestion& q = opts->question;
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
  cmd->add_option("--set", opts->sets, "override a key, e.g. --set plan.tp=[4,8] (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--prices", opts->prices_path, "prices file (default: scenarios/prices/gpu-prices.yaml)");
  cmd->add_option("--price", opts->prices, "a price of your own, name=dollars per GPU-hour (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--json", opts->json_path, "write every candidate, the ranking and the Pareto front as JSON");
  cmd->add_option("--csv", opts->csv_path, "write every candidate as CSV");
  cmd->add_option("--plot", opts->plot_path, "draw the Pareto front (.svg or .png)");
  cmd->add_option("--top", opts->top, "how many ranked configurations to list")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--quiet", opts->quiet, "no progress line (on a terminal) or line of the search done (in a log)");
  cmd->callback([opts, &global] {
    check_question(*opts);
    if (opts->question.prefix_hit >= 0 && opts->question.input_tokens <= 0) {
      throw InputError("--prefix-hit: give --isl too (the cached tokens are a fraction of the prompt)");
    }
    const DataPaths data = DataPaths::resolve(global.data_dir);
    const std::string file = opts->scenario.empty() ? plan::plan_defaults_file(data) : opts->scenario;
    // The flags first, then --set: the more specific edit wins.
    std::vector<std::string> sets = opts->question.sets();
    sets.insert(sets.end(), opts->sets.begin(), opts->sets.end());
    const serving::ServingScenario s = serving::load_serving_scenario(file, data, sets);
    if (!s.plan) throw InputError(fmt::format("{}: no 'plan:' section (see docs/plan.md)", file));
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
    // On a terminal a progress line, redrawn once per percent; in a log one line when the search is done.
    const bool progress = !opts->quiet && isatty(fileno(stderr));
    const plan::PlanResult r =
        plan::run_plan(s, space, w, rate_per_s, prices, data, [progress](std::size_t done, std::size_t total) {
          if (progress && (done * 100 / total != (done - 1) * 100 / total || done == total)) {
            fmt::print(stderr, "\rplan: {}/{} configurations", done, total);
          }
        });
    if (progress) {
      fmt::print(stderr, "\n");
    } else if (!opts->quiet) {
      fmt::print(stderr, "plan: {} configurations searched\n", r.candidates.size());
    }
    fmt::print("{}", plan::format_plan(r, space, s, static_cast<std::size_t>(opts->top)));
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
