// Which cached item leaves a full tier first (docs/cache.md#eviction). Items are a hash block's MLA
// KV or a KDA state checkpoint; the lowest priority is evicted (to the next tier, or dropped from the
// last). A policy is one .cpp file in sim/cache/ ending in K3PERF_REGISTER_EVICTION_POLICY(Class,
// "name"); adding one never edits this header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

struct EvictionParams {
  double marconi_alpha_requests = 0;
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  // Lower is evicted first; ties go to the smaller last_touch. Deterministic; computed when the
  // item is touched (a policy whose priority depends on the present would need re-scoring).
  virtual double priority(const EvictionItem& item, const EvictionParams& p) const = 0;
};

using EvictionPolicyFactory = std::function<std::unique_ptr<EvictionPolicy>()>;
bool register_eviction_policy(const std::string& name, EvictionPolicyFactory factory);
std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name);  // nullptr if unknown
std::vector<std::string> eviction_policy_names();

#define K3PERF_REGISTER_EVICTION_POLICY(Class, name) \
  static const bool k3perf_registered_##Class =      \
      ::k3::cache::register_eviction_policy(name, [] { return std::make_unique<Class>(); })

}  // namespace k3::cache
