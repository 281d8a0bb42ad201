// The predicted step as a trace (`k3perf predict --trace F`), in the measured traces' layout so that the two open
// side by side (Perfetto, HTA) and `k3perf compare` reads it as it reads a measurement: GPU 0 holds one event per
// op of the op graph, in graph order, named by the op (core/op_names.h, the names of the engine's NVTX ranges and
// so of the measured trace's op spans), lasting its predicted time; the op spans drawn over them carry the same
// names. Tracks (streams of GPU 0):
//   kPredictedComputeStream  the GPU ops, one after another;
//   kPredictedSideStream     an op that runs beside another (the MLA output gate beside attention): from its
//                            partner's start, for its own time; the step grows by its exposed time only;
//   kPredictedCommStream     the collectives.
// One "step 0" range spans the step (its predicted time) on the steps track. Each event's args carry the op (and
// instance 0), so `compare --prediction p.json --trace predicted.json` gives every op 0 % error.
#pragma once

#include "profiler/trace/trace.h"
#include "sim/predict.h"

namespace k3::profiler {

inline constexpr std::int32_t kPredictedComputeStream = 1;  // HTA counts streams > 0 as GPU streams
inline constexpr std::int32_t kPredictedSideStream = 2;
inline constexpr std::int32_t kPredictedCommStream = 3;

Trace prediction_trace(const Prediction& p);

}  // namespace k3::profiler
