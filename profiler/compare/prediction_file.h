// The ops of a prediction JSON (`k3perf predict --json`, sim/predict.cpp) as compare and
// calibration read them: name, kind, compute type, FLOPs, bytes, kernels and the predicted time
// of the op alone. Errors name the file and the key (ops[i].field).
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
  std::string bound;   // compute, memory, communication, overhead
  double time_us = 0;  // the op alone (not its exposed share)
  bool collective() const { return kind == OpKind::collective; }
};

struct PredictionFile {
  std::string origin;
  std::string hardware;  // the hardware's display name
  bool cuda_graphs = true;
  std::vector<PredictedOp> ops;
};

PredictionFile parse_prediction(const std::string& text, const std::string& origin);
PredictionFile load_prediction(const std::string& path);

}  // namespace k3::profiler
