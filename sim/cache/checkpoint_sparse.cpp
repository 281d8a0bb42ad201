// Sparse checkpoints (CLAIMS P14's fix): every `interval_tokens` tokens (a parameter, default 4096) and
// at the last hash-block boundary of the prompt, whatever the allocation block; short conversations resume.
#include "sim/cache/checkpoint_policy.h"

namespace k3::cache {
namespace {

class SparseCheckpoints : public IntervalCheckpointPolicy {
 public:
  using IntervalCheckpointPolicy::IntervalCheckpointPolicy;
  void choose(const CheckpointRequest& r, std::vector<int64_t>& units) const override {
    units_at_multiples(r, interval_tokens_, units);
    add_unit(r, last_full_unit(r), units);
  }
};

}  // namespace
K3PERF_REGISTER_CHECKPOINT_POLICY(SparseCheckpoints, "sparse");
}  // namespace k3::cache
