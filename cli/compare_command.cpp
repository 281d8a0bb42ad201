// `k3perf compare`: a prediction (`k3perf predict --json`) against a measured, attributed trace,
// joined on op names (docs/profile.md), and/or against the counters of `k3perf run --counters` (DRAM
// bytes and tensor FLOPs per op). All the work is in profiler/compare and profiler/counters.
#include "cli/commands.h"
#include "cli/verb_runs.h"
#include "core/atomic_file.h"
#include "core/error.h"

#include <fmt/core.h>

namespace k3::cli {

namespace {
struct CompareOptions {
  verbs::CompareRequest request;
  std::string json;
  std::string csv;
  std::string by = "us";
  int top = 15;
};
}  // namespace

void add_compare_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<CompareOptions>();
  verbs::CompareRequest* o = &opts->request;
  CLI::App* cmd = app.add_subcommand("compare", "Compare a prediction with a measured trace and/or counters, op by op");
  set_help_footer(
      *cmd,
      "k3perf compare --prediction bench/results/2026-12-01-h200-engine-traces-9/pred_decode_b1_ctx8192.json --trace "
      "bench/results/2026-12-01-h200-engine-traces-9/trace_decode_b1_ctx8192.json.gz --top 5");
  cmd->add_option("--prediction", o->prediction, "prediction JSON (k3perf predict --json)")->required();
  cmd->add_option("--trace", o->trace, "Chrome trace JSON of the run, .json or .json.gz, kernels attributed");
  cmd->add_option("--counters", o->counters,
                  "counters JSON of a run (k3perf run --counters): DRAM bytes and tensor FLOPs per op");
  cmd->add_option("--hardware", o->hardware, "hardware whose peaks define the roofline (name or path)");
  cmd->add_option("--json", opts->json, "write the full comparison as JSON");
  cmd->add_option("--csv", opts->csv, "write the per-op table as CSV");
  cmd->add_option("--top", opts->top, "ops with the largest errors to print")->check(CLI::NonNegativeNumber);
  cmd->add_option("--by", opts->by, "rank the largest errors by |predicted - measured| (us) or by |error %| (percent)")
      ->check(CLI::IsMember({"us", "percent"}));
  cmd->add_flag("--force", o->force,
                "compare a prediction and a trace of different shapes (batch, context, layers, hardware, ...)");
  cmd->callback([opts, &global] {
    const CompareOptions& o = *opts;
    if (o.request.trace.empty() && !o.csv.empty()) {
      throw InputError("--csv writes the trace comparison's table: needs --trace");
    }
    const verbs::CompareRun run = verbs::run_compare(o.request, DataPaths::resolve(global.data_dir));
    if (run.trace) {
      if (!run.mismatches.empty()) {
        std::string list;
        for (const std::string& m : run.mismatches) list += "\n  " + m;
        fmt::print(stderr, "warning: compared anyway (--force), shapes differ:{}\n", list);
      }
      const auto order = o.by == "percent" ? profiler::ErrorOrder::percent : profiler::ErrorOrder::absolute_us;
      fmt::print("{} against {}\n{}", o.request.prediction, o.request.trace,
                 profiler::to_text(*run.trace, o.top, order));
      if (!o.csv.empty()) {
        write_file_atomically(o.csv, profiler::to_csv(*run.trace));
        fmt::print(stderr, "wrote {}\n", o.csv);
      }
    }
    if (run.counters) {
      fmt::print("{}{} against {}\n{}", run.trace ? "\n" : "", o.request.prediction, o.request.counters,
                 profiler::to_text(*run.counters));
    }
    if (!o.json.empty()) {
      write_file_atomically(o.json, verbs::compare_json(run).dump(1) + "\n");
      fmt::print(stderr, "wrote {}\n", o.json);
    }
  });
}

}  // namespace k3::cli
