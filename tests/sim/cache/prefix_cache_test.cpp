// The hybrid prefix cache on hand-built traces whose answers are worked out by hand in the
// comments: every checkpoint policy (including the allocation-block case that never resumes),
// both eviction policies, policies registered from this file, tiers, hash granularity, nodes; then the shipped traces
// against independent counts (an unbounded KV cache hits exactly the trace's own prefix reuse).
#include "sim/cache/prefix_cache.h"
#include "expect_input_error.h"
#include "sim/cache/cache_metrics.h"
#include "sim/claims/claim.h"
#include "sim/workload/mooncake_reader.h"
#include "sim/workload/trace_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace k3::cache {
namespace {

using workload::Request;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Blocks of 4 tokens named by letters; equal prefixes of names get equal chained hashes.
class TraceBuilder {
 public:
  Request add(const std::string& blocks, int64_t tokens = -1, int64_t session = -1) {
    Request r;
    r.id = static_cast<int64_t>(requests_.size());
    r.input_tokens = tokens >= 0 ? tokens : 4 * static_cast<int64_t>(blocks.size());
    r.output_tokens = 1;
    r.block_tokens = 4;
    r.session_id = session;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      auto [it, inserted] = ids_.try_emplace(blocks.substr(0, i + 1), ids_.size());
      r.block_hashes.push_back(it->second);
    }
    requests_.push_back(r);
    return r;
  }
  const std::vector<Request>& requests() const { return requests_; }

 private:
  std::map<std::string, uint64_t> ids_;
  std::vector<Request> requests_;
};

// 1 byte of KV per token, 10-byte state checkpoints, FLOPs = tokens (no attention term).
CacheSizes hybrid_sizes() {
  CacheSizes s;
  s.kv_bytes_per_token = 1;
  s.state_bytes = 10;
  s.needs_state = true;
  s.flops_per_token = 1;
  return s;
}

CacheConfig config(const std::string& checkpoint, int64_t allocation = 4, int64_t interval = 4) {
  CacheConfig c;
  c.hash_block_tokens = 4;
  c.allocation_block_tokens = allocation;
  c.checkpoint = checkpoint;
  if (checkpoint == "interval" || checkpoint == "sparse") c.checkpoint_params.set("interval_tokens", interval);
  c.tiers = {{"hbm", kInf, 0}};
  return c;
}

TEST(PrefixCache, KvOnlyHitsTheLongestSharedPrefix) {
  TraceBuilder t;
  t.add("abc");
  t.add("abd");      // shares "ab": 8 tokens
  t.add("abdx");     // shares "abd": 12
  t.add("z");        // nothing
  t.add("abc", 10);  // "ab" then a partial block whose content differs from the full "abc" (not seen)
  const auto out = simulate(t.requests(), config("sparse"), kv_only(hybrid_sizes()));
  EXPECT_EQ(out[0].hit_tokens, 0);
  EXPECT_EQ(out[1].hit_tokens, 8);
  EXPECT_EQ(out[2].hit_tokens, 12);
  EXPECT_EQ(out[3].hit_tokens, 0);
  // Builder gives "abc" the same hash whatever the length, but a unit's key includes its end:
  // a 10-token prompt's third unit ends at 10, not 12, so only "ab" matches.
  EXPECT_EQ(out[4].hit_tokens, 8);
  for (const RequestOutcome& o : out) EXPECT_EQ(o.recomputed_tokens(), 0);
}

