#include "sim/predict.h"

#include "core/output_header.h"

#include <fmt/format.h>

#include <map>

namespace k3 {

double Prediction::tokens_per_s() const {
  const Phase& ph = graph.phase;
  const double tokens = ph.kind == PhaseKind::prefill ? double(ph.batch) * ph.new_tokens : double(ph.batch);
  return step.step_us > 0 ? tokens / (step.step_us * 1e-6) : 0.0;
}

std::string module_of(const Op& op) {
  if (op.collective) return "comm";
  return op_module(op.id);
}

namespace {
std::vector<GroupTotal> collect(const Prediction& p, auto key_of) {
  std::vector<GroupTotal> out;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < p.graph.ops.size(); ++i) {
    const Op& op = p.graph.ops[i];
    const std::string key = key_of(op, p.step.ops[i]);
    auto [it, inserted] = index.emplace(key, out.size());
    if (inserted) out.push_back(GroupTotal{key});
    GroupTotal& g = out[it->second];
    g.count += 1;
    g.time_us += p.step.ops[i].exposed_us;
    g.flops += op.flops;
    g.bytes += op.bytes();
    if (op.collective) g.sent_bytes += op.collective->bytes;
  }
  return out;
}
}  // namespace

std::vector<OpNameTotal> Prediction::by_op_name() const {
  std::vector<OpNameTotal> out;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& op = graph.ops[i];
    const OpTime& t = step.ops[i];
    std::string name = op.name();
    if (op.layer >= 0) name = name.substr(name.find('.') + 1);  // "L004.mla.attn_decode" -> "mla.attn_decode"
    auto [it, inserted] = index.emplace(name, out.size());
    if (inserted) out.push_back(OpNameTotal{name, op.kind});
    OpNameTotal& g = out[it->second];
    g.count += 1;
    g.time_us += t.exposed_us;
    g.flops += op.flops;
    g.bytes += op.bytes();
    if (op.collective) g.sent_bytes += op.collective->bytes;
    if (g.count == 1 || t.exposed_us > g.longest_us) {
      g.longest_us = t.exposed_us;
      g.bound = t.bound;
    }
  }
  return out;
}

std::vector<GroupTotal> Prediction::by_module() const {
  return collect(*this, [](const Op& op, const OpTime&) { return module_of(op); });
}

std::vector<GroupTotal> Prediction::by_bound() const {
  return collect(*this, [](const Op&, const OpTime& t) { return to_string(t.bound); });
}

std::vector<GroupTotal> Prediction::by_layer_kind() const {
  const ModelConfig& m = scenario.model;
  std::vector<GroupTotal> out = collect(*this, [&](const Op& op, const OpTime&) -> std::string {
    if (op.layer < 0) return "embed+head";
    return m.layer_attention[op.layer] == AttentionKind::kda ? "KDA layers" : "MLA layers";
  });
  for (GroupTotal& g : out) {  // count layers, not ops (embed+head is no layer)
    g.count = g.group == "KDA layers"   ? m.count_layers(AttentionKind::kda)
              : g.group == "MLA layers" ? m.count_layers(AttentionKind::mla)
                                        : 0;
  }
  return out;
}

double Prediction::time_us_matching(const std::string& needle) const {
  double total = 0;
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    if (graph.ops[i].name().find(needle) != std::string::npos) total += step.ops[i].exposed_us;
  }
  return total;
}

Prediction predict(const Scenario& s) {
  Prediction p{s, build_op_graph(s.model, s.phase, s.parallelism, s.precision), {}, {}};
  p.step = time_step(p.graph, s.hardware, s.runtime);
  p.memory = estimate_memory(s, p.graph);
  return p;
}

namespace {
nlohmann::ordered_json bytes_json(const ByteCounts& b) {
  return {{"weights", b.weights}, {"kv", b.kv}, {"state", b.state}, {"activations", b.activations}};
}

nlohmann::ordered_json groups_json(const std::vector<GroupTotal>& groups) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const GroupTotal& g : groups) {
    out.push_back({{"group", g.group},
                   {"count", g.count},
                   {"time_us", g.time_us},
                   {"flops", g.flops},
                   {"bytes", g.bytes},
                   {"sent_bytes", g.sent_bytes}});
  }
  return out;
}
}  // namespace

