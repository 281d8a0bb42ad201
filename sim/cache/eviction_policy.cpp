#include "sim/cache/eviction_policy.h"

#include <map>

namespace k3::cache {
namespace {
std::map<std::string, EvictionPolicyFactory>& registry() {
  static std::map<std::string, EvictionPolicyFactory> r;
  return r;
}
}  // namespace

bool register_eviction_policy(const std::string& name, EvictionPolicyFactory factory) {
  return registry().emplace(name, std::move(factory)).second;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second();
}

std::vector<std::string> eviction_policy_names() {
  std::vector<std::string> out;
  for (const auto& [name, f] : registry()) out.push_back(name);
  return out;
}

}  // namespace k3::cache