TEST(PrefixCache, CheckpointsTiedToTheAllocationBlockNeverResumeShortConversations) {
  // Allocation block 16 tokens: states only at 16, 32, ... A 12-token conversation leaves none.
  TraceBuilder t;
  t.add("abc", 12, 0);
  t.add("abcd", 16, 0);   // KV of 12 cached; no state at 12 -> hit 0, 12 recomputed; leaves a state at 16
  t.add("abcde", 20, 0);  // KV 16 cached and a state at 16 -> hit 16
  t.add("pqr", 12, 1);
  t.add("pqrs", 15, 1);   // prompt of 15: units end at 4, 8, 12, 15; no boundary at 16 -> no state
  t.add("pqrsu", 18, 1);  // KV matches 12 (the 15-token partial block is not this one), no state
  const std::vector<RequestOutcome> out = simulate(t.requests(), config("allocation_block", 16), hybrid_sizes());
  EXPECT_EQ(out[1].kv_matched_tokens, 12);
  EXPECT_EQ(out[1].hit_tokens, 0);
  EXPECT_EQ(out[1].recomputed_tokens(), 12);
  EXPECT_EQ(out[1].checkpoints_written, 1);
  EXPECT_EQ(out[2].hit_tokens, 16);
  EXPECT_EQ(out[4].hit_tokens, 0);
  EXPECT_EQ(out[5].kv_matched_tokens, 12);
  EXPECT_EQ(out[5].hit_tokens, 0);
  const CacheSummary s = summarize(t.requests(), out, {}, nullptr);
  EXPECT_EQ(s.sessions_multi_turn, 2);
  EXPECT_EQ(s.sessions_never_resumed, 1);  // session 1: every later turn matched KV, none hit
  EXPECT_EQ(s.requests_kv_hit_state_miss, 3);

  // The same trace with sparse checkpoints (prompt end + every 16): both sessions resume.
  const auto fixed = simulate(t.requests(), config("sparse", 16, 16), hybrid_sizes());
  EXPECT_EQ(fixed[1].hit_tokens, 12);
  EXPECT_EQ(fixed[2].hit_tokens, 16);
  EXPECT_EQ(fixed[4].hit_tokens, 12);
  EXPECT_EQ(fixed[5].hit_tokens, 12);
  EXPECT_EQ(summarize(t.requests(), fixed, {}, nullptr).sessions_never_resumed, 0);
}

TEST(PrefixCache, PromptEndKeepsOneStateAtTheLastFullBlock) {
  TraceBuilder t;
  t.add("abcd", 14);  // units end at 4, 8, 12, 14: the state goes at 12
  t.add("abcx", 16);  // KV "abc" = 12 matched, state at 12 -> hit 12
  t.add("ab", 8);     // KV 8 matched, no state at 8 -> hit 0
  const auto out = simulate(t.requests(), config("prompt_end"), hybrid_sizes());
  EXPECT_EQ(out[0].checkpoints_written, 1);
  EXPECT_EQ(out[1].hit_tokens, 12);
  EXPECT_EQ(out[1].checkpoints_written, 1);  // at 16
  EXPECT_EQ(out[2].kv_matched_tokens, 8);
  EXPECT_EQ(out[2].hit_tokens, 0);
}

TEST(PrefixCache, IntervalAndSparsePlacement) {
  TraceBuilder t;
  t.add("abcde");   // 20 tokens
  t.add("abcdef");  // KV 20 matched
  // interval 8: states at 8 and 16 -> hit 16, 4 recomputed.
  auto out = simulate(t.requests(), config("interval", 4, 8), hybrid_sizes());
  EXPECT_EQ(out[0].checkpoints_written, 2);
  EXPECT_EQ(out[1].hit_tokens, 16);
  EXPECT_EQ(out[1].recomputed_tokens(), 4);
  // Its second request computes from 16: new states only at 24 (none: prompt is 24, 24 % 8 == 0 -> yes).
  EXPECT_EQ(out[1].checkpoints_written, 1);
  // sparse = interval + prompt end: states at 8, 16, 20 -> hit 20.
  out = simulate(t.requests(), config("sparse", 4, 8), hybrid_sizes());
  EXPECT_EQ(out[0].checkpoints_written, 3);
  EXPECT_EQ(out[1].hit_tokens, 20);
}

