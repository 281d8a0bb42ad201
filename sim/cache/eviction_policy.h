// Which cached item leaves a full tier first (docs/cache.md#eviction). Items are a hash block's MLA
// KV or a KDA state checkpoint; the lowest priority is evicted (to the next tier, or dropped from the
// last). A policy is one .cpp file in sim/cache/ ending in K3PERF_REGISTER_EVICTION_POLICY(Class,
// "name"); adding one never edits this header. A policy with parameters reads them in its
// constructor from a Params (core/registry.h).
#pragma once

#include "core/registry.h"

#include <cstdint>
#include <map>
#include <string>

namespace k3::cache {

enum class ItemKind { kv, state };

struct EvictionItem {
  ItemKind kind = ItemKind::kv;
  uint64_t last_touch = 0;   // global access counter; along one prompt, a prefix is touched after its extensions
  int64_t last_request = 0;  // index of the request that last used it
  double bytes = 0;
  // FLOPs-saved-per-byte relative to one token of KV at the prompt's start: ~1 for a KV block,
  // position / (state bytes in tokens of KV) for a state checkpoint.
  double relative_flops_per_byte = 0;
};

class EvictionPolicy {
 public:
  static constexpr const char* kind = "eviction policy";
  virtual ~EvictionPolicy() = default;
  // Lower is evicted first; ties go to the smaller last_touch. Deterministic; computed when the
  // item is touched (a policy whose priority depends on the present would need re-scoring).
  virtual double priority(const EvictionItem& item) const = 0;
  // The parameters with their defaults resolved (for the JSON report).
  virtual std::map<std::string, double> parameters() const { return {}; }
};

using EvictionPolicies = Registry<EvictionPolicy>;

#define K3PERF_REGISTER_EVICTION_POLICY(Class, name) K3PERF_REGISTER(::k3::cache::EvictionPolicy, Class, name)

}  // namespace k3::cache
