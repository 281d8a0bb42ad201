// The ops of a prediction JSON (`k3perf predict --json`, sim/predict.cpp) as compare and
// calibration read them: name, kind, compute type, FLOPs, bytes, kernels and the predicted time
// of the op alone, and what the engine does differently (the graph's record, core/op_graph.h): the op whose
// range an op runs inside (ops[i].runs_inside) and the ranges only the engine opens (engine_only_ops).
// A prediction written before k3perf recorded these has neither key: its ops' hosts are then read from
// core's op table (OpInfo::attnres_host, when the prediction has AttnRes mixers), and it lists no
// engine-only ranges. Errors name the file and the key (ops[i].field).
#pragma once

#include "core/op_graph.h"

#include <string>
#include <vector>

namespace k3::profiler {

struct PredictedOp {
  std::string name;
  OpKind kind = OpKind::gemm;
  ComputeType compute = ComputeType::bf16;
  double flops = 0;
  double bytes = 0;  // read + written, every class
  int kernels = 1;
  double serial_steps = 0;  // Op::serial_steps; 0 in a file without it
  std::string bound;        // compute, memory, communication, overhead, serial
  double time_us = 0;       // the op alone (not its exposed share)
  std::string runs_inside;  // the op whose kernel and range the engine runs this one in; empty: its own
  bool collective() const { return kind == OpKind::collective; }
};

struct PredictionFile {
  std::string origin;
  std::string hardware;  // the hardware's display name
  std::string phase;     // scenario.phase: "decode", "prefill", ...; empty in a file without it
  // The shape predicted (scenario.model, .batch, .context_tokens, .new_tokens; 0 or empty in a file without them)
  // and the layers its ops name; compare checks them against what a trace records (shape_mismatches).
  std::string model;
  long long batch = 0, context_tokens = 0, new_tokens = 0;
  int layers = 0;
  double step_time_us = 0;  // step.step_time_us; 0 in a file without it
  bool cuda_graphs = true;
  std::vector<PredictedOp> ops;
  bool records_engine = false;           // the file has engine_only_ops (and runs_inside where an op has one)
  std::vector<std::string> engine_only;  // ranges the engine opens that no op predicts
};

PredictionFile parse_prediction(const std::string& text, const std::string& origin);
PredictionFile load_prediction(const std::string& path);  // JSON, or JSON gzipped

}  // namespace k3::profiler