TEST(PrefixCache, MarconiCheckpointsTheBranchPointWhenAPrefixIsSeenTwice) {
  TraceBuilder t;
  t.add("ssab");  // prompt end state at 16
  t.add("ssc");   // shares "ss" (seen once before): KV 8, no state at 8 -> hit 0; branch state at 8
  t.add("ssd");   // "ss" state now cached -> hit 8
  const auto out = simulate(t.requests(), config("marconi"), hybrid_sizes());
  EXPECT_EQ(out[1].kv_matched_tokens, 8);
  EXPECT_EQ(out[1].hit_tokens, 0);
  EXPECT_EQ(out[1].checkpoints_written, 2);  // at 8 (branch) and 12 (end)
  EXPECT_EQ(out[2].hit_tokens, 8);
  // prompt_end alone never learns the shared prefix.
  const auto end_only = simulate(t.requests(), config("prompt_end"), hybrid_sizes());
  EXPECT_EQ(end_only[2].hit_tokens, 0);
}

TEST(PrefixCache, LruEvictsLeavesOfTheOldestPromptFirst) {
  // KV only, 4-byte blocks, room for 3 blocks.
  CacheConfig c = config("sparse");
  c.tiers = {{"hbm", 12, 0}};
  TraceBuilder t;
  t.add("ab");  // a, b cached (b older than a)
  t.add("cd");  // c, d added: 16 bytes > 12 -> b (the oldest, a leaf) goes
  t.add("ab");  // a hits (4 tokens); b comes back, evicting d (older than c)
  t.add("cd");  // c hits
  const auto out = simulate(t.requests(), c, kv_only(hybrid_sizes()));
  EXPECT_EQ(out[2].hit_tokens, 4);
  EXPECT_EQ(out[3].hit_tokens, 4);
  PrefixCache cache(c, kv_only(hybrid_sizes()));
  for (const Request& r : t.requests()) cache.serve(r);
  EXPECT_EQ(cache.used_bytes(0), 12);
  EXPECT_EQ(cache.cached_kv_blocks(), 3);
}

TEST(PrefixCache, MarconiEvictionKeepsTheCheckpointThatSavesMostPerByte) {
  // Prompt-end states. X = 32 tokens (state eff. 32/10 = 3.2 vs 1 for a KV block), Y = 8 tokens.
  // alpha 10: X's KV blocks 1 + 10 = 11, X's state 1 + 32 = 33, Y's KV 2 + 10 = 12, Y's state 2 + 8 = 10.
  // Used 32 + 10 + 8 + 10 = 60 bytes; capacity 56 evicts 4 bytes or more.
  TraceBuilder t;
  t.add("abcdefgh");
  t.add("yz");
  t.add("abcdefgh");
  CacheConfig c = config("prompt_end");
  c.tiers = {{"hbm", 56, 0}};
  c.eviction = "marconi";
  c.eviction_params.set("alpha_requests", 10);
  // Marconi: lowest is Y's state (10): 10 bytes go -> X still resumes in full.
  auto out = simulate(t.requests(), c, hybrid_sizes());
  EXPECT_EQ(out[2].hit_tokens, 32);
  // LRU: X's state was touched first (states before KV) and is the oldest item: it goes, X cannot resume.
  c.eviction = "lru";
  c.eviction_params = {};
  out = simulate(t.requests(), c, hybrid_sizes());
  EXPECT_EQ(out[2].kv_matched_tokens, 32);
  EXPECT_EQ(out[2].hit_tokens, 0);
  EXPECT_EQ(out[2].recomputed_tokens(), 32);
}

