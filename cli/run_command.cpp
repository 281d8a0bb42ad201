// `k3perf run`: the GPU engine on this machine's first GPU (engine/runtime/run_loop.h).
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/scenario.h"
#include "engine/runtime/op_range_listener.h"
#include "engine/runtime/run_loop.h"

#include <cuda_runtime.h>
#include "profiler/attribution/attribute.h"
#include "profiler/cupti/cupti_source.h"
#include "profiler/cupti/range_profiler.h"
#include "profiler/trace/chrome_json.h"
#include "sim/predict.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>

namespace k3::cli {

namespace {

// The simulator's roofline for the run's shapes: one decode step at the run's batch and context, and one
// sequence's prompt prefill in the run's chunks, on the given hardware file. The prediction file holds the
// decode step's ops, or the prefill's when `prefill_ops` (a trace of the prefill is compared with it).
void predict_beside(runtime::RunSummary& summary, const std::string& hardware_name, const DataPaths& data,
                    const std::string& prediction_json, bool prefill_ops) {
  Scenario s;
  s.name = "k3perf run";
  s.source = "k3perf run";
  s.model = summary.config;
  const std::string path = std::filesystem::exists(hardware_name) ? hardware_name
                                                                   : data.hardware_dir + "/" + hardware_name + ".yaml";
  s.hardware = load_hardware(path);
  s.precision.routed_experts = summary.config.routed_expert_format;
  s.runtime.cuda_graphs = summary.options.use_cuda_graph;
  const runtime::RunOptions& o = summary.options;
  s.phase = Phase::decode(o.batch, std::max(o.context_tokens, o.prompt_tokens));
  const Prediction decode = predict(s);
  summary.predicted_step_ms = decode.step_ms();
  s.runtime.cuda_graphs = false;  // prefill runs eagerly
  s.phase = Phase::prefill(1, o.prompt_tokens, 0, o.chunk_tokens);
  const Prediction prefill = predict(s);
  summary.predicted_prefill_ms = prefill.step_ms();
  if (!prediction_json.empty()) {
    write_file_atomically(prediction_json, to_json(prefill_ops ? prefill : decode).dump(2) + "\n");
  }
  summary.predicted_hardware = s.hardware.name;
}

// Counter mode (--counters): during the decode, every op range of the engine is also a Range Profiler range
// of the same name (engine/runtime/op_range_listener.h).
class CounterMode final : public runtime::OpRangeListener {
 public:
  explicit CounterMode(std::size_t max_ranges)
      : session_(profiler::RangeProfilerOptions{profiler::counter_mode_metrics(), max_ranges}) {}
  ~CounterMode() override {
    if (runtime::op_range_listener() == this) runtime::op_range_listener() = nullptr;
  }
  void start() {
    session_.start();
    runtime::op_range_listener() = this;
  }
  profiler::RangeCounters stop() {
    runtime::op_range_listener() = nullptr;
    return session_.stop();
  }
  void push(const std::string& name) override { session_.push_range(name); }
  void pop() noexcept override { session_.pop_range(); }

