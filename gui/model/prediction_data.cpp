#include "gui/model/prediction_data.h"

#include "core/error.h"
#include "core/op_names.h"
#include "gui/model/json_fields.h"
#include "sim/predict.h"

#include <fmt/format.h>

#include <map>

namespace k3::gui {
namespace {

using Json = nlohmann::ordered_json;

std::vector<GroupRow> groups(const JsonFields& r, const Json& j, const std::string& key) {
  std::vector<GroupRow> out;
  if (!j.contains(key)) return out;
  for (const Json& g : j[key]) {
    out.push_back({r.get<std::string>(g, "group", key + "[]."), r.get<int>(g, "count", key + "[]."),
                   r.get<double>(g, "time_us", key + "[]."), r.get<double>(g, "flops", key + "[]."),
                   r.get<double>(g, "bytes", key + "[].")});
  }
  return out;
}

double byte_sum(const Json& counts) {
  double total = 0;
  if (counts.is_object()) {
    for (const auto& [unused, v] : counts.items()) total += v.is_number() ? v.get<double>() : 0.0;
  }
  return total;
}

std::string module_from_name(const std::string& name, bool collective) {
  if (collective) return "comm";
  const std::size_t dot = name.find('.');
  if (name.size() > 1 && name[0] == 'L' && dot != std::string::npos) {
    const std::size_t next = name.find('.', dot + 1);
    return name.substr(dot + 1, next == std::string::npos ? std::string::npos : next - dot - 1);
  }
  return name.substr(0, dot);
}

std::string short_tokens(long long tokens) {
  if (tokens >= 1024 && tokens % 1024 == 0) {
    return tokens >= (1 << 20) && tokens % (1 << 20) == 0 ? fmt::format("{}M", tokens >> 20)
                                                          : fmt::format("{}K", tokens >> 10);
  }
  return fmt::format("{}", tokens);
}

}  // namespace

std::string PredictedOpRow::base_name() const {
  if (name.size() > 1 && name[0] == 'L') {
    const std::size_t dot = name.find('.');
    if (dot != std::string::npos) return name.substr(dot + 1);
  }
  return name;
}

std::string PredictionData::title() const {
  return fmt::format("{} on {} x{} (tp {}, ep {}), {}, batch {}, {}", model, hardware, gpus, tp, ep, phase, batch,
                     short_tokens(phase == "prefill" ? new_tokens : context_tokens));
}

std::vector<GroupRow> PredictionData::by_kind() const {
  std::vector<GroupRow> out;
  std::map<std::string, std::size_t> index;
  for (const PredictedOpRow& op : ops) {
    auto [it, inserted] = index.emplace(op.kind, out.size());
    if (inserted) out.push_back(GroupRow{op.kind});
    GroupRow& g = out[it->second];
    g.count += 1;
    g.time_us += op.exposed_us;
    g.flops += op.flops;
    g.bytes += op.bytes;
  }
  return out;
}

int PredictionData::find(const std::string& op_name) const {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == op_name) return static_cast<int>(i);
  }
  return -1;
}