TEST(PrefixCache, LowerTiersHoldWhatTheFirstEvictsAndHitsLoadFromThem) {
  CacheConfig c = config("sparse");
  c.tiers = {{"hbm", 8, 0}, {"dram", kInf, 2.0}};  // 2 B/s
  TraceBuilder t;
  t.add("ab");
  t.add("cd");  // a, b demoted to dram
  t.add("ab");  // 8 tokens hit from dram: 8 bytes at 2 B/s = 4 s
  const auto out = simulate(t.requests(), c, kv_only(hybrid_sizes()));
  EXPECT_EQ(out[2].hit_tokens, 8);
  EXPECT_DOUBLE_EQ(out[2].loaded_bytes, 8);
  EXPECT_DOUBLE_EQ(out[2].load_ms, 4000);
  EXPECT_EQ(out[1].loaded_bytes, 0);
  // A state larger than the first tier lives in the second; a hit loads it too.
  CacheConfig h = config("prompt_end");
  h.tiers = {{"hbm", 9, 0}, {"dram", kInf, 1.0}};
  TraceBuilder u;
  u.add("ab");
  u.add("abc");  // KV 8 from hbm; state (10 B) from dram: 10 s
  const auto hout = simulate(u.requests(), h, hybrid_sizes());
  EXPECT_EQ(hout[1].hit_tokens, 8);
  EXPECT_DOUBLE_EQ(hout[1].loaded_bytes, 10);
  EXPECT_DOUBLE_EQ(hout[1].load_ms, 10000);
}

TEST(PrefixCache, CoarserHashBlocksMatchWholeUnitsOnly) {
  TraceBuilder t;
  t.add("abc");
  t.add("abdd");  // trace blocks share "ab"
  t.add("ax");
  CacheConfig c = config("sparse");
  auto out = simulate(t.requests(), c, kv_only(hybrid_sizes()));
  EXPECT_EQ(out[1].hit_tokens, 8);
  EXPECT_EQ(out[2].hit_tokens, 4);
  c.hash_block_tokens = 8;
  c.allocation_block_tokens = 8;
  c.checkpoint_params.set("interval_tokens", 8);
  out = simulate(t.requests(), c, kv_only(hybrid_sizes()));
  EXPECT_EQ(out[1].hit_tokens, 8);  // unit [a b] shared
  EXPECT_EQ(out[2].hit_tokens, 0);  // half a unit does not count
  c.hash_block_tokens = 6;
  c.allocation_block_tokens = 6;
  c.checkpoint_params.set("interval_tokens", 6);
  test::expect_input_error([&] { simulate(t.requests(), c, kv_only(hybrid_sizes())); },
                           {"request 0", "blocks of 4 tokens", "hash blocks of 6"});
}

TEST(PrefixCache, PerNodeCachesOnlyHitWhereTheRequestLands) {
  TraceBuilder t;
  t.add("ab");
  t.add("ab");
  CacheConfig c = config("sparse");
  c.nodes = 2;
  c.routing = Routing::round_robin;
  auto out = simulate(t.requests(), c, kv_only(hybrid_sizes()));
  EXPECT_EQ(out[1].node, 1);
  EXPECT_EQ(out[1].hit_tokens, 0);
  c.pooled = true;
  out = simulate(t.requests(), c, kv_only(hybrid_sizes()));
  EXPECT_EQ(out[1].hit_tokens, 8);
  c.pooled = false;
  c.routing = Routing::session;  // no session: the first block decides, both land together
  out = simulate(t.requests(), c, kv_only(hybrid_sizes()));
  EXPECT_EQ(out[1].hit_tokens, 8);
}

TEST(PrefixCache, ConfigErrorsNameTheField) {
  using test::expect_input_error;
  CacheConfig c = config("sparse");
  c.allocation_block_tokens = 6;
  expect_input_error([&] { validate(c); }, {"allocation_block_tokens", "multiple"});
  c = config("nope");
  expect_input_error([&] { validate(c); }, {"checkpoint", "'nope'", "allocation_block", "marconi", "sparse"});
  c = config("sparse");
  c.eviction = "fifo";
  expect_input_error([&] { validate(c); }, {"eviction", "'fifo'", "lru"});
  c = config("sparse");
  c.tiers = {{"hbm", 1, 0}, {"ssd", 1, 0}};
  expect_input_error([&] { validate(c); }, {"tier 'ssd'", "read_bytes_per_s"});
}

