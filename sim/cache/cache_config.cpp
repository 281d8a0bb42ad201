#include "sim/cache/cache_config.h"

#include "core/error.h"
#include "core/parameters.h"
#include "sim/memory.h"

#include <fmt/format.h>

namespace k3::cache {

double CacheSizes::prefix_flops(double tokens) const {
  return flops_per_token * tokens + attention_flops_per_pair * tokens * (tokens + 1) / 2;
}

CacheSizes cache_sizes(const ModelConfig& m, const Precision& p) {
  CacheSizes s;
  s.kv_bytes_per_token = kv_bytes_per_token(m, p);
  if (m.kda && m.count_layers(AttentionKind::kda) > 0) {
    s.state_bytes = kda_recurrent_state_bytes(m, p) + kda_conv_state_bytes(m, p);
    s.needs_state = true;
  }
  s.flops_per_token = 2.0 * double(count_parameters(m).active_per_token);
  // MHA-form prefill attention (docs/opgraph.md): 2 * heads * (qk + v head dims) FLOPs per pair.
  s.attention_flops_per_pair =
      2.0 * m.mla.num_heads * (m.mla.qk_head_dim() + m.mla.v_head_dim) * double(m.count_layers(AttentionKind::mla));
  return s;
}

CacheSizes kv_only(CacheSizes s) {
  s.state_bytes = 0;
  s.needs_state = false;
  return s;
}

void validate(const CacheConfig& c) {
  auto fail = [](const std::string& what) { throw InputError("cache: " + what); };
  if (c.hash_block_tokens <= 0)
    fail(fmt::format("hash_block_tokens: expected a positive integer, got {}", c.hash_block_tokens));
  if (c.allocation_block_tokens <= 0 || c.allocation_block_tokens % c.hash_block_tokens != 0) {
    fail(fmt::format("allocation_block_tokens: expected a positive multiple of hash_block_tokens ({}), got {}",
                     c.hash_block_tokens, c.allocation_block_tokens));
  }
  make_checkpoint_policy(c);
  make_eviction_policy(c);
  if (c.tiers.empty()) fail("tiers: expected at least one tier (the GPU's HBM)");
  for (std::size_t i = 0; i < c.tiers.size(); ++i) {
    const Tier& t = c.tiers[i];
    if (!(t.capacity_bytes >= 0))
      fail(fmt::format("tier '{}': capacity_bytes: expected >= 0, got {}", t.name, t.capacity_bytes));
    if (i > 0 && !(t.read_bytes_per_s > 0)) {
      fail(fmt::format("tier '{}': read_bytes_per_s: expected a positive bandwidth, got {}", t.name,
                       t.read_bytes_per_s));
    }
  }
  if (c.nodes < 1) fail(fmt::format("nodes: expected a positive integer, got {}", c.nodes));
}

std::unique_ptr<CheckpointPolicy> make_checkpoint_policy(const CacheConfig& c) {
  auto policy = CheckpointPolicies::instance().make(c.checkpoint, c.checkpoint_params, "cache: checkpoint");
  policy->check({c.hash_block_tokens, c.allocation_block_tokens});
  return policy;
}

Params checkpoint_params_for(const std::string& name, const std::map<std::string, double>& offered) {
  Params out;
  for (const auto& [key, value] : CheckpointPolicies::instance().make(name)->parameters()) {
    auto it = offered.find(key);
    if (it != offered.end()) out.set(key, it->second);
  }
  return out;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(const CacheConfig& c) {
  return EvictionPolicies::instance().make(c.eviction, c.eviction_params, "cache: eviction");
}

}  // namespace k3::cache
