#include "engine/parallel/uniform_routing.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace k3::parallel {

namespace {

void check_sizes(const UniformRouting& routing, int ep, int rank) {
  const int E = routing.experts, k = routing.top_k;
  if (ep < 1 || E < 1 || E % ep != 0) {
    throw InputError(fmt::format("uniform routing: ep {} must divide the {} experts", ep, E));
  }
  if (k < 1 || k > E) throw InputError(fmt::format("uniform routing: top_k {} must be in [1, {}]", k, E));
  if (rank < 0 || rank >= ep) throw InputError(fmt::format("uniform routing: rank {} outside a group of {}", rank, ep));
}

// Calls visit(token, expert) for the top_k distinct experts of each of `tokens` tokens of `peer` in `layer`.
template <typename Visit>
void draw(const UniformRouting& routing, int layer, int peer, int64_t tokens, Visit visit) {
  const int E = routing.experts, k = routing.top_k;
  // One stream per (seed, layer, peer): a peer's tokens do not depend on which rank asks.
  std::seed_seq seq{static_cast<uint32_t>(routing.seed), static_cast<uint32_t>(routing.seed >> 32),
                    static_cast<uint32_t>(layer), static_cast<uint32_t>(peer)};
  std::mt19937_64 rng(seq);
  std::vector<int> chosen;
  chosen.reserve(static_cast<std::size_t>(k));
  for (int64_t t = 0; t < tokens; ++t) {
    chosen.clear();
    while (static_cast<int>(chosen.size()) < k) {
      // Multiply-shift maps 32 random bits onto [0, E) without a library distribution (whose output varies).
      const int x = static_cast<int>(((rng() >> 32) * static_cast<uint64_t>(E)) >> 32);
      if (std::find(chosen.begin(), chosen.end(), x) == chosen.end()) chosen.push_back(x);
    }
    for (int x : chosen) visit(t, x);
  }
}

}  // namespace

std::vector<int64_t> uniform_rows_to(const UniformRouting& routing, int ep, int dest, int layer,
                                     int64_t tokens_per_peer) {
  check_sizes(routing, ep, dest);
  if (tokens_per_peer < 0) throw InputError(fmt::format("uniform routing: {} tokens", tokens_per_peer));
  return uniform_exchange(routing, ep, dest, layer, std::vector<int64_t>(static_cast<std::size_t>(ep), tokens_per_peer))
      .recv_rows;
}

UniformExchange uniform_exchange(const UniformRouting& routing, int ep, int rank, int layer,
                                 const std::vector<int64_t>& tokens_of_peer) {
  check_sizes(routing, ep, rank);
  if (static_cast<int>(tokens_of_peer.size()) != ep) {
    throw InputError(fmt::format("uniform routing: {} token counts for a group of {}", tokens_of_peer.size(), ep));
  }
  const int per_rank = routing.experts / ep;
  UniformExchange out;
  out.send_rows.assign(static_cast<std::size_t>(ep), 0);
  out.recv_rows.assign(static_cast<std::size_t>(ep), 0);
  std::vector<int64_t> by_expert(static_cast<std::size_t>(per_rank));
  for (int peer = 0; peer < ep; ++peer) {
    const int64_t tokens = tokens_of_peer[static_cast<std::size_t>(peer)];
    if (tokens < 0) throw InputError(fmt::format("uniform routing: peer {} routes {} tokens", peer, tokens));
    std::fill(by_expert.begin(), by_expert.end(), 0);
    draw(routing, layer, peer, tokens, [&](int64_t, int x) {
      const int dest = x / per_rank;
      if (peer == rank) ++out.send_rows[static_cast<std::size_t>(dest)];
      if (dest == rank) ++by_expert[static_cast<std::size_t>(x % per_rank)];
    });
    for (int e = 0; e < per_rank; ++e) {
      out.recv_rows[static_cast<std::size_t>(peer)] += by_expert[static_cast<std::size_t>(e)];
      out.recv_local_expert.insert(out.recv_local_expert.end(), static_cast<std::size_t>(by_expert[e]), e);
    }
  }
  return out;
}

}  // namespace k3::parallel