TEST(PrefixCache, PricesGiveCostPerRequest) {
  RequestOutcome o;
  o.input_tokens = 1'000'000;
  o.hit_tokens = 900'000;
  o.output_tokens = 1000;
  // 0.9 M x 0.30 + 0.1 M x 3.00 + 0.001 M x 15 = 0.27 + 0.30 + 0.015
  EXPECT_NEAR(request_cost_usd(o, {0.30, 3.00, 15.0}), 0.585, 1e-12);
}

// The extension points: a checkpoint and an eviction policy registered from this file alone,
// chosen by name (and given parameters) through the cache config.
// Test-only: a state after the prompt's unit `unit` (a parameter, default 0) and nowhere else.
class FixedUnitCheckpoint : public CheckpointPolicy {
 public:
  explicit FixedUnitCheckpoint(const Params& p) : unit_(p.param<int64_t>("unit").default_val(0)) {
    if (unit_ < 0) p.fail("unit", fmt::format("expected a unit index >= 0, got {}", unit_));
  }
  void choose(const CheckpointRequest& r, std::vector<int64_t>& units) const override {
    if (unit_ < static_cast<int64_t>(r.unit_end_tokens.size())) add_unit(r, unit_, units);
  }
  std::map<std::string, double> parameters() const override { return {{"unit", double(unit_)}}; }

 private:
  int64_t unit_;
};
K3PERF_REGISTER_CHECKPOINT_POLICY(FixedUnitCheckpoint, "test_fixed_unit");

// Test-only: most recently used first (the opposite of LRU).
class MruEviction : public EvictionPolicy {
 public:
  double priority(const EvictionItem& item) const override { return -static_cast<double>(item.last_touch); }
};
K3PERF_REGISTER_EVICTION_POLICY(MruEviction, "test_mru");

TEST(RegisteredPolicies, ATestCheckpointPolicyIsChosenByNameWithItsParameter) {
  CacheConfig c;
  c.hash_block_tokens = c.allocation_block_tokens = 4;
  c.checkpoint = "test_fixed_unit";
  c.checkpoint_params.set("unit", 1);  // a state after 8 tokens only
  TraceBuilder t;
  t.add("abc");
  t.add("abcd");
  const auto out = simulate(t.requests(), c, hybrid_sizes());
  EXPECT_EQ(out[1].kv_matched_tokens, 12);
  EXPECT_EQ(out[1].hit_tokens, 8);  // the state at 8, not at 12
  EXPECT_EQ(make_checkpoint_policy(c)->parameters().at("unit"), 1);
  c.checkpoint_params.set("unit", -1);
  test::expect_input_error([&] { validate(c); },
                           {"checkpoint policy 'test_fixed_unit'", "expected a unit index >= 0, got -1"});
  c.checkpoint = "none_such";
  test::expect_input_error([&] { validate(c); },
                           {"cache: checkpoint", "unknown checkpoint policy 'none_such'", "sparse", "test_fixed_unit"});
}

TEST(RegisteredPolicies, ATestEvictionPolicyIsChosenByName) {
  // A (8 tokens): its state (10 B, touch 1), KV of unit 1 (4 B, touch 2) and unit 0 (4 B, touch 3).
  // B (an unrelated 4 tokens) adds a state (10 B, touch 4) and KV (4 B, touch 5) to a 24-byte HBM.
  CacheConfig c;
  c.hash_block_tokens = c.allocation_block_tokens = 4;
  c.checkpoint = "prompt_end";
  c.tiers = {{"hbm", 24, 0}};
  TraceBuilder t;
  t.add("ab");
  t.add("z");
  t.add("ab");
  // LRU drops A's state for B's; A's KV stays: A again matches 8 tokens of KV, without a state.
  c.eviction = "lru";
  auto out = simulate(t.requests(), c, hybrid_sizes());
  EXPECT_EQ(out[2].kv_matched_tokens, 8);
  EXPECT_EQ(out[2].hit_tokens, 0);
  // MRU drops A's first block (touch 3) for B's state, then B's state (touch 4) for B's KV: A again
  // matches nothing.
  c.eviction = "test_mru";
  out = simulate(t.requests(), c, hybrid_sizes());
  EXPECT_EQ(out[2].kv_matched_tokens, 0);
  EXPECT_EQ(out[1].hit_tokens, 0);
}

