// Traces into the serving simulation: the hybrid prefix cache's hits become each request's cached
// prefix (hand-built traces with known hits and timelines), the serving file's trace and cache keys,
// and the decode-step memo of StepTimeModel giving results identical to the bit to evaluating every
// unit on every step (on the Mooncake conversation trace through cache and serving).
#include "sim/serving/trace_workload.h"
#include "expect_input_error.h"
#include "sim/serving/serving_config.h"
#include "sim/serving/simulator.h"
#include "sim/workload/mooncake_reader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

namespace k3::serving {
namespace {

const DataPaths& data() {
  static const DataPaths d = DataPaths::resolve(K3PERF_SOURCE_DIR "/scenarios");
  return d;
}

// A deployment of 16 H200s with a trace; `extra` adds lines under `serving:`.
ServingScenario scenario(const std::string& extra, const std::string& trace = "t.jsonl") {
  const std::string text =
      "name: t\nmodel: kimi-k3\nhardware: h200-sxm\ngpus: 16\n"
      "parallelism: {tp: 8, attention_dp: 2, ep: 16}\n"
      "serving:\n  max_sequences: 64\n  max_batched_tokens: 4096\n"
      "  requests: {trace: " +
      trace + "}\n" + extra;
  return parse_serving_scenario(text, "test.yaml", data());
}

const ReplicaModel& replica() {
  static const ReplicaModel m(scenario("").deployment, 4096);
  return m;
}

double prefill_us(double n, double p) {
  BatchShape b;
  b.add_prefill(n, p);
  return replica().step.step_us(b);
}

// A: 1024 prompt tokens (blocks 1, 2); B, after A finished: A's prompt + 512 tokens (blocks 1, 2, 3);
// C: an unrelated 512-token prompt.
std::vector<workload::Request> three_requests() {
  return workload::parse_mooncake_trace(
      "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [1, 2]}\n"
      "{\"timestamp\": 60000, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}\n"
      "{\"timestamp\": 120000, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [9]}\n",
      "hand.jsonl");
}

TEST(ServingTrace, TheCacheSectionNamesPoliciesAndTheirParameters) {
  auto read = [](const std::string& cache) { return read_serving_cache(scenario("  cache: " + cache + "\n")); };
  const ServingCacheOptions o = read("{checkpoint: {name: interval, interval_tokens: 2048}, eviction: marconi}");
  EXPECT_EQ(o.config.checkpoint, "interval");
  EXPECT_EQ(cache::make_checkpoint_policy(o.config)->parameters().at("interval_tokens"), 2048);
  EXPECT_EQ(cache::make_eviction_policy(o.config)->parameters().at("alpha_requests"), 100);  // the default
  // The shipped form: a name, and the interval as its own key.
  const ServingCacheOptions s = read("{checkpoint: sparse, checkpoint_interval_tokens: 1024}");
  EXPECT_EQ(cache::make_checkpoint_policy(s.config)->parameters().at("interval_tokens"), 1024);
  test::expect_input_error([&] { read("{checkpoint: {name: sparse, interval_tokens: 1000}}"); },
                           {"test.yaml:10", "serving.cache", "interval_tokens", "checkpoint policy 'sparse'",
                            "multiple of hash_block_tokens (512)"});
  test::expect_input_error([&] { read("{checkpoint: {name: prompt_end, depth: 2}}"); },
                           {"test.yaml:10", "serving.cache.checkpoint.depth", "unknown parameter"});
  test::expect_input_error(
      [&] { read("{eviction: {name: marconi, alpha_requests: -1}}"); },
      {"test.yaml:10", "serving.cache.eviction.alpha_requests", "eviction policy 'marconi'", "expected >= 0"});
}

TEST(ServingTrace, AHitAtTheLastPromptEndSkipsThatPrefix) {
  // prompt_end keeps a state where A's prompt ends, so B reuses all 1024 tokens (KV and state).
  const TraceWorkload t =
      trace_workload(scenario("  cache: {checkpoint: prompt_end, allocation_block_tokens: 512}\n"), three_requests());
  ASSERT_TRUE(t.cached);
  EXPECT_EQ(t.workload.cached_prefix_tokens, (std::vector<int64_t>{0, 1024, 0}));
  EXPECT_EQ(t.cache_summary.hit_tokens, 1024);
  const ServingOptions o = scenario("").options;
  const ServingResult r = simulate(t.workload.requests, t.workload.cached_prefix_tokens, replica(), o);
  EXPECT_NEAR(r.requests[0].ttft_ms(), prefill_us(1024, 0) / 1000, 1e-9);
  EXPECT_NEAR(r.requests[1].ttft_ms(), prefill_us(512, 1024) / 1000, 1e-9);  // only the new block
  EXPECT_NEAR(r.requests[2].ttft_ms(), prefill_us(512, 0) / 1000, 1e-9);
  EXPECT_EQ(r.prefill_tokens, 1024 + 512 + 512);
}

TEST(ServingTrace, KvWithoutAStateAtItsEndIsNoHit) {
  // States only at 2048-token allocation-block ends: A (1024 tokens) leaves none, so B's KV match
  // of 1024 tokens has no state at its boundary and B prefills all of its prompt.
  const TraceWorkload t = trace_workload(
      scenario("  cache: {checkpoint: allocation_block, allocation_block_tokens: 2048}\n"), three_requests());
  EXPECT_EQ(t.workload.cached_prefix_tokens, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(t.cache_summary.kv_matched_tokens, 1024);
  EXPECT_EQ(t.cache_summary.recomputed_tokens, 1024);
  const ServingResult r =
      simulate(t.workload.requests, t.workload.cached_prefix_tokens, replica(), scenario("").options);
  EXPECT_NEAR(r.requests[1].ttft_ms(), prefill_us(1536, 0) / 1000, 1e-9);
}

TEST(ServingTrace, CacheCanBeTurnedOffAndTracesWithoutHashesRunUncached) {
  const TraceWorkload off = trace_workload(scenario("  cache: {enabled: false}\n"), three_requests());
  EXPECT_FALSE(off.cached);
  EXPECT_TRUE(off.workload.cached_prefix_tokens.empty());
  std::vector<workload::Request> bare = three_requests();
  for (workload::Request& q : bare) {
    q.block_hashes.clear();
    q.block_tokens = 0;
  }
  EXPECT_FALSE(trace_workload(scenario(""), bare).cached);
}

TEST(ServingTrace, ReadsTheServingFileKeys) {
  const ServingScenario s =
      load_serving_scenario(K3PERF_SOURCE_DIR "/scenarios/serving/k3-h200x16-mooncake.yaml", data(),
                            {"serving.requests.limit=100", "serving.requests.time_scale=0.5"});
  const std::vector<workload::Request> r = read_trace_requests(s.requests);  // path relative to the file
  ASSERT_EQ(r.size(), 100u);
  const std::vector<workload::Request> all =
      workload::read_mooncake_trace(K3PERF_SOURCE_DIR "/data/traces/conversation_trace.jsonl");
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].id, int64_t(i));
    EXPECT_EQ(r[i].arrival_ms, all[i].arrival_ms * 0.5);
    EXPECT_EQ(r[i].input_tokens, all[i].input_tokens);
  }
  const ServingCacheOptions c = read_serving_cache(s);
  EXPECT_EQ(c.config.nodes, 16);
  EXPECT_TRUE(c.config.pooled);
  EXPECT_EQ(c.config.tiers[0].capacity_bytes, 200.0 * 1024 * 1024 * 1024);
  EXPECT_NEAR(mean_rate_per_s(r), 99.0 / ((r.back().arrival_ms - r.front().arrival_ms) / 1000), 1e-12);