nlohmann::ordered_json to_json(const Prediction& p) {
  const Scenario& s = p.scenario;
  const Phase& ph = p.graph.phase;
  nlohmann::ordered_json j = output_header("k3perf-prediction", 1);
  j["scenario"] = {
      {"name", s.name},
      {"source", s.source},
      {"model", s.model.name},
      {"hardware", s.hardware.name},
      {"gpus", s.parallelism.gpus()},
      {"parallelism",
       {{"tp", s.parallelism.tp},
        {"attention_dp", s.parallelism.attention_dp},
        {"ep", s.parallelism.ep},
        {"pp", s.parallelism.pp}}},
      {"precision",
       {{"weights", to_string(s.precision.weights)},
        {"routed_experts", to_string(s.precision.routed_experts)},
        {"kv_cache", to_string(s.precision.kv_cache)},
        {"kda_state", to_string(s.precision.kda_state)},
        {"gemm_compute", to_string(s.precision.gemm_compute)}}},
      {"phase", to_string(ph.kind)},
      {"batch", ph.batch},
      {"context_tokens", ph.context_tokens},
      {"new_tokens", ph.new_tokens},
      {"cuda_graphs", s.runtime.cuda_graphs},
      {"overrides", s.overrides},
  };
  const Hardware& hw = s.hardware;
  nlohmann::ordered_json peaks = nlohmann::ordered_json::object();
  for (const auto& [type, flops] : hw.peak_flops_per_s) peaks[to_string(type)] = flops;
  j["hardware"] = {
      // what the roofline used, so that one can be drawn from this file alone
      {"name", hw.name},
      {"peak_flops_per_s", peaks},
      {"hbm_bandwidth_bytes_per_s", hw.hbm_bandwidth_bytes_per_s},
      {"hbm_capacity_bytes", hw.hbm_capacity_bytes},
      {"kernel_launch_overhead_us", hw.kernel_launch_overhead_us},
      {"graph_kernel_overhead_us", hw.graph_kernel_overhead_us},
      {"ridge_smooth_max_exponent", hw.ridge_smooth_max_exponent},
  };
  j["step"] = {
      {"step_time_us", p.step.step_us},
      {"tokens_per_s", p.tokens_per_s()},
      {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu()},
      {"tokens_per_gpu", p.graph.tokens_per_gpu},
      {"distinct_experts_per_gpu", p.graph.distinct_experts_per_gpu},
  };
  if (ph.kind == PhaseKind::prefill) {
    j["step"]["ttft_ms"] = p.step_ms();
  } else {
    j["step"]["tpot_ms"] = p.step_ms();
  }
  const MemoryBreakdown& m = p.memory;
  j["memory_per_gpu"] = {
      {"weights_bytes", m.weights_bytes},
      {"kv_bytes", m.kv_bytes},
      {"kda_state_bytes", m.kda_state_bytes},
      {"activation_bytes", m.activation_bytes},
      {"reserved_bytes", m.reserved_bytes},
      {"total_bytes", m.total_bytes},
      {"usable_bytes", m.usable_bytes},
      {"fits", m.fits()},
      {"kv_bytes_per_token", m.kv_bytes_per_token},
      {"state_bytes_per_sequence", m.state_bytes_per_sequence},
      {"max_batch_at_context", max_batch(s, ph.context_tokens)},
  };
  j["by_layer_kind"] = groups_json(p.by_layer_kind());
  j["by_module"] = groups_json(p.by_module());
  j["by_bound"] = groups_json(p.by_bound());
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < p.graph.ops.size(); ++i) {
    const Op& op = p.graph.ops[i];
    const OpTime& t = p.step.ops[i];
    nlohmann::ordered_json o = {
        {"name", op.name()},
        {"kind", to_string(op.kind)},
        {"layer", op.layer + 1},  // 1-based as in the op names; 0 for embed.* and head.*
        {"stage", op.stage},
        {"compute", to_string(op.compute)},
        {"flops", op.flops},
        {"read", bytes_json(op.read)},
        {"written", bytes_json(op.written)},
        {"intensity_flops_per_byte", op.intensity_flops_per_byte()},
        {"kernels", op.kernels},
        {"serial_steps", op.serial_steps},
        {"bound", to_string(t.bound)},
        {"compute_us", t.compute_us},
        {"memory_us", t.memory_us},
        {"communication_us", t.communication_us},
        {"overhead_us", t.overhead_us},
        {"serial_us", t.serial_us},
        {"time_us", t.time_us},
        {"exposed_us", t.exposed_us},
    };
    if (op.collective) {
      o["collective"] = {{"kind", to_string(op.collective->kind)},
                         {"bytes", op.collective->bytes},
                         {"group_size", op.collective->group_size},
                         {"calls", op.collective->calls}};
    }
    if (op.concurrent_with >= 0) o["runs_beside"] = p.graph.ops[op.concurrent_with].name();
    if (op.runs_inside) o["runs_inside"] = op_name(*op.runs_inside, op.layer);
    ops.push_back(std::move(o));
  }
  j["ops"] = std::move(ops);
  nlohmann::ordered_json engine_only = nlohmann::ordered_json::array();
  for (const OpRef& r : p.graph.engine_only) engine_only.push_back(r.name());
  j["engine_only_ops"] = std::move(engine_only);
  return j;
}

std::string to_csv(const Prediction& p) {
  std::string out =
      "name,kind,layer,bound,time_us,exposed_us,compute_us,memory_us,communication_us,overhead_us,flops,"
      "weight_bytes,kv_bytes,state_bytes,activation_bytes,comm_bytes,intensity_flops_per_byte\n";
  for (std::size_t i = 0; i < p.graph.ops.size(); ++i) {
    const Op& op = p.graph.ops[i];
    const OpTime& t = p.step.ops[i];
    const ByteCounts& r = op.read;
    const ByteCounts& w = op.written;
    out += fmt::format(
        "{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n",
        op.name(), to_string(op.kind), op.layer + 1, to_string(t.bound), t.time_us, t.exposed_us, t.compute_us,
        t.memory_us, t.communication_us, t.overhead_us, op.flops, r.weights + w.weights, r.kv + w.kv, r.state + w.state,
        r.activations + w.activations, op.collective ? op.collective->bytes : 0.0, op.intensity_flops_per_byte());
  }
  return out;
}

}  // namespace k3
