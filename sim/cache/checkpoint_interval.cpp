// Checkpoints every `interval_tokens` tokens of the prompt (a parameter, default 4096: a retention
// interval independent of the allocation block); nothing at the prompt's end unless it falls on the grid.
#include "sim/cache/checkpoint_policy.h"

namespace k3::cache {
namespace {

class IntervalCheckpoints : public IntervalCheckpointPolicy {
 public:
  using IntervalCheckpointPolicy::IntervalCheckpointPolicy;
  void choose(const CheckpointRequest& r, std::vector<int64_t>& units) const override {
    units_at_multiples(r, interval_tokens_, units);
  }
};

}  // namespace
K3PERF_REGISTER_CHECKPOINT_POLICY(IntervalCheckpoints, "interval");
}  // namespace k3::cache