std::vector<Request> mooncake(const std::string& file) {
  return workload::read_mooncake_trace(std::string(K3PERF_SOURCE_DIR) + "/data/traces/" + file);
}

TEST(PrefixCacheTraces, UnboundedKvCacheHitsExactlyTheTracesReuse) {
  for (const char* file : {"conversation_trace.jsonl", "synthetic_trace.jsonl"}) {
    const auto reqs = mooncake(file);
    CacheConfig c;  // 512-token hash blocks, unbounded HBM
    const CacheSummary s = summarize(reqs, simulate(reqs, c, kv_only(hybrid_sizes())), {}, nullptr);
    EXPECT_NEAR(s.token_hit_rate(), workload::trace_stats(reqs).prefix_reuse, 1e-12) << file;
    EXPECT_EQ(s.recomputed_tokens, 0);
  }
}

TEST(PrefixCacheTraces, HybridNeverHitsMoreThanKvAndLruIsMonotoneInCapacity) {
  const auto reqs = mooncake("conversation_trace.jsonl");
  CacheConfig c;
  c.checkpoint = "sparse";
  CacheSizes z = hybrid_sizes();
  z.kv_bytes_per_token = 27648;  // K3's MLA KV, bf16
  z.state_bytes = 434.0e6;       // K3's fp32 state, ~15.7 k tokens of KV
  const auto curve = hit_rate_curve(reqs, c, z, {1e5, 1e6, 1e7, 1e8});
  for (std::size_t i = 0; i < curve.size(); ++i) {
    EXPECT_LE(curve[i].token_hit_rate, curve[i].kv_only_hit_rate + 1e-12);
    if (i > 0) {
      EXPECT_GE(curve[i].kv_only_hit_rate, curve[i - 1].kv_only_hit_rate - 1e-3);
    }
  }
  // 1e8 tokens hold the whole trace's KV (its distinct blocks are ~1.7e5 x 512 tokens).
  EXPECT_NEAR(curve.back().kv_only_hit_rate, workload::trace_stats(reqs).prefix_reuse, 1e-12);
}

}  // namespace
}  // namespace k3::cache

namespace k3 {
namespace {

TEST(CacheClaims, AllocationBlockCheckpointsNeverResumeAndSparseOnesDo) {
  const DataPaths data = DataPaths::resolve(std::string(K3PERF_SOURCE_DIR) + "/scenarios");
  const ClaimResult p13 = check_claim(load_claim(data.claims_dir + "/p13-checkpoint-granularity.yaml"), data);
  const ClaimResult p14 = check_claim(load_claim(data.claims_dir + "/p14-sparse-checkpoints.yaml"), data);
  EXPECT_EQ(p13.verdict, Verdict::reproduced);
  EXPECT_EQ(p14.verdict, Verdict::reproduced);
  // Every prompt of these sessions is below 6144 tokens: no allocation-block boundary, no state.
  EXPECT_EQ(p13.evaluation.predicted.at("token_hit_rate_percent"), 0);
  EXPECT_GT(p13.evaluation.predicted.at("kv_hit_rate_percent"), 40);
  EXPECT_EQ(p14.evaluation.predicted.at("never_resumed_percent"), 0);
}

}  // namespace
}  // namespace k3
