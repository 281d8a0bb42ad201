// Least recently used. Because a prompt touches its deepest blocks first and its first block last,
// a prefix is always more recent than its extensions, so LRU evicts leaves first and never breaks
// a cached prefix in the middle.
#include "sim/cache/eviction_policy.h"

namespace k3::cache {
namespace {

class LruEviction : public EvictionPolicy {
 public:
  double priority(const EvictionItem& item) const override { return static_cast<double>(item.last_touch); }
};

}  // namespace
K3PERF_REGISTER_EVICTION_POLICY(LruEviction, "lru");
}  // namespace k3::cache
