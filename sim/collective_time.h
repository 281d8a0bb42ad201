// Collective time by fabric and group size, in the form of NCCL's tuning model (src/graph/tuning.cc of
// NVIDIA/nccl; docs/comm.md). A call over n GPUs costs its collective's base latency, plus the latency of the
// algorithm NCCL would pick for a small message (the lowest of those the fabric offers), plus its bytes:
//   ring:  base + (steps − inter) · step_nvlink + inter · step_network
//          steps = 2(n−1) all-reduce, n−1 all-gather / reduce-scatter; inter = the steps that cross nodes
//          (2(N−1), N−1 over N nodes; 0 inside one scale-up domain)
//   tree:  all-reduce across nodes only: base + 2 · ((n/N − 1) · step_nvlink + ⌊log2 N⌋ · tree_level_network)
//   nvls:  all-reduce, all-gather, reduce-scatter inside an NVSwitch domain: base + nvls_latency
//   peers: all-to-all, one step per peer: base + (n/N − 1) · step_nvlink + (n − n/N) · step_network;
//          send/recv, one step over the link it crosses
//   time = calls · latency + bytes · busbw_factor / (link bw · η)   (the link of the group: nvlink or network)
// A measured curve for the collective, link and group size (Hardware::measured_collective) replaces all of it.
#pragma once

#include "core/hardware.h"
#include "core/op_graph.h"

#include <string>

namespace k3 {

enum class CollectiveAlgorithm { ring, tree, nvls, peers, measured };
std::string to_string(CollectiveAlgorithm a);

struct CollectiveLatency {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  double latency_us = 0;  // one call
};
// The latency of one call of `kind` over `group_size` GPUs: the lowest over the algorithms available.
CollectiveLatency collective_latency(const Hardware& hw, CollectiveKind kind, int group_size);

struct CollectiveTime {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  double latency_us = 0;    // calls · per-call latency (the measured curve's floor when measured)
  double bandwidth_us = 0;  // the rest
  double time_us = 0;
};
// One op's collective (its calls, payload bytes and group).
CollectiveTime collective_time(const Hardware& hw, const Collective& c);
// The kind named as in nccl-tests tables and hardware files (all_reduce, ...); InputError listing them otherwise.
CollectiveKind collective_kind(const std::string& name);
// One call of `size_bytes` (nccl-tests "size") of a named collective.
double collective_call_time_us(const Hardware& hw, const std::string& collective, int group_size, double size_bytes);

}  // namespace k3
