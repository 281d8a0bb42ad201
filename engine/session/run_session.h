// A run on this machine's first GPU with what `k3perf run` records beside it: the engine's timed
// prefill and decode (engine/runtime/run_loop.h), optionally a CUPTI trace of one phase or hardware
// counters per op range, and sim/'s prediction of the same shapes (run_plan.h). The CLI and a GUI
// call these functions; the header needs no CUDA, and in a build without CUDA gpu_available()
// says why and run_session throws.
#pragma once

#include "engine/session/run_plan.h"
#include "profiler/trace/chrome_json.h"  // TraceFormat only: no link to the profiler

#include <functional>
#include <string>

namespace k3::session {

// What the run writes, each optional (empty: not written).
struct RunOutputs {
  std::string trace_path;  // Chrome/Perfetto trace (.json or .json.gz) of `trace_phase`
  RunPhase trace_phase = RunPhase::decode;
  profiler::TraceFormat trace_format = profiler::TraceFormat::k3perf;  // kineto: for HTA
  std::string counters_path;           // hardware counters per op range of the decode steps (a separate, eager run)
  std::string prediction_path;         // sim/'s prediction of the traced phase (for k3perf compare)
  bool predict = true;                 // predict on the scenario's hardware beside the measurement
  std::string command = "k3perf run";  // recorded in the trace's and counters' metadata
};

struct RunResult {
  runtime::RunSummary summary;  // with the predicted_* fields when predicted
};

// False, with the reason in `why`, when this build has no CUDA or this machine no CUDA device.
bool gpu_available(std::string* why);
// Whether this build holds the GPU engine (a CUDA build), whatever the machine has.
bool engine_built();

// Progress lines and notes (what was written, warnings) go to `log`, which may be empty.
// Throws InputError for outputs that cannot go together (a trace and counters are separate runs;
// a prediction file needs `predict`), Error when there is no GPU.
RunResult run_session(const RunPlan& plan, const RunOutputs& outputs,
                      const std::function<void(const std::string&)>& log = {});

// The prediction beside a run: the decode step and one sequence's prefill of the plan, on the
// scenario's hardware (fills summary.predicted_*); no GPU needed.
void predict_beside(const RunPlan& plan, runtime::RunSummary& summary);
// outputs.prediction_path, when set: the prediction of the traced phase (what --prediction-json writes; a dry run
// writes it too, so a trace can be compared with another simulator's prediction without a GPU).
void write_prediction(const RunPlan& plan, const RunOutputs& outputs);

// The run's summary: JSON (what --json writes) and the lines k3perf run prints.
std::string summary_json(const runtime::RunSummary& summary);
std::string summary_text(const runtime::RunSummary& summary);

}  // namespace k3::session
