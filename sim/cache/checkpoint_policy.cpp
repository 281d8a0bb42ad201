#include "sim/cache/checkpoint_policy.h"

#include <algorithm>
#include <map>

namespace k3::cache {
namespace {
std::map<std::string, CheckpointPolicyFactory>& registry() {
  static std::map<std::string, CheckpointPolicyFactory> r;
  return r;
}
}  // namespace

bool register_checkpoint_policy(const std::string& name, CheckpointPolicyFactory factory) {
  return registry().emplace(name, std::move(factory)).second;
}

std::unique_ptr<CheckpointPolicy> make_checkpoint_policy(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second();
}

std::vector<std::string> checkpoint_policy_names() {
  std::vector<std::string> out;
  for (const auto& [name, f] : registry()) out.push_back(name);
  return out;
}

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