PredictionData prediction_data(const Prediction& pr, const std::string& origin) {
  const Scenario& s = pr.scenario;
  const Phase& ph = pr.graph.phase;
  PredictionData p;
  p.origin = origin;
  p.name = s.name;
  p.model = s.model.name;
  p.hardware = s.hardware.name;
  p.phase = to_string(ph.kind);
  p.gpus = s.parallelism.gpus();
  p.tp = s.parallelism.tp;
  p.attention_dp = s.parallelism.attention_dp;
  p.ep = s.parallelism.ep;
  p.pp = s.parallelism.pp;
  p.weights = to_string(s.precision.weights);
  p.routed_experts = to_string(s.precision.routed_experts);
  p.kv_cache = to_string(s.precision.kv_cache);
  p.kda_state = to_string(s.precision.kda_state);
  p.gemm_compute = to_string(s.precision.gemm_compute);
  p.batch = ph.batch;
  p.context_tokens = ph.context_tokens;
  p.new_tokens = ph.new_tokens;
  p.cuda_graphs = s.runtime.cuda_graphs;
  p.overrides = s.overrides;
  p.step_us = pr.step.step_us;
  p.tokens_per_s = pr.tokens_per_s();
  p.tokens_per_s_per_gpu = pr.tokens_per_s_per_gpu();
  const MemoryBreakdown& m = pr.memory;
  p.weights_bytes = m.weights_bytes;
  p.kv_bytes = m.kv_bytes;
  p.kda_state_bytes = m.kda_state_bytes;
  p.activation_bytes = m.activation_bytes;
  p.reserved_bytes = m.reserved_bytes;
  p.total_bytes = m.total_bytes;
  p.usable_bytes = m.usable_bytes;
  p.fits = m.fits();
  p.max_batch_at_context = max_batch(s, ph.context_tokens);
  const auto rows = [](const std::vector<GroupTotal>& groups) {
    std::vector<GroupRow> out;
    for (const GroupTotal& g : groups) out.push_back({g.group, g.count, g.time_us, g.flops, g.bytes});
    return out;
  };
  p.by_layer_kind = rows(pr.by_layer_kind());
  p.by_module = rows(pr.by_module());
  p.by_bound = rows(pr.by_bound());
  p.ops.reserve(pr.graph.ops.size());
  for (std::size_t i = 0; i < pr.graph.ops.size(); ++i) {
    const Op& op = pr.graph.ops[i];
    const OpTime& t = pr.step.ops[i];
    PredictedOpRow row;
    row.name = op.name();
    row.kind = to_string(op.kind);
    row.layer = op.layer + 1;
    row.compute = to_string(op.compute);
    row.flops = op.flops;
    row.bytes = op.bytes();
    row.intensity_flops_per_byte = op.intensity_flops_per_byte();
    row.kernels = op.kernels;
    row.bound = to_string(t.bound);
    row.compute_us = t.compute_us;
    row.memory_us = t.memory_us;
    row.communication_us = t.communication_us;
    row.overhead_us = t.overhead_us;
    row.time_us = t.time_us;
    row.exposed_us = t.exposed_us;
    if (op.collective) {
      row.collective_bytes = op.collective->bytes;
      row.group_size = op.collective->group_size;
    }
    if (op.runs_inside) row.runs_inside = op_name(*op.runs_inside, op.layer);
    row.module = module_from_name(row.name, row.collective());
    p.ops.push_back(std::move(row));
  }
  for (const OpRef& r : pr.graph.engine_only) p.engine_only_ops.push_back(r.name());
  return p;
}

profiler::PredictionFile prediction_file(const Prediction& pr, const std::string& origin) {
  profiler::PredictionFile f;
  f.origin = origin;
  f.hardware = pr.scenario.hardware.name;
  f.cuda_graphs = pr.scenario.runtime.cuda_graphs;
  f.records_engine = true;  // a live prediction always lists the engine's own ranges
  f.ops.reserve(pr.graph.ops.size());
  for (std::size_t i = 0; i < pr.graph.ops.size(); ++i) {
    const Op& op = pr.graph.ops[i];
    profiler::PredictedOp o;
    o.name = op.name();
    o.kind = op.kind;
    o.compute = op.compute;
    o.flops = op.flops;
    o.bytes = op.bytes();
    o.kernels = op.kernels;
    o.bound = to_string(pr.step.ops[i].bound);
    o.time_us = pr.step.ops[i].time_us;
    if (op.runs_inside) o.runs_inside = op_name(*op.runs_inside, op.layer);
    f.ops.push_back(std::move(o));
  }
  for (const OpRef& r : pr.graph.engine_only) f.engine_only.push_back(r.name());
  return f;
}

