// The scheduler extension point: a scheduler registered from this file alone and chosen by name in
// a serving file runs the simulation, and the default (`fcfs`) keeps its order of decodes first.
#include "sim/serving/scheduler.h"
#include "expect_input_error.h"
#include "sim/serving/serving_config.h"
#include "sim/serving/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace k3::serving {
namespace {

// Test-only: admits like fcfs, then prefills before it decodes, in chunks of at most
// `chunk_tokens` (a required parameter).
class PrefillFirstScheduler : public Scheduler {
 public:
  explicit PrefillFirstScheduler(const Params& p) : chunk_tokens_(p.param<int64_t>("chunk_tokens").required()) {
    if (chunk_tokens_ <= 0) p.fail("chunk_tokens", "expected a positive integer");
  }
  void schedule(ReplicaQueue& q) const override {
    while (!q.waiting().empty() && static_cast<int64_t>(q.running().size()) < q.limits().max_sequences) {
      if (!q.admit(q.waiting().front())) break;
    }
    int64_t budget = q.limits().max_batched_tokens;
    for (int64_t id : q.running()) {
      const SequenceState& s = q.sequence(id);
      if (s.prefilling() && budget > 0) {
        const int64_t chunk = std::min({budget, chunk_tokens_, s.prompt_new - s.prefilled});
        q.add_prefill(id, chunk);
        budget -= chunk;
      }
    }
    for (int64_t id : q.running()) {
      if (budget > 0 && q.sequence(id).decoding()) {
        q.add_decode(id);
        budget -= 1;
      }
    }
  }

 private:
  int64_t chunk_tokens_;
};
K3PERF_REGISTER_SCHEDULER(PrefillFirstScheduler, "test_prefill_first");

const DataPaths& data() {
  static const DataPaths d = DataPaths::resolve(K3PERF_SOURCE_DIR "/scenarios");
  return d;
}

// Requests 2 s apart: each is served alone, so the iteration counts depend on the scheduler only.
ServingScenario scenario(const std::string& scheduler_line) {
  return parse_serving_scenario(
      "name: t\nmodel: kimi-k3\nhardware: h200-sxm\ngpus: 16\nparallelism: {tp: 8, attention_dp: 2, ep: 16}\n"
      "serving:\n  max_sequences: 64\n  max_batched_tokens: 4096\n"
      "  requests: {count: 8, rate_per_s: 0.5, input_tokens: 3000, output_tokens: 20}\n" +
          scheduler_line,
      "test.yaml", data());
}

TEST(ServingScheduler, ATestSchedulerRegisteredHereIsChosenByName) {
  const ServingScenario def = scenario("");
  EXPECT_EQ(def.options.scheduler, "fcfs");
  const ServingScenario s = scenario("  scheduler: {name: test_prefill_first, chunk_tokens: 1000}\n");
  EXPECT_EQ(s.options.scheduler, "test_prefill_first");
  const ReplicaModel replica(s.deployment, 4096);
  const Workload w = fixed_rate_workload(s.requests);
  const ServingResult fcfs = simulate(w.requests, w.cached_prefix_tokens, replica, def.options);
  const ServingResult mine = simulate(w.requests, w.cached_prefix_tokens, replica, s.options);
  EXPECT_EQ(mine.completed, 8);
  EXPECT_EQ(mine.prefill_tokens, fcfs.prefill_tokens);
  EXPECT_EQ(mine.decode_tokens, fcfs.decode_tokens);
  // Chunks of 1000 tokens: every 3000-token prompt takes three iterations where fcfs takes one.
  EXPECT_EQ(mine.iterations, fcfs.iterations + 8 * 2);
  EXPECT_GT(mine.requests[0].first_token_ms, fcfs.requests[0].first_token_ms);
}

TEST(ServingScheduler, UnknownNamesAndParametersNameTheKey) {
  test::expect_input_error(
      [] { scenario("  scheduler: nope\n"); },
      {"test.yaml:10", "serving.scheduler", "unknown scheduler 'nope'", "fcfs", "test_prefill_first"});
  test::expect_input_error([] { scenario("  scheduler: test_prefill_first\n"); },
                           {"test.yaml:10", "serving.scheduler", "scheduler 'test_prefill_first'",
                            "missing required parameter 'chunk_tokens'"});
  test::expect_input_error([] { scenario("  scheduler: {name: test_prefill_first, chunk_tokens: 10, x: 1}\n"); },
                           {"test.yaml:10", "serving.scheduler.x", "unknown parameter", "chunk_tokens"});
  test::expect_input_error(
      [] { scenario("  scheduler: {name: test_prefill_first, chunk_tokens: ten}\n"); },
      {"test.yaml:10", "serving.scheduler.chunk_tokens", "expected a number", "scheduler 'test_prefill_first'"});
}

}  // namespace
}  // namespace k3::serving
