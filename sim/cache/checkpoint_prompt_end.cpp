// One checkpoint per request, at the last hash-block boundary of its prompt: where the next turn of
// the same conversation (which resends this prompt) can resume.
#include "sim/cache/checkpoint_policy.h"

namespace k3::cache {
namespace {

class PromptEndCheckpoint : public CheckpointPolicy {
 public:
  void choose(const CheckpointRequest& r, std::vector<int64_t>& units) const override {
    add_unit(r, last_full_unit(r), units);
  }
};

}  // namespace
K3PERF_REGISTER_CHECKPOINT_POLICY(PromptEndCheckpoint, "prompt_end");
}  // namespace k3::cache
