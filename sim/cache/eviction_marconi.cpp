// Marconi-style eviction (Marconi, MLSys'25): recency plus alpha x FLOPs saved per byte, so a
// large state checkpoint deep in a long prompt (which saves a long prefill) outlives a KV block or a
// shallow checkpoint of the same age. Recency is counted in requests and the efficiency relative to
// one token of KV, so alpha reads "one unit of relative efficiency is worth alpha requests of age".
// Unlike LRU it may evict a prefix before its extensions (they then stay cached but unreachable).
#include "sim/cache/eviction_policy.h"

namespace k3::cache {
namespace {

class MarconiEviction : public EvictionPolicy {
 public:
  double priority(const EvictionItem& item, const EvictionParams& p) const override {
    return static_cast<double>(item.last_request) + p.marconi_alpha_requests * item.relative_flops_per_byte;
  }
};

}  // namespace
K3PERF_REGISTER_EVICTION_POLICY(MarconiEviction, "marconi");
}  // namespace k3::cache
