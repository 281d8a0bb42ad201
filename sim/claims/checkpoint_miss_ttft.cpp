// P12-style claims: what a missing KDA state checkpoint costs a long conversation. A history of
// params.history_tokens, then the same history plus params.new_tokens, go through the hybrid prefix
// cache with a state kept where the history's prompt ends ('prompt_end'): the second request reuses
// the history (the hit). The claim's premise is that this state is missing and no earlier one was
// kept: the KV still matches, yet every history token is prefilled again (the miss). TTFT of both
// from the roofline prefill of the deployment (sim/cache/prefill_time.h, exact predictions).
// Alternative: periodic checkpoints every params.interval_tokens ('interval'), so a miss at the
// boundary falls back to the last of them (the cache simulator finds where).
#include "core/error.h"
#include "sim/cache/prefill_time.h"
#include "sim/cache/prefix_cache.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"

#include <fmt/format.h>

namespace k3 {
namespace {

// A prompt of `tokens` whose blocks of `block` tokens hash as 1, 2, 3, ... (shared prefixes hash alike).
workload::Request prompt(int64_t id, double arrival_ms, int64_t tokens, int64_t block) {
  workload::Request r;
  r.id = id;
  r.arrival_ms = arrival_ms;
  r.input_tokens = tokens;
  r.output_tokens = 1;
  r.block_tokens = block;
  for (int64_t b = 0; b * block < tokens; ++b) r.block_hashes.push_back(static_cast<uint64_t>(b + 1));
  return r;
}

class CheckpointMissTtftEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override {
    expect_params(c, scenario_param_keys({"history_tokens", "new_tokens", "hash_block_tokens", "interval_tokens"}));
    const int64_t history = param_count(c, "history_tokens", 409600, at_least(limit::tokens, 1));
    const int64_t fresh = param_count(c, "new_tokens", 4096, at_least(limit::tokens, 1));
    const int64_t block = param_count(c, "hash_block_tokens", 512, at_least(limit::tokens, 1));
    const int64_t interval = param_count(c, "interval_tokens", 6144, at_least(limit::tokens, 1));
    // The phase only has to be valid here (one sequence per attention group); PrefillTimeModel sets its own.
    const long long groups = param_count(c, "attention_dp", 1, limit::parallel_degree);
    const Scenario s =
        claim_scenario(c, data, Phase::prefill(groups, history + fresh, 0, history + fresh), "kimi-k3", "h200-sxm");
    const cache::CacheSizes sizes = cache::cache_sizes(s.model, s.precision);
    if (!sizes.needs_state) throw InputError(fmt::format("{}: model '{}' has no KDA layers", c.file, s.model.name));
    const std::vector<workload::Request> requests = {prompt(0, 0, history, block),
                                                     prompt(1, 60000, history + fresh, block)};
    auto second = [&](const std::string& policy) {
      cache::CacheConfig cfg;
      cfg.hash_block_tokens = block;
      cfg.allocation_block_tokens = block;
      cfg.checkpoint = policy;
      cfg.checkpoint_params = cache::checkpoint_params_for(policy, {{"interval_tokens", double(interval)}});
      try {
        cache::validate(cfg);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}: params: {}", c.file, e.what()));
      }
      return cache::simulate(requests, cfg, sizes).at(1);
    };
    const cache::RequestOutcome hit = second("prompt_end");
    const cache::RequestOutcome periodic = second("interval");
    const int64_t total = history + fresh;
    const int64_t miss_reused = 0;  // the premise: no state at or before the boundary
    cache::PrefillTimeModel prefill(s);
    const double ttft_hit = prefill.exact_ttft_ms(total - hit.hit_tokens, hit.hit_tokens);
    const double ttft_miss = prefill.exact_ttft_ms(total - miss_reused, miss_reused);
    const double ttft_periodic = prefill.exact_ttft_ms(total - periodic.hit_tokens, periodic.hit_tokens);

    Evaluation e;
    e.predicted["reprefilled_tokens"] = double(hit.hit_tokens - miss_reused);
    e.predicted["ttft_miss_over_hit"] = ttft_miss / ttft_hit;
    e.breakdown = {
        fmt::format("{} on {} x{} (tp {}, attention_dp {}, ep {}); a {}-token history, then it again with {} new "
                    "tokens, {}-token hash blocks",
                    s.model.name, s.hardware.name, s.parallelism.gpus(), s.parallelism.tp, s.parallelism.attention_dp,
                    s.parallelism.ep, history, fresh, block),
        fmt::format("hit: KV of {} tokens and a state at their end ('prompt_end'): {} tokens reused, {} prefilled, "
                    "TTFT {:.1f} ms",
                    hit.kv_matched_tokens, hit.hit_tokens, total - hit.hit_tokens, ttft_hit),
        fmt::format("miss: the same KV matches but no state is kept at or before it: all {} tokens prefilled, TTFT "
                    "{:.1f} ms = {:.0f}x the hit",
                    total, ttft_miss, ttft_miss / ttft_hit),
        fmt::format("a state checkpoint is {:.1f} MB; the history's KV is {:.2f} GB", sizes.state_bytes / 1e6,
                    double(history) * sizes.kv_bytes_per_token / 1e9),
        fmt::format("  with checkpoints every {} tokens ('interval') the miss falls back to token {}: {} tokens "
                    "prefilled again, TTFT {:.1f} ms = {:.1f}x the hit",
                    interval, periodic.hit_tokens, hit.hit_tokens - periodic.hit_tokens, ttft_periodic,
                    ttft_periodic / ttft_hit),
    };
    e.alternatives.push_back(
        {fmt::format("states also kept every {} tokens, so a miss falls back to the last of them", interval),
         {{"reprefilled_tokens", double(hit.hit_tokens - periodic.hit_tokens)},
          {"ttft_miss_over_hit", ttft_periodic / ttft_hit}}});
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(CheckpointMissTtftEvaluator, "checkpoint_miss_ttft");
}  // namespace k3
