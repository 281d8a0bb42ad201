#include "sim/text_report.h"

#include "core/parameters.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace k3 {

std::string format_bytes(double bytes) {
  if (bytes >= 1e12) return fmt::format("{:.2f} TB", bytes / 1e12);
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.2f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.2f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

std::string format_gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / double(1ull << 30)); }

namespace {
void group_table(std::string& out, const char* title, std::vector<GroupTotal> groups, double step_us,
                 const char* count_label) {
  std::sort(groups.begin(), groups.end(), [](const GroupTotal& a, const GroupTotal& b) {
    return a.time_us != b.time_us ? a.time_us > b.time_us : a.group < b.group;
  });
  out += fmt::format("\n{:<22} {:>6} {:>12} {:>7} {:>12} {:>12} {:>12}\n", title, count_label, "time (ms)", "share",
                     "TFLOP", "HBM bytes", "sent");
  for (const GroupTotal& g : groups) {
    std::string row = fmt::format("  {:<20} {:>6} {:>12.3f} {:>6.1f}% {:>12.4f} {:>12} {:>12}", g.group, g.count,
                                  g.time_us / 1000, step_us > 0 ? 100 * g.time_us / step_us : 0.0, g.flops / 1e12,
                                  format_bytes(g.bytes), g.sent_bytes > 0 ? format_bytes(g.sent_bytes) : "");
    row.erase(row.find_last_not_of(' ') + 1);  // no sent bytes: no trailing blanks
    out += row + "\n";
  }
}

// The top ops one per layer: each op's times and bound.
void top_single_ops(std::string& out, const Prediction& p, int top_ops) {
  std::vector<std::size_t> order(p.graph.ops.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return p.step.ops[a].exposed_us > p.step.ops[b].exposed_us; });
  out += fmt::format("\ntop {} ops by time\n  {:<26} {:<14} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  {}\n", top_ops,
                     "name", "kind", "time us", "compute us", "memory us", "comm us", "FLOP/B", "sent", "bound");
  for (int i = 0; i < top_ops && i < static_cast<int>(order.size()); ++i) {
    const Op& op = p.graph.ops[order[i]];
    const OpTime& t = p.step.ops[order[i]];
    out += fmt::format("  {:<26} {:<14} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>10}  {}\n", op.name(),
                       to_string(op.kind), t.exposed_us, t.compute_us, t.memory_us, t.communication_us,
                       op.intensity_flops_per_byte(), op.collective ? format_bytes(op.collective->bytes) : "",
                       to_string(t.bound));
  }
}

// The top op names summed over their layers: count, total, share of the step, time per op.
void top_op_names(std::string& out, const Prediction& p, int top_ops) {
  std::vector<OpNameTotal> names = p.by_op_name();
  std::stable_sort(names.begin(), names.end(),
                   [](const OpNameTotal& a, const OpNameTotal& b) { return a.time_us > b.time_us; });
  out += fmt::format(
      "\ntop {} ops by time, summed over layers (--by-layer: one row per layer)\n  {:<24} {:<14} {:>5} {:>10} "
      "{:>7} {:>11} {:>8} {:>10}  {}\n",
      top_ops, "name", "kind", "ops", "time (ms)", "share", "per op us", "FLOP/B", "sent", "bound");
  for (int i = 0; i < top_ops && i < static_cast<int>(names.size()); ++i) {
    const OpNameTotal& g = names[i];
    out += fmt::format(
        "  {:<24} {:<14} {:>5} {:>10.3f} {:>6.1f}% {:>11.1f} {:>8.1f} {:>10}  {}\n", g.name, to_string(g.kind), g.count,
        g.time_us / 1000, p.step.step_us > 0 ? 100 * g.time_us / p.step.step_us : 0.0, g.time_us / g.count,
        g.bytes > 0 ? g.flops / g.bytes : 0.0, g.sent_bytes > 0 ? format_bytes(g.sent_bytes) : "", to_string(g.bound));
  }
}
}  // namespace

