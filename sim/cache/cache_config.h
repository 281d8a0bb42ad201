// What the prefix-cache simulator needs to know (docs/cache.md): the bytes one token of MLA KV and
// one KDA state checkpoint take (from the model and the storage precisions), the prefill FLOPs a
// cached prefix saves, the granularities, the named policies, and the memory tiers.
#pragma once

#include "core/model_config.h"
#include "core/registry.h"
#include "core/scenario.h"
#include "sim/cache/checkpoint_policy.h"
#include "sim/cache/eviction_policy.h"

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace k3::cache {

struct CacheSizes {
  double kv_bytes_per_token = 0;        // MLA latent KV of all MLA layers, one token
  double state_bytes = 0;               // one checkpoint: KDA recurrent + conv state of all KDA layers
  bool needs_state = false;             // a hit needs a state checkpoint at its boundary (model has KDA layers)
  double flops_per_token = 0;           // prefill FLOPs linear in the prefix: 2 x active parameters
  double attention_flops_per_pair = 0;  // MLA prefill FLOPs per (query, key) pair, all MLA layers
  // Prefill FLOPs of a `tokens`-token prefix from scratch: linear term + causal attention pairs.
  double prefix_flops(double tokens) const;
};

CacheSizes cache_sizes(const ModelConfig& m, const Precision& p);
// The same sizes with the state ignored: what a pure-attention cache of the same KV bytes would hit.
CacheSizes kv_only(CacheSizes s);

struct Tier {
  std::string name;             // "hbm", "dram", "ssd"
  double capacity_bytes = 0;    // per node (or for the pool); infinity = unbounded
  double read_bytes_per_s = 0;  // bandwidth when a hit loads from this tier into HBM (unused for the first)
};

enum class Routing { round_robin, session };  // which node's cache a request uses, when caches are per node

struct CacheConfig {
  int64_t hash_block_tokens = 512;        // prefix matching granularity (a multiple of the trace's blocks)
  int64_t allocation_block_tokens = 512;  // KV allocation block (a multiple of hash_block_tokens)
  std::string checkpoint = "sparse";      // a registered checkpoint placement policy
  Params checkpoint_params;               // read by that policy (e.g. interval_tokens)
  std::string eviction = "lru";           // a registered eviction policy
  Params eviction_params;                 // read by that policy (e.g. alpha_requests)
  std::vector<Tier> tiers{{"hbm", std::numeric_limits<double>::infinity(), 0}};  // fastest first
  int nodes = 1;  // caches: one per node, or one pool of nodes x capacity
  bool pooled = false;
  Routing routing = Routing::session;
};

// Throws InputError naming the field: granularities not multiples, unknown policies, policy
// parameters that are missing, unknown or do not fit the granularity, no tier, ...
void validate(const CacheConfig& c);
// The configured policies, their parameters read and checked (validate() builds them too).
std::unique_ptr<CheckpointPolicy> make_checkpoint_policy(const CacheConfig& c);
std::unique_ptr<EvictionPolicy> make_eviction_policy(const CacheConfig& c);
// The parameters of checkpoint policy `name`: of `offered`, the ones it takes (the keys of its
// parameters()). One set of values then serves every policy a comparison enumerates.
Params checkpoint_params_for(const std::string& name, const std::map<std::string, double>& offered);

}  // namespace k3::cache
