#include "profiler/compare/prediction_file.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "profiler/trace/gzip.h"

#include <algorithm>
#include <set>

namespace k3::profiler {

namespace {

OpKind op_kind(const JsonNode& node) {
  const std::string name = node.as_string();
  if (const std::optional<OpKind> kind = parse_op_kind(name)) return *kind;
  std::string known;
  for (int k = 0; k <= static_cast<int>(OpKind::collective); ++k) {
    known += (known.empty() ? "" : ", ") + to_string(static_cast<OpKind>(k));
  }
  node.fail(fmt::format("unknown op kind '{}'; expected one of {{{}}}", name, known));
}

// An older prediction's hosts, from core's op table: with AttnRes mixers in the prediction, each op whose
// OpInfo names an AttnRes host runs inside it.
void hosts_from_op_table(PredictionFile& p) {
  const bool attnres =
      std::any_of(p.ops.begin(), p.ops.end(), [](const PredictedOp& op) { return op.kind == OpKind::attnres_mix; });
  if (!attnres) return;
  for (PredictedOp& op : p.ops) {
    const std::optional<OpRef> ref = parse_op_name(op.name);
    if (!ref) continue;
    if (const std::optional<OpId> host = op_info(ref->id).attnres_host) op.runs_inside = op_name(*host, ref->layer);
  }
}

double byte_sum(const JsonNode& bytes) {
  double total = 0;
  for (const char* cls : {"weights", "kv", "state", "activations"}) {
    const double b = bytes[cls].as_double();
    if (b < 0) bytes[cls].fail(fmt::format("expected bytes >= 0, got {}", b));
    total += b;
  }
  return total;
}

}  // namespace

PredictionFile parse_prediction(const std::string& text, const std::string& origin) {
  const JsonNode root = JsonNode::parse(text, origin);
  PredictionFile p;
  p.origin = origin;
  const JsonNode scenario = root["scenario"];
  p.hardware = scenario["hardware"].as_string();
  p.cuda_graphs = scenario["cuda_graphs"].as_bool();
  if (const auto phase = scenario.find("phase")) p.phase = phase->as_string();
  if (const auto model = scenario.find("model")) p.model = model->as_string();
  if (const auto v = scenario.find("batch")) p.batch = v->as_int();
  if (const auto v = scenario.find("context_tokens")) p.context_tokens = v->as_int();
  if (const auto v = scenario.find("new_tokens")) p.new_tokens = v->as_int();
  if (const auto step = root.find("step")) {
    if (const auto v = step->find("step_time_us")) p.step_time_us = v->as_double();
  }
  const JsonNode ops = root["ops"];
  if (!ops.raw().is_array()) ops.fail("expected an array of ops");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < ops.raw().size(); ++i) {
    const JsonNode o(&ops.raw()[i], origin, fmt::format("ops[{}]", i));
    PredictedOp op;
    op.name = o["name"].as_string();
    if (op.name.empty()) o["name"].fail("expected an op name");
    if (!seen.insert(op.name).second) o["name"].fail(fmt::format("op '{}' appears twice", op.name));
    op.kind = op_kind(o["kind"]);
    const std::string compute = o["compute"].as_string();
    if (!parse_compute_type(compute, &op.compute)) o["compute"].fail(fmt::format("unknown compute type '{}'", compute));
    op.flops = o["flops"].as_double();
    if (op.flops < 0) o["flops"].fail("expected FLOPs >= 0");
    op.bytes = byte_sum(o["read"]) + byte_sum(o["written"]);
    op.kernels = read_int<int>(o["kernels"], limit::op_kernels);
    if (const auto steps = o.find("serial_steps")) {
      op.serial_steps = steps->as_double();
      if (!(op.serial_steps >= 0 && op.serial_steps <= 1e12)) steps->fail("expected serial steps in [0, 1e12]");
    }
    op.bound = o["bound"].as_string();
    op.time_us = o["time_us"].as_double();
    if (op.time_us < 0) o["time_us"].fail("expected a time >= 0");
    if (o.has("runs_inside")) {
      op.runs_inside = o["runs_inside"].as_string();
      if (op.runs_inside.empty() || op.runs_inside == op.name) o["runs_inside"].fail("expected another op's name");
    }
    if (const std::optional<OpRef> ref = parse_op_name(op.name)) p.layers = std::max(p.layers, ref->layer + 1);
    p.ops.push_back(std::move(op));
  }
  if (!root.has("engine_only_ops")) {
    hosts_from_op_table(p);
    return p;
  }
  p.records_engine = true;
  const JsonNode engine_only = root["engine_only_ops"];
  if (!engine_only.raw().is_array()) engine_only.fail("expected an array of op names");
  for (std::size_t i = 0; i < engine_only.raw().size(); ++i) {
    const JsonNode name(&engine_only.raw()[i], origin, fmt::format("engine_only_ops[{}]", i));
    p.engine_only.push_back(name.as_string());
    if (seen.count(p.engine_only.back()))
      name.fail(fmt::format("op '{}' is also a predicted op", p.engine_only.back()));
  }
  return p;
}

PredictionFile load_prediction(const std::string& path) {
  std::string data = read_file(path);
  if (is_gzip(data)) data = gzip_decompress(data, path);  // a 93-layer rank's prediction is kept as .json.gz
  return parse_prediction(data, path);
}

}  // namespace k3::profiler
