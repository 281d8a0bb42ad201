// Where a request leaves KDA state checkpoints (docs/cache.md#checkpoint-placement). A hit at a
// boundary needs both the MLA KV pages up to it and a state checkpoint exactly at it, so where
// states are kept decides which KV hits can be used. A policy is one .cpp file in sim/cache/ ending
// in K3PERF_REGISTER_CHECKPOINT_POLICY(Class, "name"); adding one never edits this header. A policy
// with parameters reads them in its constructor from a Params (`cache.checkpoint: {name: ..., key:
// value}` in a serving file, core/registry.h).
#pragma once

#include "core/registry.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace k3::cache {

// One request's prompt, in units of the hash block. Unit j covers tokens [unit_end_tokens[j-1],
// unit_end_tokens[j]); the last unit may be partial (its end is the prompt's end).
struct CheckpointRequest {
  const std::vector<int64_t>& unit_end_tokens;
  const std::vector<int32_t>& seen_before;  // earlier requests whose prompt shared units [0, j]
  int64_t prompt_tokens = 0;
  int64_t hash_block_tokens = 0;
  int64_t allocation_block_tokens = 0;
  int64_t first_computed_unit = 0;  // the prefill starts here: states exist only at ends of units >= it
};

// The cache's granularities, which a policy's parameters must fit.
struct CacheGranularity {
  int64_t hash_block_tokens = 0;
  int64_t allocation_block_tokens = 0;
};

class CheckpointPolicy {
 public:
  static constexpr const char* kind = "checkpoint policy";
  virtual ~CheckpointPolicy() = default;
  // Appends the units (>= first_computed_unit, ascending, no repeats) after which to keep a
  // state checkpoint. Deterministic.
  virtual void choose(const CheckpointRequest& r, std::vector<int64_t>& units) const = 0;
  // Throws InputError (naming the parameter) when a parameter does not fit the granularity.
  virtual void check(const CacheGranularity&) const {}
  // The parameters with their defaults resolved (for the JSON report), and as the text report
  // shows them ("interval 4096 tokens"; empty when none).
  virtual std::map<std::string, double> parameters() const { return {}; }
  virtual std::string describe() const { return {}; }
};

using CheckpointPolicies = Registry<CheckpointPolicy>;

// Shared by policies: the last unit of the prompt that ends on a hash-block boundary (where a
// continuation of this prompt can hit), or -1 when the prompt is shorter than one block.
int64_t last_full_unit(const CheckpointRequest& r);
// Units >= first_computed_unit whose end is a multiple of `every_tokens`.
void units_at_multiples(const CheckpointRequest& r, int64_t every_tokens, std::vector<int64_t>& units);
// Adds `unit` keeping `units` ascending and unique (ignored when below first_computed_unit or < 0).
void add_unit(const CheckpointRequest& r, int64_t unit, std::vector<int64_t>& units);

// The base of the interval-based policies: the parameter `interval_tokens` (default 4096, a
// positive multiple of the hash block).
class IntervalCheckpointPolicy : public CheckpointPolicy {
 public:
  explicit IntervalCheckpointPolicy(const Params& p);
  void check(const CacheGranularity& g) const override;
  std::map<std::string, double> parameters() const override;
  std::string describe() const override;

 protected:
  int64_t interval_tokens_ = 0;

 private:
  Params params_;  // for the errors check() finds
};

#define K3PERF_REGISTER_CHECKPOINT_POLICY(Class, name) K3PERF_REGISTER(::k3::cache::CheckpointPolicy, Class, name)

}  // namespace k3::cache
