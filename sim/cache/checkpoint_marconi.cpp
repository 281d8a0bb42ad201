// Marconi-style placement (Marconi, MLSys'25): keep a state where a prefix is seen the second
// time — the deepest unit this prompt shares with an earlier request, its branch point — and at the
// last hash-block boundary of the prompt (for the conversation's next turn).
#include "sim/cache/checkpoint_policy.h"

namespace k3::cache {
namespace {

class MarconiCheckpoints : public CheckpointPolicy {
 public:
  void choose(const CheckpointRequest& r, std::vector<int64_t>& units) const override {
    int64_t branch = -1;
    for (int64_t j = 0; j < static_cast<int64_t>(r.seen_before.size()) && r.seen_before[j] > 0; ++j) branch = j;
    add_unit(r, branch, units);
    add_unit(r, last_full_unit(r), units);
  }
};

}  // namespace
K3PERF_REGISTER_CHECKPOINT_POLICY(MarconiCheckpoints, "marconi");
}  // namespace k3::cache