std::string format_prediction(const Prediction& p, int top_ops, bool by_layer) {
  const Scenario& s = p.scenario;
  const ModelConfig& m = s.model;
  const Phase& ph = p.graph.phase;
  const Parallelism& par = s.parallelism;
  const ParameterCounts counts = count_parameters(m);
  std::string out;
  out += fmt::format("{}\n", s.name);
  out += fmt::format("  model      {} ({} layers: {} KDA + {} MLA; {:.3f} T parameters, {:.2f} B active per token)\n",
                     m.name, m.num_layers, m.count_layers(AttentionKind::kda), m.count_layers(AttentionKind::mla),
                     counts.total() / 1e12, counts.active_per_token / 1e9);
  if (!s.overrides.empty()) {
    std::string list;
    for (const auto& o : s.overrides) list += (list.empty() ? "" : ", ") + o;
    out += fmt::format("  overrides  {}\n", list);
  }
  out += fmt::format("  hardware   {} x{}: tp {}, attention_dp {}, ep {}, pp {}; CUDA graphs {}\n", s.hardware.name,
                     par.gpus(), par.tp, par.attention_dp, par.ep, par.pp, s.runtime.cuda_graphs ? "on" : "off");
  out += fmt::format("  precision  weights {}, routed experts {} ({:.2f} bits), KV {}, KDA state {}, GEMMs {}\n",
                     to_string(s.precision.weights), to_string(s.precision.routed_experts),
                     bits_per_element(s.precision.routed_experts), to_string(s.precision.kv_cache),
                     to_string(s.precision.kda_state), to_string(s.precision.gemm_compute));
  out += fmt::format(
      "  workload   {}, batch {} ({} per attention group), context {} tokens, {} new tokens per "
      "sequence\n",
      to_string(ph.kind), ph.batch, p.graph.sequences_per_gpu, ph.context_tokens, ph.new_tokens);

  out += "\n";
  if (!p.memory.fits()) {
    out += fmt::format(
        "  DOES NOT FIT     {} needed of {} usable per GPU: the times below are of a step no GPU of this "
        "layout can run\n",
        format_gib(p.memory.total_bytes), format_gib(p.memory.usable_bytes));
  }
  if (ph.kind == PhaseKind::prefill) {
    out += fmt::format("  TTFT             {:>10.3f} ms  (prefill of {} tokens in chunks of {})\n", p.step_ms(),
                       ph.new_tokens, ph.prefill_chunk_tokens);
    out += fmt::format("  prefill rate     {:>10.0f} tok/s ({:.0f} tok/s per GPU)\n", p.tokens_per_s(),
                       p.tokens_per_s_per_gpu());
  } else {
    out += fmt::format("  step time        {:>10.3f} ms  ({})\n", p.step_ms(),
                       ph.kind == PhaseKind::decode ? "TPOT" : "one verify pass");
    out += fmt::format("  throughput       {:>10.0f} tok/s ({:.1f} tok/s per GPU{})\n", p.tokens_per_s(),
                       p.tokens_per_s_per_gpu(), ph.kind == PhaseKind::verify ? ", one token per sequence" : "");
  }
  if (m.moe) {
    out += fmt::format("  experts touched  {:>10.1f} of {} per GPU per MoE layer ({} routed tokens)\n",
                       p.graph.distinct_experts_per_gpu, m.moe->num_experts / par.ep, p.graph.routed_tokens);
  }
  const MemoryBreakdown& mem = p.memory;
  out += fmt::format(
      "  memory per GPU   weights {} + KV {} + KDA state {} + activations {} + reserve {} = {} of {} "
      "usable: {}\n",
      format_gib(mem.weights_bytes), format_gib(mem.kv_bytes), format_gib(mem.kda_state_bytes),
      format_gib(mem.activation_bytes), format_gib(mem.reserved_bytes), format_gib(mem.total_bytes),
      format_gib(mem.usable_bytes), mem.fits() ? "fits" : "DOES NOT FIT");
  out += fmt::format("  largest batch    {:>10} sequences fit with {} cached + {} new tokens each\n",
                     max_batch(s, ph.context_tokens), ph.context_tokens, ph.new_tokens);

  group_table(out, "by layer kind", p.by_layer_kind(), p.step.step_us, "layers");
  group_table(out, "by module", p.by_module(), p.step.step_us, "ops");
  group_table(out, "by bound", p.by_bound(), p.step.step_us, "ops");

  if (by_layer) {
    top_single_ops(out, p, top_ops);
  } else {
    top_op_names(out, p, top_ops);
  }
  return out;
}

}  // namespace k3