 private:
  profiler::CuptiRangeProfiler session_;
};

// What a trace or counters file records about its run: GPU, command, date, commit, model and the shape run.
void add_run_metadata(const runtime::RunSummary& summary, const std::string& command, bool prefill,
                      std::map<std::string, std::string>& metadata) {
  const runtime::RunOptions& o = summary.options;
  metadata["gpu"] = summary.gpu;
  metadata["command"] = command;
  metadata["date"] = fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", fmt::gmtime(std::time(nullptr)));
  const char* commit = std::getenv("K3PERF_COMMIT");  // set by the scripts that run a bundle built elsewhere
  metadata["commit"] = commit && *commit ? commit : "unknown";
  metadata["model"] = fmt::format("{} ({} layers)", summary.model, summary.layers);
  metadata["shape"] =
      prefill ? fmt::format("prefill of {} x {} tokens in chunks of {}", o.batch, o.prompt_tokens, o.chunk_tokens)
              : fmt::format("batch {}, context {}, {} decode steps, {}", o.batch,
                            std::max(o.context_tokens, o.prompt_tokens), o.decode_tokens,
                            o.use_cuda_graph ? "CUDA graph" : "eager");
}

}  // namespace

void add_run_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<runtime::RunOptions>();
  auto json_path = std::make_shared<std::string>();
  auto eager = std::make_shared<bool>(false);
  auto expert_layout = std::make_shared<std::string>("tiled");
  auto hardware = std::make_shared<std::string>("h200-sxm");
  auto trace_path = std::make_shared<std::string>();
  auto prediction_path = std::make_shared<std::string>();
  auto counters_path = std::make_shared<std::string>();
  auto counters_steps = std::make_shared<int>(0);
  auto trace_phase = std::make_shared<std::string>("decode");
  CLI::App* cmd = app.add_subcommand("run", "Run a K3-family model (or its first N layers) on the GPU and time it");
  cmd->add_option("--model", o->model_path,
                  "config.json, or a model name in the data folder (kimi-k3); default: the checkpoint's config.json");
  cmd->add_option("--weights", o->weights, "a checkpoint directory, or random[:seed] (generated on the GPU)")
      ->required();
  cmd->add_option("--layers", o->layers, "keep only the first N layers (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "prompt length per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--decode-tokens", o->decode_tokens, "tokens to generate per sequence (at least 2)")
      ->check(CLI::Range(2, 1 << 24));
  cmd->add_option("--batch", o->batch, "sequences decoded together")->check(CLI::PositiveNumber);
  cmd->add_option("--context", o->context_tokens,
                  "decode at this context: MLA caches extended past the prompt with a synthetic prefix (0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--chunk-tokens", o->chunk_tokens, "prefill chunk")->check(CLI::PositiveNumber);
  cmd->add_option("--page-tokens", o->page_tokens, "MLA cache page size")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->prompt_seed, "seed of the random prompt token ids");
  cmd->add_flag("--eager", *eager, "decode without a CUDA graph");
  cmd->add_option("--expert-layout", *expert_layout,
                  "MXFP4 experts as the checkpoint orders them, or tiled for the decode GEMV (kernels/mxfp4_tiled.h; "
                  "where the expert shapes allow it)")
      ->check(CLI::IsMember({"tiled", "checkpoint"}));
  cmd->add_option("--json", *json_path, "write the summary as JSON to this file");
  cmd->add_option("--trace", *trace_path,
                  "record the decode steps with CUPTI (kernels attributed to the op graph's names through NVTX "
                  "ranges and CUDA-graph nodes) and write a Chrome/Perfetto trace (.json or .json.gz)");
  cmd->add_option("--trace-phase", *trace_phase,
                  "what --trace records: the decode steps, or the timed prefills (one chunk of the prompt is one "
                  "instance of each op: pass --chunk-tokens equal to --prompt-tokens to compare with the prediction)")
      ->check(CLI::IsMember({"decode", "prefill"}));
  cmd->add_option("--counters", *counters_path,
                  "a separate run of the same workload for hardware counters: DRAM bytes read and written and "
                  "tensor math ops per op range of the decode steps (CUPTI Range Profiler, one pass, eager decode), "
                  "written as JSON for k3perf compare --counters");
  cmd->add_option("--counters-steps", *counters_steps, "decode steps measured by --counters (sets --decode-tokens)")
      ->check(CLI::Range(2, 1024));
  cmd->add_option("--prediction-json", *prediction_path,
                  "write sim/'s prediction of one decode step of this run (for k3perf compare)");
  cmd->add_option("--hardware", *hardware,
                  "hardware file (or name in the data folder) whose roofline prediction is printed beside the "
                  "measurement; 'none' to skip");
  cmd->callback([o, json_path, eager, expert_layout, hardware, trace_path, prediction_path, counters_path,
                 counters_steps, trace_phase, &global] {
    runtime::RunOptions options = *o;
    options.use_cuda_graph = !*eager;
    options.tile_experts = *expert_layout == "tiled";
    if (!counters_path->empty() && !trace_path->empty()) {
      throw InputError(
          "--trace and --counters are separate runs of the same workload (CUPTI's activity tracing and "
          "its Range Profiler do not share a process): run once with --trace, once with --counters");
    }
    if (*counters_steps > 0 && counters_path->empty()) throw InputError("--counters-steps needs --counters");
    if (!counters_path->empty()) {
      if (options.use_cuda_graph) {
        fmt::print(stderr, "counters: decoding eagerly (op ranges are not re-emitted inside CUDA-graph replays)\n");
      }
      options.use_cuda_graph = false;
      if (*counters_steps > 0) options.decode_tokens = *counters_steps;
    }
    if (!options.model_path.empty() && !std::filesystem::exists(options.model_path)) {
      const std::string by_name = DataPaths::resolve(global.data_dir).models_dir + "/" + options.model_path + ".json";
      if (!std::filesystem::exists(by_name)) {
        throw InputError(fmt::format("--model {}: no such file, and no model of that name in {}", options.model_path,
                                     DataPaths::resolve(global.data_dir).models_dir));
      }
      options.model_path = by_name;
    }
    options.progress = [](const std::string& line) { fmt::print(stderr, "{}\n", line); };
    std::unique_ptr<profiler::CuptiActivitySource> collector;
    profiler::ActivityRecords records;
    if (!trace_path->empty()) {
      if (profiler::enable_nvtx_injection().empty()) {
        fmt::print(stderr, "warning: libcupti's path not found: NVTX op ranges will be missing from the trace\n");
      }
      collector = std::make_unique<profiler::CuptiActivitySource>();
      auto start = [&] { collector->start(); };
      auto stop = [&] {
        cudaDeviceSynchronize();
        records = collector->stop();
      };
      if (*trace_phase == "prefill") {
        options.before_prefill = start;
        options.after_prefill = stop;
      } else {
        options.before_decode = start;
        options.after_decode = stop;
        options.begin_step = [](int step) { profiler::CuptiActivitySource::push_step(std::uint64_t(step)); };
        options.end_step = [] { profiler::CuptiActivitySource::pop_step(); };
      }
    }
    std::unique_ptr<CounterMode> counter_mode;
    profiler::RangeCounters counters;
    if (!counters_path->empty()) {
      // Room for every op range of every step: K3's 93 layers open about 1,900 per decode step.
      counter_mode =
          std::make_unique<CounterMode>(std::max<std::size_t>(4096, std::size_t(options.decode_tokens) * 2048));
      options.before_decode = [&] { counter_mode->start(); };
      options.after_decode = [&] { counters = counter_mode->stop(); };
    }
    runtime::RunSummary summary = runtime::run_engine(options);
    if (*hardware != "none") {
      predict_beside(summary, *hardware, DataPaths::resolve(global.data_dir), *prediction_path,
                     *trace_phase == "prefill");
    } else if (!prediction_path->empty()) {
      throw InputError("--prediction-json needs --hardware");
    }
    if (collector) {
      add_run_metadata(summary, "k3perf run", *trace_phase == "prefill", records.metadata);
      profiler::Attribution attribution = profiler::attribute(records);  // its report is in the trace's metadata
      profiler::write_chrome_trace(attribution.trace, *trace_path);
      const profiler::AttributionReport& r = attribution.report;
      fmt::print(stderr,
                 "trace: {} kernels, {} attributed to ops ({} through CUDA-graph nodes), {} dropped records, "
                 "{} steps -> {}\n",
                 r.kernels, r.attributed(), r.attributed_through_graph_nodes, r.dropped_records, r.steps, *trace_path);
    }
    if (counter_mode) {
      add_run_metadata(summary, "k3perf run --counters", false, counters.metadata);
      profiler::write_range_counters(counters, *counters_path);
      fmt::print(stderr, "counters: {} ranges over {} decode steps (chip {}), {} ranges lost -> {}\n",
                 counters.ranges.size(), options.decode_tokens, counters.metadata["chip"], counters.lost_ranges,
                 *counters_path);
    }
    fmt::print("{}", runtime::summary_text(summary));
    if (!json_path->empty()) write_file_atomically(*json_path, runtime::summary_json(summary));
  });
}

}  // namespace k3::cli