PredictionData prediction_from_json(const nlohmann::ordered_json& j, const std::string& origin) {
  const JsonFields r{origin, "k3perf predict --json"};
  PredictionData p;
  p.origin = origin;
  const Json& s = r.at(j, "scenario", "");
  p.name = r.get<std::string>(s, "name", "scenario.");
  p.model = r.get<std::string>(s, "model", "scenario.");
  p.hardware = r.get<std::string>(s, "hardware", "scenario.");
  p.phase = r.get<std::string>(s, "phase", "scenario.");
  p.gpus = r.get<int>(s, "gpus", "scenario.");
  const Json& par = r.at(s, "parallelism", "scenario.");
  p.tp = r.get<int>(par, "tp", "scenario.parallelism.");
  p.attention_dp = r.get<int>(par, "attention_dp", "scenario.parallelism.");
  p.ep = r.get<int>(par, "ep", "scenario.parallelism.");
  p.pp = r.get<int>(par, "pp", "scenario.parallelism.");
  const Json& prec = r.at(s, "precision", "scenario.");
  p.weights = r.get<std::string>(prec, "weights", "scenario.precision.");
  p.routed_experts = r.get<std::string>(prec, "routed_experts", "scenario.precision.");
  p.kv_cache = r.get<std::string>(prec, "kv_cache", "scenario.precision.");
  p.kda_state = r.get<std::string>(prec, "kda_state", "scenario.precision.");
  p.gemm_compute = r.get<std::string>(prec, "gemm_compute", "scenario.precision.");
  p.batch = r.get<long long>(s, "batch", "scenario.");
  p.context_tokens = r.get<long long>(s, "context_tokens", "scenario.");
  p.new_tokens = r.get<long long>(s, "new_tokens", "scenario.");
  p.cuda_graphs = r.get<bool>(s, "cuda_graphs", "scenario.");
  p.overrides = r.get_or<std::vector<std::string>>(s, "overrides", {});

  const Json& step = r.at(j, "step", "");
  p.step_us = r.get<double>(step, "step_time_us", "step.");
  p.tokens_per_s = r.get<double>(step, "tokens_per_s", "step.");
  p.tokens_per_s_per_gpu = r.get<double>(step, "tokens_per_s_per_gpu", "step.");

  const Json& m = r.at(j, "memory_per_gpu", "");
  const std::string mp = "memory_per_gpu.";
  p.weights_bytes = r.get<double>(m, "weights_bytes", mp);
  p.kv_bytes = r.get<double>(m, "kv_bytes", mp);
  p.kda_state_bytes = r.get<double>(m, "kda_state_bytes", mp);
  p.activation_bytes = r.get<double>(m, "activation_bytes", mp);
  p.reserved_bytes = r.get<double>(m, "reserved_bytes", mp);
  p.total_bytes = r.get<double>(m, "total_bytes", mp);
  p.usable_bytes = r.get<double>(m, "usable_bytes", mp);
  p.fits = r.get<bool>(m, "fits", mp);
  p.max_batch_at_context = r.get<long long>(m, "max_batch_at_context", mp);

  p.by_layer_kind = groups(r, j, "by_layer_kind");
  p.by_module = groups(r, j, "by_module");
  p.by_bound = groups(r, j, "by_bound");

  const Json& ops = r.at(j, "ops", "");
  p.ops.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Json& o = ops[i];
    const std::string path = fmt::format("ops[{}].", i);
    PredictedOpRow row;
    row.name = r.get<std::string>(o, "name", path);
    row.kind = r.get<std::string>(o, "kind", path);
    row.layer = r.get<int>(o, "layer", path);
    row.compute = r.get<std::string>(o, "compute", path);
    row.flops = r.get<double>(o, "flops", path);
    row.bytes = byte_sum(r.at(o, "read", path)) + byte_sum(r.at(o, "written", path));
    row.intensity_flops_per_byte = r.get<double>(o, "intensity_flops_per_byte", path);
    row.kernels = r.get<int>(o, "kernels", path);
    row.bound = r.get<std::string>(o, "bound", path);
    row.compute_us = r.get<double>(o, "compute_us", path);
    row.memory_us = r.get<double>(o, "memory_us", path);
    row.communication_us = r.get<double>(o, "communication_us", path);
    row.overhead_us = r.get<double>(o, "overhead_us", path);
    row.time_us = r.get<double>(o, "time_us", path);
    row.exposed_us = r.get<double>(o, "exposed_us", path);
    if (o.contains("collective")) {
      row.collective_bytes = r.get<double>(o["collective"], "bytes", path + "collective.");
      row.group_size = r.get<int>(o["collective"], "group_size", path + "collective.");
    }
    row.runs_inside = r.get_or<std::string>(o, "runs_inside", "");
    row.module = module_from_name(row.name, row.collective());
    p.ops.push_back(std::move(row));
  }
  p.engine_only_ops = r.get_or<std::vector<std::string>>(j, "engine_only_ops", {});
  return p;
}

}  // namespace k3::gui
