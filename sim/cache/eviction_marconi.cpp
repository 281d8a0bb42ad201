// Marconi-style eviction (Marconi, MLSys'25): recency plus alpha x FLOPs saved per byte, so a
// large state checkpoint deep in a long prompt (which saves a long prefill) outlives a KV block or a
// shallow checkpoint of the same age. Recency is counted in requests and the efficiency relative to
// one token of KV, so alpha reads "one unit of relative efficiency is worth alpha requests of age".
// Unlike LRU it may evict a prefix before its extensions (they then stay cached but unreachable).
// Parameter: `alpha_requests` (default 100, >= 0).
#include "sim/cache/eviction_policy.h"

namespace k3::cache {
namespace {

class MarconiEviction : public EvictionPolicy {
 public:
  explicit MarconiEviction(const Params& p) : alpha_requests_(p.param<double>("alpha_requests").default_val(100)) {
    if (!(alpha_requests_ >= 0)) p.fail("alpha_requests", fmt::format("expected >= 0, got {}", alpha_requests_));
  }
  double priority(const EvictionItem& item) const override {
    return static_cast<double>(item.last_request) + alpha_requests_ * item.relative_flops_per_byte;
  }
  std::map<std::string, double> parameters() const override { return {{"alpha_requests", alpha_requests_}}; }

 private:
  double alpha_requests_ = 0;
};

}  // namespace
K3PERF_REGISTER_EVICTION_POLICY(MarconiEviction, "marconi");
}  // namespace k3::cache
