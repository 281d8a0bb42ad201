// First come, first served, with decodes first and chunked prefill (vLLM's default order):
// waiting sequences join in arrival order while the batch and the memory hold them (the first that
// does not fit stops admission); each decoding sequence then adds one token, and prefill chunks in
// admission order fill the rest of the token budget.
#include "sim/serving/scheduler.h"

#include <algorithm>

namespace k3::serving {
namespace {

class FcfsScheduler : public Scheduler {
 public:
  void schedule(ReplicaQueue& q) const override {
    while (!q.waiting().empty() && static_cast<int64_t>(q.running().size()) < q.limits().max_sequences) {
      if (!q.admit(q.waiting().front())) break;
    }
    int64_t budget = q.limits().max_batched_tokens;
    for (int64_t id : q.running()) {
      if (budget == 0) break;
      if (q.sequence(id).decoding()) {
        q.add_decode(id);
        budget -= 1;
      }
    }
    for (int64_t id : q.running()) {
      if (budget == 0) break;
      const SequenceState& s = q.sequence(id);
      if (s.prefilling()) {
        const int64_t chunk = std::min(budget, s.prompt_new - s.prefilled);
        q.add_prefill(id, chunk);
        budget -= chunk;
      }
    }
  }
};

}  // namespace
K3PERF_REGISTER_SCHEDULER(FcfsScheduler, "fcfs");
}  // namespace k3::serving
