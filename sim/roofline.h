// Roofline timing of an op graph on one GPU type (docs/predict.md):
//   GPU op:        time = ridge_max(FLOPs / (peak[compute] · η_compute), bytes / (HBM bw · η_memory))
//                         + serial steps · the kind's step time (0 unless the hardware file has one)
//                         + kernels · (per-kernel overhead (eager launch, or CUDA-graph replay)
//                                      + the op kind's fixed kernel latency, 0 unless the hardware file has one)
//                  The serial term is a chain of dependent steps after the op's parallel work: the KDA
//                  state pass walks its chunks in order once the chunk products are written, one block
//                  per SM at a rank's few heads, at a time per chunk that its bytes do not set.
//   collective:    time = calls · α(fabric, n, algorithm) + bytes · busbw_factor / (link bw · η_link)
//                  (sim/collective_time.h; a measured curve replaces it)
//   concurrency:   an op that runs beside another (MLA output gate beside attention) shares the
//                  GPU: the pair takes ridge_max(Σ compute, Σ memory) + the larger overhead.
// η per efficiency class comes from the hardware file (defaults documented in docs/hardware.md).
#pragma once

#include "core/hardware.h"
#include "core/op_graph.h"
#include "core/scenario.h"

#include <string>
#include <vector>

namespace k3 {

enum class Bound { compute, memory, communication, overhead, serial };
std::string to_string(Bound b);

struct OpTime {
  double compute_us = 0;
  double memory_us = 0;
  double communication_us = 0;
  double overhead_us = 0;
  double serial_us = 0;   // Op::serial_steps · Hardware::serial_step_us of its kind
  double time_us = 0;     // the op alone
  double exposed_us = 0;  // what it adds to the step after overlap
  Bound bound = Bound::memory;
};

// The time of work that needs `compute_us` of compute and `memory_us` of memory at the ceilings: the smooth max
// (c^p + m^p)^(1/p) with the hardware's ridge exponent p (Hardware::ridge_smooth_max_exponent), max(c, m) when p
// is 0. At c = m it is 2^(1/p) · c; far from the ridge it tends to the larger time.
double ridge_max(double compute_us, double memory_us, double exponent);

// nccl-tests bus-bandwidth factor: all_reduce 2(n-1)/n, all_gather, reduce_scatter and all_to_all (n-1)/n, send 1.
double bus_bandwidth_factor(CollectiveKind kind, int group_size);
// Link a collective over `group_size` GPUs uses: NVLink inside the scale-up domain, else network.
const LinkSpec& link_for(const Hardware& hw, int group_size);

OpTime time_op(const Op& op, const Hardware& hw, const Runtime& rt);

struct StepTime {
  std::vector<OpTime> ops;  // parallel to OpGraph::ops
  double step_us = 0;       // sum of exposed times: one step, all pipeline stages in sequence
};

StepTime time_step(const OpGraph& graph, const Hardware& hw, const Runtime& rt);

}  // namespace k3
