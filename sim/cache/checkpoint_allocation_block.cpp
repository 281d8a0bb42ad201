// Checkpoints tied to the KV allocation block: a state is kept only where an allocation block ends
// (vLLM's "align" mode for hybrid models). A prompt shorter than one block never leaves a state,
// so its conversation can never resume from the cache (CLAIMS P13).
#include "sim/cache/checkpoint_policy.h"

namespace k3::cache {
namespace {

class AllocationBlockCheckpoints : public CheckpointPolicy {
 public:
  void choose(const CheckpointRequest& r, std::vector<int64_t>& units) const override {
    units_at_multiples(r, r.allocation_block_tokens, units);
  }
};

}  // namespace
K3PERF_REGISTER_CHECKPOINT_POLICY(AllocationBlockCheckpoints, "allocation_block");
}  // namespace k3::cache