  test::expect_input_error([] { read_serving_cache(scenario("  cache: {hbm_tokens: 5}\n")); }, {"hbm_tokens"});
  test::expect_input_error([] { read_serving_cache(scenario("  cache: {checkpoint: nowhere}\n")); }, {"nowhere"});
  test::expect_input_error([] { read_trace_requests(scenario("", "t.txt").requests); }, {"t.txt", ".jsonl"});
  const ServingScenario stream = parse_serving_scenario(
      "name: t\nmodel: kimi-k3\nhardware: h200-sxm\ngpus: 16\nparallelism: {tp: 8, attention_dp: 2, ep: 16}\n"
      "serving:\n  requests: {count: 2, rate_per_s: 1, input_tokens: 10, output_tokens: 2}\n"
      "  cache: {checkpoint: sparse}\n",
      "stream.yaml", data());
  test::expect_input_error([&] { serving_workload(stream); }, {"stream.yaml", "trace"});
}

TEST(ServingStepMemo, DecodeStepsEqualEveryUnitEvaluated) {
  const StepTimeModel& memo = replica().step;
  StepTimeModel plain = replica().step;
  plain.set_decode_memo(false);
  EXPECT_GT(memo.context_free_unit_count(), 0u);
  EXPECT_LT(memo.context_free_unit_count(), memo.unit_count());  // attention reads the context
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    BatchShape b;
    const int n = 1 + int(rng() % 256);
    for (int k = 0; k < n; ++k) b.add_decode(double(rng() % 200000));
    // The memo was filled at other contexts: the value must not depend on which came first.
    EXPECT_EQ(memo.step_us(b), plain.step_us(b)) << n << " sequences";
  }
}

