#include "sim/collective_time.h"

#include "core/error.h"
#include "sim/roofline.h"

#include <algorithm>

namespace k3 {

std::string to_string(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::ring: return "ring";
    case CollectiveAlgorithm::tree: return "tree";
    case CollectiveAlgorithm::nvls: return "nvls";
    case CollectiveAlgorithm::peers: return "peers";
    case CollectiveAlgorithm::measured: return "measured";
  }
  return "?";
}

CollectiveLatency collective_latency(const Hardware& hw, CollectiveKind kind, int n) {
  K3_CHECK(n >= 1, "collective {} over {} GPUs: expected a group of at least 1", to_string(kind), n);
  K3_CHECK(hw.scale_up_domain_gpus >= 1, "hardware '{}' has a scale-up domain of {} GPUs", hw.name,
           hw.scale_up_domain_gpus);
  if (n == 1) return {CollectiveAlgorithm::ring, 0.0};
  const bool one_domain = n <= hw.scale_up_domain_gpus;
  const LinkSpec& link = one_domain ? hw.nvlink : hw.network;
  const double base = link.base_latency_of(kind);
  const double intra = hw.nvlink.step_latency_us, inter = hw.network.step_latency_us;
  // Groups beyond the domain span N whole domains ("nodes") of n/N GPUs each, as NCCL counts them.
  const int nodes = one_domain ? 1 : (n + hw.scale_up_domain_gpus - 1) / hw.scale_up_domain_gpus;
  const int per_node = n / nodes;

  switch (kind) {
    case CollectiveKind::send_recv: return {CollectiveAlgorithm::peers, base + (one_domain ? intra : inter)};
    case CollectiveKind::all_to_all:
      return {CollectiveAlgorithm::peers, base + (per_node - 1) * intra + (n - per_node) * inter};
    case CollectiveKind::all_reduce:
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter: break;
  }
  const int per_crossing = kind == CollectiveKind::all_reduce ? 2 : 1;  // all-reduce: reduce-scatter + all-gather
  const int steps = per_crossing * (n - 1), crossing = per_crossing * (nodes - 1);
  CollectiveLatency best{CollectiveAlgorithm::ring, base + (steps - crossing) * intra + crossing * inter};
  if (kind == CollectiveKind::all_reduce && !one_domain && hw.network.tree_level_latency_us) {
    int levels = 0;  // ⌊log2 N⌋, as NCCL's log2i
    for (int m = nodes; m > 1; m /= 2) ++levels;
    const double tree = base + 2 * ((per_node - 1) * intra + levels * *hw.network.tree_level_latency_us);
    if (tree < best.latency_us) best = {CollectiveAlgorithm::tree, tree};
  }
  if (one_domain && hw.nvlink.nvls_latency_us) {
    const double nvls = base + *hw.nvlink.nvls_latency_us;
    if (nvls < best.latency_us) best = {CollectiveAlgorithm::nvls, nvls};
  }
  return best;
}

CollectiveTime collective_time(const Hardware& hw, const Collective& c) {
  CollectiveTime t;
  const bool one_domain = c.group_size <= hw.scale_up_domain_gpus;
  // A measured curve for this collective, link and group size replaces the model.
  if (const MeasuredCollective* m =
          hw.measured_collective(to_string(c.kind), one_domain ? "nvlink" : "network", c.group_size)) {
    const int calls = std::max(1, c.calls);
    t.algorithm = CollectiveAlgorithm::measured;
    t.time_us = calls * m->time_us(c.bytes / calls);
    t.latency_us = calls * m->latency_us;
    t.bandwidth_us = t.time_us - t.latency_us;
    return t;
  }
  const LinkSpec& link = one_domain ? hw.nvlink : hw.network;
  const CollectiveLatency l = collective_latency(hw, c.kind, c.group_size);
  t.algorithm = l.algorithm;
  t.latency_us = c.calls * l.latency_us;
  t.bandwidth_us =
      c.bytes * bus_bandwidth_factor(c.kind, c.group_size) / (link.bandwidth_bytes_per_s * link.efficiency) * 1e6;
  t.time_us = t.latency_us + t.bandwidth_us;
  return t;
}

CollectiveKind collective_kind(const std::string& name) {
  for (int k = 0; k < kCollectiveKindCount; ++k) {
    if (to_string(static_cast<CollectiveKind>(k)) == name) return static_cast<CollectiveKind>(k);
  }
  throw InputError(fmt::format(
      "unknown collective '{}'; expected all_reduce, all_gather, reduce_scatter, all_to_all or send_recv", name));
}

double collective_call_time_us(const Hardware& hw, const std::string& collective, int n, double size_bytes) {
  return collective_time(hw, Collective{collective_kind(collective), size_bytes, n, 1}).time_us;
}

}  // namespace k3
