// `k3perf compare`: a prediction (`k3perf predict --json`) against a measured, attributed trace,
// joined on op names (docs/profile.md), and/or against the counters of `k3perf run --counters` (DRAM
// bytes and tensor FLOPs per op). All the work is in profiler/compare and profiler/counters.
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/scenario.h"
#include "profiler/compare/compare.h"
#include "profiler/counters/compare_counters.h"
#include "profiler/trace/chrome_json.h"

#include <fmt/core.h>

namespace k3::cli {

namespace {
struct CompareOptions {
  std::string prediction;
  std::string trace;
  std::string counters;
  std::string hardware = "h200-sxm";
  std::string json;
  std::string csv;
  std::string by = "us";
  bool force = false;
  int top = 15;
};
}  // namespace

void add_compare_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand("compare", "Compare a prediction with a measured trace and/or counters, op by op");
  cmd->add_option("--prediction", o->prediction, "prediction JSON (k3perf predict --json)")->required();
  cmd->add_option("--trace", o->trace, "Chrome trace JSON of the run, .json or .json.gz, kernels attributed");
  cmd->add_option("--counters", o->counters,
                  "counters JSON of a run (k3perf run --counters): DRAM bytes and tensor FLOPs per op");
  cmd->add_option("--hardware", o->hardware, "hardware whose peaks define the roofline (name or path)");
  cmd->add_option("--json", o->json, "write the full comparison as JSON");
  cmd->add_option("--csv", o->csv, "write the per-op table as CSV");
  cmd->add_option("--top", o->top, "ops with the largest errors to print")->check(CLI::NonNegativeNumber);
  cmd->add_option("--by", o->by, "rank the largest errors by |predicted - measured| (us) or by |error %| (percent)")
      ->check(CLI::IsMember({"us", "percent"}));
  cmd->add_flag("--force", o->force,
                "compare a prediction and a trace of different shapes (batch, context, layers, hardware, ...)");
  cmd->callback([o, &global] {
    const Hardware hw = load_hardware_by_name(o->hardware, DataPaths::resolve(global.data_dir).hardware_dir);
    if (o->trace.empty() && o->counters.empty()) throw InputError("compare needs --trace, --counters or both");
    if (o->trace.empty() && !o->csv.empty())
      throw InputError("--csv writes the trace comparison's table: needs --trace");
    const profiler::PredictionFile prediction = profiler::load_prediction(o->prediction);
    // --json: the trace comparison; with --counters too, the counter comparison under its key "counters".
    nlohmann::ordered_json json;
    if (!o->trace.empty()) {
      const profiler::Trace trace = profiler::read_trace(o->trace);
      const std::vector<std::string> mismatches = profiler::shape_mismatches(prediction, trace.metadata);
      std::string list;
      for (const std::string& m : mismatches) list += "\n  " + m;
      if (!mismatches.empty() && !o->force) {
        throw InputError(
            fmt::format("{} and {} are of different shapes:{}\n(predict the trace's shape, e.g. "
                        "`k3perf run --dry-run --prediction-json` with the run's flags, or pass --force)",
                        o->prediction, o->trace, list));
      }
      if (!mismatches.empty()) fmt::print(stderr, "warning: compared anyway (--force), shapes differ:{}\n", list);
      const profiler::Comparison c = profiler::compare(prediction, trace, hw);
      const auto order = o->by == "percent" ? profiler::ErrorOrder::percent : profiler::ErrorOrder::absolute_us;
      fmt::print("{} against {}\n{}", o->prediction, o->trace, profiler::to_text(c, o->top, order));
      json = profiler::to_json(c);
      if (!o->csv.empty()) {
        write_file_atomically(o->csv, profiler::to_csv(c));
        fmt::print(stderr, "wrote {}\n", o->csv);
      }
    }
    if (!o->counters.empty()) {
      const profiler::CounterComparison c =
          profiler::compare_counters(prediction, profiler::read_range_counters(o->counters));
      fmt::print("{}{} against {}\n{}", o->trace.empty() ? "" : "\n", o->prediction, o->counters, profiler::to_text(c));
      if (o->trace.empty()) {
        json = profiler::to_json(c);
      } else {
        json["counters"] = profiler::to_json(c);
      }
    }
    if (!o->json.empty()) {
      write_file_atomically(o->json, json.dump(1) + "\n");
      fmt::print(stderr, "wrote {}\n", o->json);
    }
  });
}

}  // namespace k3::cli
