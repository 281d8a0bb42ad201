#include "engine/parallel/uniform_routing.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace k3::parallel {

std::vector<int64_t> uniform_rows_to(const UniformRouting& routing, int ep, int dest, int layer,
                                     int64_t tokens_per_peer) {
  const int E = routing.experts, k = routing.top_k;
  if (ep < 1 || E < 1 || E % ep != 0) {
    throw InputError(fmt::format("uniform routing: ep {} must divide the {} experts", ep, E));
  }
  if (k < 1 || k > E) throw InputError(fmt::format("uniform routing: top_k {} must be in [1, {}]", k, E));
  if (dest < 0 || dest >= ep) throw InputError(fmt::format("uniform routing: rank {} outside a group of {}", dest, ep));
  if (tokens_per_peer < 0) throw InputError(fmt::format("uniform routing: {} tokens", tokens_per_peer));

  const int per_rank = E / ep;
  std::vector<int64_t> rows(static_cast<std::size_t>(ep), 0);
  std::vector<int> chosen;
  chosen.reserve(static_cast<std::size_t>(k));
  for (int peer = 0; peer < ep; ++peer) {
    // One stream per (seed, layer, peer): a peer's tokens do not depend on which rank asks.
    std::seed_seq seq{static_cast<uint32_t>(routing.seed), static_cast<uint32_t>(routing.seed >> 32),
                      static_cast<uint32_t>(layer), static_cast<uint32_t>(peer)};
    std::mt19937_64 rng(seq);
    for (int64_t t = 0; t < tokens_per_peer; ++t) {
      chosen.clear();
      while (static_cast<int>(chosen.size()) < k) {
        // Multiply-shift maps 32 random bits onto [0, E) without a library distribution (whose output varies).
        const int x = static_cast<int>(((rng() >> 32) * static_cast<uint64_t>(E)) >> 32);
        if (std::find(chosen.begin(), chosen.end(), x) == chosen.end()) chosen.push_back(x);
      }
      for (int x : chosen) rows[static_cast<std::size_t>(peer)] += x / per_rank == dest;
    }
  }
  return rows;
}

}  // namespace k3::parallel
