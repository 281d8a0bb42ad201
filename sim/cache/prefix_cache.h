// The hybrid prefix cache (docs/cache.md): requests in arrival order look up their prompt's longest
// cached prefix and then leave their prompt in the cache. It tracks, per prefix (a chain of hash
// blocks), the MLA KV of each block and the KDA state checkpoints at block ends as separate items,
// because a hit at a boundary needs the KV of every block before it and a state exactly at it.
// Requests are served one after another (no overlap in time: the serving simulator adds that);
// only prompt blocks are cached, as the traces hash prompts only.
#pragma once

#include "sim/cache/cache_config.h"
#include "sim/cache/checkpoint_policy.h"
#include "sim/cache/eviction_policy.h"
#include "sim/workload/request.h"

#include <cstdint>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

namespace k3::cache {

struct RequestOutcome {
  int64_t id = 0;
  int node = 0;  // which node's cache served it (0 when pooled)
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t hit_tokens = 0;         // prefix reused: KV of every block before it and a state at it
  int64_t kv_matched_tokens = 0;  // prefix whose KV was cached, state or not (>= hit_tokens)
  double loaded_bytes = 0;        // of the hit, read from tiers below the first
  double load_ms = 0;             // at those tiers' read bandwidths
  int64_t checkpoints_written = 0;
  // KV was cached but no state at its end: these tokens are prefilled again.
  int64_t recomputed_tokens() const { return kv_matched_tokens - hit_tokens; }
};

class PrefixCache {
 public:
  // `capacity_scale` multiplies every tier's capacity (a pool of several nodes).
  PrefixCache(const CacheConfig& config, const CacheSizes& sizes, double capacity_scale = 1);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Looks the prompt up, then inserts its blocks and the checkpoints the policy places. A request
  // whose blocks cannot form hash blocks (block_tokens does not divide hash_block_tokens) is an
  // InputError naming the request.
  RequestOutcome serve(const workload::Request& r);

  double used_bytes(int tier) const;
  int64_t cached_kv_blocks() const;    // over all tiers
  int64_t cached_checkpoints() const;  // over all tiers

 private:
  struct Node;
  struct Item;
  struct HeapEntry;
  struct Tier;
  uint32_t node_for(uint64_t key, int64_t start_tokens, int64_t end_tokens);
  void place(uint32_t item, int tier);
  void make_room(int tier, double bytes);
  void touch(uint32_t item);
  void push(uint32_t item);

  CacheConfig config_;
  CacheSizes sizes_;
  std::unique_ptr<CheckpointPolicy> checkpoints_;
  std::unique_ptr<EvictionPolicy> eviction_;
  std::vector<Node> nodes_;
  std::vector<Item> items_;  // 2 per node: KV (even), state checkpoint (odd)
  std::vector<Tier> tiers_;
  std::unordered_map<uint64_t, uint32_t> index_;  // (chained hash, end) -> node
  uint64_t clock_ = 0;
  int64_t request_index_ = 0;
  // Scratch, reused across requests.
  std::vector<int64_t> ends_;
  std::vector<int32_t> seen_;
  std::vector<uint32_t> path_;
  std::vector<int64_t> chosen_;
};

// Serves every request in order: one cache per node (requests routed by config.routing) or one
// pool of nodes x capacity. Deterministic. Outcomes are in request order.
std::vector<RequestOutcome> simulate(const std::vector<workload::Request>& requests, const CacheConfig& config,
                                     const CacheSizes& sizes);

}  // namespace k3::cache
