// `k3perf serve <serving.yaml>`: simulate serving a request stream (docs/serving.md).
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "plot/views/sim_charts.h"
#include "profiler/trace/chrome_json.h"
#include "profiler/trace/serving_trace.h"
#include "sim/serving/serving_config.h"
#include "sim/serving/serving_report.h"
#include "sim/serving/trace_workload.h"

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

namespace k3::cli {

namespace {

struct ServeOptions {
  std::string scenario;
  std::string json_path, csv_path, plot_path, trace_path;
  std::vector<std::string> sets;
  bool quiet = false;
};

// A stage's line gives its wall time when it took this long: a short run's lines stay the same run to run.
constexpr double kTimedStageSeconds = 5.0;

// " in 12.3 s" for a long stage, nothing for a short one.
std::string took_since(std::chrono::steady_clock::time_point t0) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s >= kTimedStageSeconds ? fmt::format(" in {:.1f} s", s) : "";
}

}  // namespace

void add_serve_command(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Simulate serving requests: TTFT, TPOT, goodput, utilisation, queues");
  set_help_footer(*cmd, "k3perf serve scenarios/serving/k3-h200x16-chat.yaml --json serve.json");
  cmd->add_option("scenario", opts->scenario, "serving scenario YAML (see docs/serving.md)")->required();
  cmd->add_option("--set", opts->sets, "override a key, e.g. --set serving.replicas=4 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--json", opts->json_path, "write the summary, percentiles and queue series as JSON");
  cmd->add_option("--csv", opts->csv_path, "write one row per request as CSV");
  cmd->add_option("--plot", opts->plot_path, "draw sequences waiting and running over time (.svg or .png)");
  cmd->add_option(
      "--trace", opts->trace_path,
      "write the simulated schedule as a Chrome trace (.json, or .json.gz): per replica its iterations "
      "and each request's queue, prefill and decode spans, for Perfetto (docs/serving.md#the-schedule-as-a-trace)");
  cmd->add_flag("--quiet", opts->quiet, "no progress line (on a terminal) or lines of the stages done");
  cmd->callback([opts, &global] {
    serving::ServingScenario s =
        serving::load_serving_scenario(opts->scenario, DataPaths::resolve(global.data_dir), opts->sets);
    s.options.record_schedule = !opts->trace_path.empty();
    // A line per stage done; on a terminal also a progress line, redrawn per 1/1000 of the requests.
    const bool terminal = !opts->quiet && isatty(fileno(stderr));
    auto t0 = std::chrono::steady_clock::now();
    std::optional<serving::TraceWorkload> trace;
    const serving::Workload w = serving::serving_workload(s, &trace);
    if (trace && !opts->quiet) {
      fmt::print(stderr, "serve: {} requests read{}{}\n", w.requests.size(),
                 trace->cached ? " and through the prefix cache" : "", took_since(t0));
    }
    const serving::ReplicaModel model(s.deployment, s.options.limits.max_batched_tokens);
    if (terminal) {
      s.options.progress = [](int64_t done, int64_t total) {
        fmt::print(stderr, "\rserve: {}/{} requests simulated", done, total);
      };
    }
    t0 = std::chrono::steady_clock::now();
    const serving::ServingResult r = serving::simulate(w.requests, w.cached_prefix_tokens, model, s.options);
    if (terminal) fmt::print(stderr, "\n");
    if (!opts->quiet) {
      fmt::print(stderr, "serve: {} requests simulated{} ({} iterations)\n", r.requests.size(), took_since(t0),
                 r.iterations);
    }
    fmt::print("{}", serving::format_serving(s, r));
    if (trace) fmt::print("{}", serving::format_trace(s, *trace));
    if (!opts->json_path.empty()) {
      nlohmann::ordered_json j = serving::to_json(s, r);
      if (trace) j["trace"] = serving::to_json(s, *trace);
      write_file_atomically(opts->json_path, j.dump(2) + "\n");
      fmt::print(stderr, "wrote {}\n", opts->json_path);
    }
    if (!opts->csv_path.empty()) {
      write_file_atomically(opts->csv_path, serving::requests_csv(r));
      fmt::print(stderr, "wrote {}\n", opts->csv_path);
    }
    if (!opts->trace_path.empty()) {
      profiler::write_trace_text(profiler::serving_trace_json(r, opts->scenario), opts->trace_path);
      fmt::print(stderr, "wrote {}\n", opts->trace_path);
    }
    if (!opts->plot_path.empty()) {
      plot::write_chart(plot::queue_chart(r), opts->plot_path);
      fmt::print(stderr, "wrote {}\n", opts->plot_path);
    }
  });
}

}  // namespace k3::cli
