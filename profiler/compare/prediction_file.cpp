#include "profiler/compare/prediction_file.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_reader.h"

#include <set>

namespace k3::profiler {

namespace {

OpKind op_kind(const JsonNode& node) {
  const std::string name = node.as_string();
  std::string known;
  for (int k = 0; k <= static_cast<int>(OpKind::collective); ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    if (to_string(kind) == name) return kind;
    known += (known.empty() ? "" : ", ") + to_string(kind);
  }
  node.fail(fmt::format("unknown op kind '{}'; expected one of {{{}}}", name, known));
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
    op.kernels = static_cast<int>(o["kernels"].as_non_negative_int());
    op.bound = o["bound"].as_string();
    op.time_us = o["time_us"].as_double();
    if (op.time_us < 0) o["time_us"].fail("expected a time >= 0");
    p.ops.push_back(std::move(op));
  }
  return p;
}

PredictionFile load_prediction(const std::string& path) { return parse_prediction(read_file(path), path); }

}  // namespace k3::profiler
