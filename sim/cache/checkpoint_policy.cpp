#include "sim/cache/checkpoint_policy.h"

#include <fmt/format.h>
#include <algorithm>

namespace k3::cache {

IntervalCheckpointPolicy::IntervalCheckpointPolicy(const Params& p)
    : interval_tokens_(p.param<int64_t>("interval_tokens").default_val(4096)), params_(p) {
  if (interval_tokens_ <= 0) {
    p.fail("interval_tokens", fmt::format("expected a positive integer, got {}", interval_tokens_));
  }
}

void IntervalCheckpointPolicy::check(const CacheGranularity& g) const {
  if (interval_tokens_ % g.hash_block_tokens != 0) {
    params_.fail("interval_tokens", fmt::format("expected a multiple of hash_block_tokens ({}), got {}",
                                                g.hash_block_tokens, interval_tokens_));
  }
}

std::map<std::string, double> IntervalCheckpointPolicy::parameters() const {
  return {{"interval_tokens", double(interval_tokens_)}};
}

std::string IntervalCheckpointPolicy::describe() const { return fmt::format("interval {} tokens", interval_tokens_); }

int64_t last_full_unit(const CheckpointRequest& r) {
  for (int64_t j = static_cast<int64_t>(r.unit_end_tokens.size()) - 1; j >= 0; --j) {
    if (r.unit_end_tokens[j] % r.hash_block_tokens == 0) return j;
  }
  return -1;
}

void units_at_multiples(const CheckpointRequest& r, int64_t every_tokens, std::vector<int64_t>& units) {
  for (int64_t j = r.first_computed_unit; j < static_cast<int64_t>(r.unit_end_tokens.size()); ++j) {
    if (r.unit_end_tokens[j] % every_tokens == 0) add_unit(r, j, units);
  }
}

void add_unit(const CheckpointRequest& r, int64_t unit, std::vector<int64_t>& units) {
  if (unit < 0 || unit < r.first_computed_unit) return;
  auto it = std::lower_bound(units.begin(), units.end(), unit);
  if (it == units.end() || *it != unit) units.insert(it, unit);
}

}  // namespace k3::cache
