#include "sim/roofline.h"

#include "sim/collective_time.h"

#include <algorithm>
#include <cmath>

namespace k3 {

std::string to_string(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
    case Bound::communication: return "communication";
    case Bound::overhead: return "overhead";
    case Bound::serial: return "serial";
  }
  return "?";
}

double ridge_max(double compute_us, double memory_us, double exponent) {
  const double hi = std::max(compute_us, memory_us), lo = std::min(compute_us, memory_us);
  if (exponent <= 0 || hi <= 0) return hi;
  return hi * std::pow(1 + std::pow(lo / hi, exponent), 1 / exponent);  // scaled: no overflow for large p
}

double bus_bandwidth_factor(CollectiveKind kind, int n) {
  if (n <= 1) return 0.0;
  switch (kind) {
    case CollectiveKind::all_reduce: return 2.0 * (n - 1) / n;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: return double(n - 1) / n;
    case CollectiveKind::send_recv: return 1.0;
  }
  return 1.0;
}

const LinkSpec& link_for(const Hardware& hw, int group_size) {
  return group_size <= hw.scale_up_domain_gpus ? hw.nvlink : hw.network;
}

namespace {

// Hardware rates resolved once per step: map lookups per op would dominate a 2,000-op graph.
struct Rates {
  double peak[kComputeTypeCount] = {};               // by ComputeType; 0 = unsupported
  Efficiency eff[std::size(kAllEfficiencyClasses)];  // by EfficiencyClass
  double overhead_us = 0;
  double ridge_exponent = 0;
  double latency_us[static_cast<int>(OpKind::collective) + 1] = {};  // by OpKind
  double step_us[static_cast<int>(OpKind::collective) + 1] = {};     // by OpKind
  const Hardware* hw = nullptr;

  Rates(const Hardware& h, const Runtime& rt) : hw(&h) {
    for (const auto& [type, rate] : h.peak_flops_per_s) peak[static_cast<int>(type)] = rate;
    for (EfficiencyClass c : kAllEfficiencyClasses) eff[static_cast<int>(c)] = h.efficiency_of(c);
    for (const auto& [kind, us] : h.kernel_latency_us) latency_us[static_cast<int>(kind)] = us;
    for (const auto& [kind, us] : h.serial_step_us) step_us[static_cast<int>(kind)] = us;
    overhead_us = rt.cuda_graphs ? h.graph_kernel_overhead_us : h.kernel_launch_overhead_us;
    ridge_exponent = h.ridge_smooth_max_exponent;
  }
  double peak_of(ComputeType c) const {
    const double p = peak[static_cast<int>(c)];
    return p > 0 ? p : hw->peak(c);  // hw->peak throws the error naming the hardware
  }
};

OpTime time_with(const Op& op, const Rates& r) {
  OpTime t;
  if (op.collective) {
    t.communication_us = collective_time(*r.hw, *op.collective).time_us;  // or its measured curve
    t.time_us = t.communication_us;
    t.bound = Bound::communication;
    return t;
  }
  const Efficiency& eff = r.eff[static_cast<int>(efficiency_class(op.kind))];
  t.compute_us = op.flops / (r.peak_of(op.compute) * eff.compute) * 1e6;
  t.memory_us = op.bytes() / (r.hw->hbm_bandwidth_bytes_per_s * eff.memory) * 1e6;
  t.overhead_us = op.kernels * (r.overhead_us + r.latency_us[static_cast<int>(op.kind)]);
  t.serial_us = op.serial_steps * r.step_us[static_cast<int>(op.kind)];
  const double roof = ridge_max(t.compute_us, t.memory_us, r.ridge_exponent);
  t.time_us = roof + t.serial_us + t.overhead_us;
  t.bound = t.overhead_us > std::max(roof, t.serial_us) ? Bound::overhead
            : t.serial_us > roof                        ? Bound::serial
            : t.compute_us >= t.memory_us               ? Bound::compute
                                                        : Bound::memory;
  return t;
}

}  // namespace

OpTime time_op(const Op& op, const Hardware& hw, const Runtime& rt) { return time_with(op, Rates(hw, rt)); }

StepTime time_step(const OpGraph& graph, const Hardware& hw, const Runtime& rt) {
  StepTime step;
  step.ops.reserve(graph.ops.size());
  const Rates rates(hw, rt);
  for (const Op& op : graph.ops) step.ops.push_back(time_with(op, rates));
  for (std::size_t i = 0; i < graph.ops.size(); ++i) step.ops[i].exposed_us = step.ops[i].time_us;
  // A side op shares the GPU with its partner: the pair costs ridge_max(Σ compute, Σ memory) + overhead.
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const int j = graph.ops[i].concurrent_with;
    if (j < 0) continue;
    const OpTime& side = step.ops[i];
    const OpTime& main = step.ops[j];
    const double pair =
        ridge_max(side.compute_us + main.compute_us, side.memory_us + main.memory_us, rates.ridge_exponent) +
        std::max(side.overhead_us, main.overhead_us);
    step.ops[i].exposed_us = std::max(0.0, pair - main.exposed_us);
  }
  for (const OpTime& t : step.ops) step.step_us += t.exposed_us;
  return step;
}

}  // namespace k3
