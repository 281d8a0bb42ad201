// The routed tokens a seeded uniform router sends between the ranks of an expert-parallel group, which is what a
// rank under emulation receives in place of its peers' real dispatch: each token picks top_k distinct experts
// uniformly at random, and expert x lives on rank x / (experts / ep). Rows are (token, expert) assignments, as the
// op graph counts the all-to-all's bytes. Deterministic: the same seed, layer and sizes give the same counts on
// every platform (std::mt19937_64, whose sequence the standard fixes).
#pragma once

#include <cstdint>
#include <vector>

namespace k3::parallel {

struct UniformRouting {
  int experts = 0;
  int top_k = 0;
  uint64_t seed = 0;
};

// Rows that each of the `ep` peers sends to rank `dest` in layer `layer` when every peer routes `tokens_per_peer`
// tokens; [ep], peer order. Throws k3::InputError on sizes that do not fit (ep not dividing the experts, top_k
// above the experts, dest outside the group).
std::vector<int64_t> uniform_rows_to(const UniformRouting& routing, int ep, int dest, int layer,
                                     int64_t tokens_per_peer);

// Everything rank `rank` of the group sends and receives in one layer's dispatch when peer p routes tokens_of_peer[p]
// tokens (the same draws as uniform_rows_to): rows it sends each peer (its own tokens' choices), rows it receives from
// each, and the local expert (expert − first expert of the rank) of every received row, in arrival order (peer by
// peer, each peer's rows by expert, as the sender sorts them).
struct UniformExchange {
  std::vector<int64_t> send_rows, recv_rows;  // [ep], peer order
  std::vector<int32_t> recv_local_expert;     // [Σ recv_rows]
};
UniformExchange uniform_exchange(const UniformRouting& routing, int ep, int rank, int layer,
                                 const std::vector<int64_t>& tokens_of_peer);

}  // namespace k3::parallel