TEST(ServingStepMemo, MooncakeThroughCacheAndServingIsIdenticalWithAndWithoutIt) {
  const ServingScenario s = load_serving_scenario(K3PERF_SOURCE_DIR "/scenarios/serving/k3-h200x16-mooncake.yaml",
                                                  data(), {"serving.requests.limit=3000"});
  const TraceWorkload t = trace_workload(s);
  ReplicaModel with(s.deployment, s.options.limits.max_batched_tokens);
  ReplicaModel without(s.deployment, s.options.limits.max_batched_tokens);
  without.step.set_decode_memo(false);
  const ServingResult a = simulate(t.workload.requests, t.workload.cached_prefix_tokens, with, s.options);
  const ServingResult b = simulate(t.workload.requests, t.workload.cached_prefix_tokens, without, s.options);
  ASSERT_EQ(a.requests.size(), 3000u);
  EXPECT_GT(t.cache_summary.hit_tokens, 0);
  EXPECT_EQ(a.iterations, b.iterations);
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].first_token_ms, b.requests[i].first_token_ms) << i;
    EXPECT_EQ(a.requests[i].finish_ms, b.requests[i].finish_ms) << i;
  }
  for (auto [x, y] : {std::pair{a.ttft_ms, b.ttft_ms}, {a.tpot_ms, b.tpot_ms}, {a.e2e_ms, b.e2e_ms}}) {
    EXPECT_EQ(x.p50, y.p50);
    EXPECT_EQ(x.p90, y.p90);
    EXPECT_EQ(x.p99, y.p99);
    EXPECT_EQ(x.mean, y.mean);
  }
  // And the same input twice gives the same output.
  const TraceWorkload t2 = trace_workload(s);
  EXPECT_EQ(t2.workload.cached_prefix_tokens, t.workload.cached_prefix_tokens);
  const ServingResult c = simulate(t2.workload.requests, t2.workload.cached_prefix_tokens, with, s.options);
  EXPECT_EQ(c.ttft_ms.p99, a.ttft_ms.p99);
  EXPECT_EQ(c.e2e_ms.p50, a.e2e_ms.p50);
}

}  // namespace
}  // namespace k3::serving
