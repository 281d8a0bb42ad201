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
#include <map>

namespace k3::session {

namespace {

double communication_ms(const Prediction& p) {
  double us = 0;
  for (const GroupTotal& g : p.by_bound()) {
    if (g.group == "communication") us += g.time_us;
  }
  return us / 1000.0;
}

// One call's collectives: count, bytes and the groups, e.g. "339 collectives, 1.95 GB (tp 246, ep 93)".
nlohmann::ordered_json collectives_json(const std::vector<parallel::CollectiveRecord>& records) {
  nlohmann::ordered_json j;
  int64_t bytes = 0;
  std::map<std::string, int> per_group;
  for (const parallel::CollectiveRecord& r : records) {
    bytes += r.bytes;
    ++per_group[fmt::format("{} ({} GPUs)", r.group, r.group_size)];
  }
  j["count"] = records.size();
  j["bytes"] = bytes;
  j["per_group"] = per_group;
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (const parallel::CollectiveRecord& r : records) {
    calls.push_back({{"name", r.name}, {"kind", to_string(r.kind)}, {"bytes", r.bytes}, {"group", r.group}});
  }
  j["calls"] = calls;
  return j;
}

}  // namespace

void predict_beside(const RunPlan& plan, runtime::RunSummary& summary) {
  const Prediction decode = predict(plan.decode), prefill = predict(plan.prefill);
  summary.predicted_step_ms = decode.step_ms();
  summary.predicted_prefill_ms = prefill.step_ms();
  summary.predicted_decode_comm_ms = communication_ms(decode);
  summary.predicted_prefill_comm_ms = communication_ms(prefill);
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
  if (!outputs.predict) throw InputError("--prediction-json needs --hardware");
  write_file_atomically(outputs.prediction_path,
                        to_json(predict(plan.prediction_for(outputs.trace_phase))).dump(2) + "\n");
}

std::string summary_json(const runtime::RunSummary& s) {
  nlohmann::ordered_json j;
  j["gpu"] = s.gpu;
  j["model"] = s.model;
  j["layers"] = s.layers;
  if (!s.rank.empty()) {
    // Rank emulation: the GPU ran this rank's compute; its collectives were recorded, not executed.
    j["rank"] = {{"layout", s.rank},
                 {"collectives", "emulated"},
                 {"decode_routed_tokens", s.decode_routed_tokens},
                 {"decode_routed_tokens_max", s.decode_routed_tokens_max},
                 {"decode_step_collectives", collectives_json(s.decode_collectives)},
                 {"prefill_collectives", collectives_json(s.prefill_collectives)}};
  }
  j["weights"] = s.options.weights;
  j["batch"] = s.options.batch;
  j["prompt_tokens"] = s.options.prompt_tokens;
  j["context_tokens"] = std::max(s.options.context_tokens, s.options.prompt_tokens);
  j["decode_tokens"] = s.options.decode_tokens;
  j["chunk_tokens"] = s.options.chunk_tokens;
  j["warmup_tokens"] = s.options.warmup_tokens;
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
    if (!s.rank.empty()) {
      // The rank measured its compute only: set it beside the predicted compute, and add the predicted
      // communication to compare with the predicted step.
      const double step_compute = s.predicted_step_ms - s.predicted_decode_comm_ms;
      const double prefill_compute = s.predicted_prefill_ms - s.predicted_prefill_comm_ms;
      nlohmann::ordered_json& p = j["predicted"];
      p["step_communication_ms"] = s.predicted_decode_comm_ms;
      p["step_compute_ms"] = step_compute;
      p["measured_over_predicted_step_compute"] = s.median_step_ms / step_compute;
      p["measured_plus_predicted_communication_over_predicted_step"] =
          (s.median_step_ms + s.predicted_decode_comm_ms) / s.predicted_step_ms;
      p["prefill_communication_ms"] = s.predicted_prefill_comm_ms;
      p["prefill_compute_ms"] = prefill_compute;
      p["measured_over_predicted_prefill_compute"] = s.prefill_ms.empty() ? 0.0 : s.median_prefill_ms / prefill_compute;
    }
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
  if (!s.predicted_hardware.empty() && s.rank.empty()) {
    out += fmt::format(
        "  predicted on {}: decode step {:.3f} ms (measured {:.2f}x), prefill {:.3f} ms (measured {:.2f}x)\n",
        s.predicted_hardware, s.predicted_step_ms, s.median_step_ms / s.predicted_step_ms, s.predicted_prefill_ms,
        s.median_prefill_ms / s.predicted_prefill_ms);
  }
  if (!s.rank.empty()) {
    auto bytes = [](const std::vector<parallel::CollectiveRecord>& r) {
      double b = 0;
      for (const parallel::CollectiveRecord& c : r) b += double(c.bytes);
      return b / 1e6;
    };
    out += fmt::format(
        "  {}: collectives emulated (recorded, not run): {} per decode step ({:.2f} MB), {} in the "
        "first prefill ({:.1f} MB)\n",
        s.rank, s.decode_collectives.size(), bytes(s.decode_collectives), s.prefill_collectives.size(),
        bytes(s.prefill_collectives));
    if (s.decode_routed_tokens < s.decode_routed_tokens_max) {
      out += fmt::format(
          "  note: this rank routes {} of the decode step's {} tokens, the busiest rank {}: its latent MoE GEMMs idle "
          "where the slowest rank's run, so its step is below a synchronous deployment's (the last rank of the group "
          "routes the most)\n",
          s.decode_routed_tokens, s.options.batch, s.decode_routed_tokens_max);
    }
    if (!s.predicted_hardware.empty()) {
      const double step_compute = s.predicted_step_ms - s.predicted_decode_comm_ms;
      const double prefill_compute = s.predicted_prefill_ms - s.predicted_prefill_comm_ms;
      out += fmt::format(
          "  predicted on {}: decode step {:.3f} ms = compute {:.3f} + communication {:.3f}; measured compute {:.2f}x "
          "the predicted; measured + predicted communication {:.2f}x the predicted step\n",
          s.predicted_hardware, s.predicted_step_ms, step_compute, s.predicted_decode_comm_ms,
          s.median_step_ms / step_compute, (s.median_step_ms + s.predicted_decode_comm_ms) / s.predicted_step_ms);
      out += fmt::format(
          "  predicted prefill {:.3f} ms = compute {:.3f} + communication {:.3f}; measured {:.2f}x the "
          "predicted compute\n",
          s.predicted_prefill_ms, prefill_compute, s.predicted_prefill_comm_ms, s.median_prefill_ms / prefill_compute);
    }
  }
  return out;
}

}  // namespace k3::session
