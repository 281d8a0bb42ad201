// run_session on the GPU: the engine, with the CUPTI collector or the Range Profiler around one phase.
#include "engine/session/run_session.h"

#include "core/engine_sources.h"
#include "engine/session/run_session_internal.h"

#include "core/atomic_file.h"
#include "core/engine_sources.h"
#include "core/error.h"
#include "engine/runtime/op_range_listener.h"
#include "profiler/attribution/attribute.h"
#include "profiler/cupti/cupti_source.h"
#include "profiler/cupti/range_profiler.h"
#include "profiler/trace/chrome_json.h"

#include <cuda_runtime.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>

namespace k3::session {

namespace {

// Counter mode: during the decode, every op range of the engine is also a Range Profiler range
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
  metadata["engine_sources"] = engine_sources_hash();  // which kernels ran (core/engine_sources.h)
  metadata["model"] = fmt::format("{} ({} layers)", summary.model, summary.layers);
  if (!summary.rank.empty()) {  // a rank on one GPU: its collectives are recorded, not run (profiler/compare)
    metadata["rank"] = summary.rank;
    metadata["collectives"] = "emulated";
  }
  metadata["shape"] =
      prefill ? fmt::format("prefill of {} x {} tokens in chunks of {}", o.batch, o.prompt_tokens, o.chunk_tokens)
              : fmt::format("batch {}, context {}, {} decode steps, {}", o.batch,
                            std::max(o.context_tokens, o.prompt_tokens), o.decode_tokens,
                            o.use_cuda_graph ? "CUDA graph" : "eager");
}

void say(const std::function<void(const std::string&)>& log, const std::string& line) {
  if (log) log(line);
}

}  // namespace

bool engine_built() { return true; }

bool gpu_available(std::string* why) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    if (why) *why = fmt::format("no GPU: {}", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    return false;
  }
  return true;
}

RunResult run_session(const RunPlan& given, const RunOutputs& outputs,
                      const std::function<void(const std::string&)>& log) {
  check_outputs(outputs);
  std::string why;
  if (!gpu_available(&why)) throw InputError(why);
  RunPlan plan = given;
  runtime::RunOptions& options = plan.options;
  const bool trace_prefill = outputs.trace_phase == RunPhase::prefill;
  if (!outputs.counters_path.empty()) {
    if (options.use_cuda_graph)
      say(log, "counters: decoding eagerly (op ranges are not re-emitted inside CUDA-graph replays)");
    options.use_cuda_graph = false;
    plan.decode.runtime.cuda_graphs = false;
  }
  options.progress = log;

  std::unique_ptr<profiler::CuptiActivitySource> collector;
  profiler::ActivityRecords records;
  if (!outputs.trace_path.empty()) {
    if (profiler::enable_nvtx_injection().empty()) {
      say(log, "warning: libcupti's path not found: NVTX op ranges will be missing from the trace");
    }
    collector = std::make_unique<profiler::CuptiActivitySource>();
    auto start = [&] { collector->start(); };
    auto stop = [&] {
      cudaDeviceSynchronize();
      records = collector->stop();
    };
    if (trace_prefill) {
      options.before_prefill = start;
      options.after_prefill = stop;
    } else {
      options.before_decode = start;
      options.after_decode = stop;
      options.begin_step = [](int step) { profiler::CuptiActivitySource::push_step(std::uint64_t(step)); };
      options.end_step = [] { profiler::CuptiActivitySource::pop_step(); };
    }
  } else {
    // Traced from outside (k3perf profile, Nsight Systems): each decode step in an NVTX range "step N", which the
    // attribution turns into the trace's steps (profiler/attribution/attribute.h).
    options.begin_step = [](int step) { nvtxRangePushA(fmt::format("step {}", step).c_str()); };
    options.end_step = [] { nvtxRangePop(); };
  }
  std::unique_ptr<CounterMode> counter_mode;
  profiler::RangeCounters counters;
  if (!outputs.counters_path.empty()) {
    // Room for every op range of every step: K3's 93 layers open about 1,900 per decode step.
    counter_mode =
        std::make_unique<CounterMode>(std::max<std::size_t>(4096, std::size_t(options.decode_tokens) * 2048));
    options.before_decode = [&] { counter_mode->start(); };
    options.after_decode = [&] { counters = counter_mode->stop(); };
  }

  RunResult result{runtime::run_engine(options)};
  runtime::RunSummary& summary = result.summary;
  if (outputs.predict) {
    predict_beside(plan, summary);
    write_prediction(plan, outputs);
  }
  if (collector) {
    add_run_metadata(summary, outputs.command, trace_prefill, records.metadata);
    profiler::Attribution attribution = profiler::attribute(records);  // its report is in the trace's metadata
    profiler::write_chrome_trace(attribution.trace, outputs.trace_path, 1, outputs.trace_format);
    const profiler::AttributionReport& r = attribution.report;
    say(log, fmt::format("trace: {} kernels, {} attributed to ops ({} through CUDA-graph nodes), {} dropped records, "
                         "{} steps -> {}",
                         r.kernels, r.attributed(), r.attributed_through_graph_nodes, r.dropped_records, r.steps,
                         outputs.trace_path));
  }
  if (counter_mode) {
    add_run_metadata(summary, outputs.command + " --counters", false, counters.metadata);
    profiler::write_range_counters(counters, outputs.counters_path);
    say(log,
        fmt::format("counters: {} ranges over {} decode steps (chip {}), {} ranges lost -> {}", counters.ranges.size(),
                    options.decode_tokens, counters.metadata["chip"], counters.lost_ranges, outputs.counters_path));
  }
  return result;
}

}  // namespace k3::session
