// The parts of a session that need no GPU: the prediction beside a run, the check of its outputs and
// the summary's JSON and text.
#include "engine/session/run_session.h"
#include "engine/session/run_session_internal.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "sim/predict.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace k3::session {

void predict_beside(const RunPlan& plan, runtime::RunSummary& summary) {
  summary.predicted_step_ms = predict(plan.decode).step_ms();
  summary.predicted_prefill_ms = predict(plan.prefill).step_ms();
  summary.predicted_hardware = plan.scenario.hardware.name;
}

void check_outputs(const RunOutputs& outputs) {
  if (!outputs.counters_path.empty() && !outputs.trace_path.empty()) {
    throw InputError(
        "--trace and --counters are separate runs of the same workload (CUPTI's activity tracing and "
        "its Range Profiler do not share a process): run once with --trace, once with --counters");
  }
  if (!outputs.prediction_path.empty() && !outputs.predict) throw InputError("--prediction-json needs --hardware");
}

void write_prediction(const RunPlan& plan, const RunOutputs& outputs) {
  if (outputs.prediction_path.empty()) return;
  write_file_atomically(outputs.prediction_path,
                        to_json(predict(plan.prediction_for(outputs.trace_phase))).dump(2) + "\n");
}

std::string summary_json(const runtime::RunSummary& s) {
  nlohmann::ordered_json j;
  j["gpu"] = s.gpu;
  j["model"] = s.model;
  j["layers"] = s.layers;
  j["weights"] = s.options.weights;
  j["batch"] = s.options.batch;
  j["prompt_tokens"] = s.options.prompt_tokens;
  j["context_tokens"] = std::max(s.options.context_tokens, s.options.prompt_tokens);
  j["decode_tokens"] = s.options.decode_tokens;
  j["chunk_tokens"] = s.options.chunk_tokens;
  j["cuda_graph"] = s.options.use_cuda_graph;
  j["expert_layout"] = s.tiled_expert_layers > 0 ? "tiled" : "checkpoint";
  nlohmann::ordered_json memory = nlohmann::ordered_json::array();
  for (const runtime::MemoryPlan::Item& i : s.memory.items) memory.push_back({{"what", i.what}, {"bytes", i.bytes}});
  j["memory"] = memory;
  j["free_bytes_before"] = s.free_bytes_before;
  j["weights_seconds"] = s.weights_seconds;
  j["warmup_prefill_ms"] = s.warmup_prefill_ms;
  j["prefill_ms"] = s.prefill_ms;
  j["prefill_tokens_per_s"] = s.prefill_tokens_per_s;
  j["first_decode_step_ms"] = s.first_decode_step_ms;
  j["decode_step_ms"] = s.decode_step_ms;
  j["median_step_ms"] = s.median_step_ms;
  j["p10_step_ms"] = s.p10_step_ms;
  j["p90_step_ms"] = s.p90_step_ms;
  j["decode_tokens_per_s"] = s.decode_tokens_per_s;
  j["generated"] = s.generated;
  if (!s.predicted_hardware.empty()) {
    j["predicted"] = {
        {"hardware", s.predicted_hardware},
        {"step_ms", s.predicted_step_ms},
        {"prefill_ms_per_sequence", s.predicted_prefill_ms},
        {"measured_over_predicted_step", s.median_step_ms / s.predicted_step_ms},
        {"measured_over_predicted_prefill", s.prefill_ms.empty() ? 0.0 : s.median_prefill_ms / s.predicted_prefill_ms}};
  }
  return j.dump(2) + "\n";
}

std::string summary_text(const runtime::RunSummary& s) {
  std::string out = fmt::format("{} on {}: {} layers, batch {}, prompt {} tokens, decode at {} tokens\n", s.model,
                                s.gpu, s.layers, s.options.batch, s.options.prompt_tokens,
                                std::max(s.options.context_tokens, s.options.prompt_tokens));
  out += fmt::format("  prefill        {:10.3f} ms per sequence (median), {:.0f} tokens/s\n", s.median_prefill_ms,
                     s.prefill_tokens_per_s);
  out += fmt::format("  decode step    {:10.3f} ms median (p10 {:.3f}, p90 {:.3f}) over {} steps{}\n", s.median_step_ms,
                     s.p10_step_ms, s.p90_step_ms, s.decode_step_ms.size(),
                     s.options.use_cuda_graph ? " (CUDA graph)" : " (eager)");
  out += fmt::format("  first step     {:10.3f} ms (eager, warms the GEMM plans)\n", s.first_decode_step_ms);
  out += fmt::format("  decode         {:10.1f} tokens/s\n", s.decode_tokens_per_s);
  if (!s.predicted_hardware.empty()) {
    out += fmt::format(
        "  predicted on {}: decode step {:.3f} ms (measured {:.2f}x), prefill {:.3f} ms (measured {:.2f}x)\n",
        s.predicted_hardware, s.predicted_step_ms, s.median_step_ms / s.predicted_step_ms, s.predicted_prefill_ms,
        s.median_prefill_ms / s.predicted_prefill_ms);
  }
  return out;
}

}  // namespace k3::session
