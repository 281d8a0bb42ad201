// One prediction for one scenario: the op graph, op times, step metrics and memory, and the
// summaries the CLI, the JSON/CSV writers and the claim checks read. Deterministic: the same
// scenario gives the same bytes of JSON.
#pragma once

#include "core/op_graph.h"
#include "core/scenario.h"
#include "sim/memory.h"
#include "sim/roofline.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace k3 {

struct GroupTotal {
  std::string group;   // a module ("kda", "moe", ...) or a layer kind ("KDA layers")
  int count = 0;       // ops, or layers for layer kinds
  double time_us = 0;  // exposed time
  double flops = 0;
  double bytes = 0;       // HBM bytes read and written
  double sent_bytes = 0;  // collective payload per GPU (Collective::bytes), 0 for GPU ops
};

// The ops of one name summed over the layers that have it ("mla.attn_decode" over 24 MLA layers).
struct OpNameTotal {
  std::string name;  // the op name without its "Lnnn." layer prefix
  OpKind kind = OpKind::gemm;
  int count = 0;
  double time_us = 0;  // exposed
  double flops = 0;
  double bytes = 0;
  double sent_bytes = 0;
  Bound bound = Bound::memory;  // of its longest instance
  double longest_us = 0;
};

struct Prediction {
  Scenario scenario;
  OpGraph graph;
  StepTime step;
  MemoryBreakdown memory;

  double step_ms() const { return step.step_us / 1000.0; }
  // Tokens the whole replica emits (decode, verify: one per sequence per step) or ingests (prefill) per second.
  double tokens_per_s() const;
  double tokens_per_s_per_gpu() const { return tokens_per_s() / scenario.parallelism.gpus(); }

  std::vector<GroupTotal> by_module() const;      // "kda", "mla", "moe", "mlp", "attnres", "norm", "comm", ...
  std::vector<GroupTotal> by_layer_kind() const;  // "KDA layers", "MLA layers", "embed+head"
  std::vector<GroupTotal> by_bound() const;       // compute / memory / communication / overhead
  std::vector<OpNameTotal> by_op_name() const;    // in graph order of first appearance
  // Exposed time of the ops whose name contains `needle` (e.g. ".attnres.").
  double time_us_matching(const std::string& needle) const;
};

Prediction predict(const Scenario& s);

// The module of an op name: the part after "Lnnn." up to the next dot, or "embed"/"head";
// collectives are grouped as "comm".
std::string module_of(const Op& op);

nlohmann::ordered_json to_json(const Prediction& p);
// One row per op: name, kind, layer, bound, times, flops, bytes by class, intensity.
std::string to_csv(const Prediction& p);

}  // namespace k3
