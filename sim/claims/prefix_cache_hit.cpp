// P11-style claims: the token hit rate of the hybrid prefix cache (KV of every block before the
// boundary and a KDA state checkpoint at it) on coding-agent traffic, and what the hits save at the
// given hit/miss prices. The traffic is a synthetic agent-session workload (params.workload,
// docs/cache.md): each turn resends the whole conversation and adds a tool result, so most of a
// prompt is the previous prompt. The cache is unbounded unless params.hbm_tokens is given.
// Alternatives: every other registered checkpoint placement; a cache that needs no state (pure
// attention, same KV); and the Mooncake conversation trace (real chat traffic, not coding).
#include "core/error.h"
#include "sim/cache/cache_metrics.h"
#include "sim/cache/prefix_cache.h"
#include "sim/claims/claim.h"
#include "sim/workload/mooncake_reader.h"
#include "sim/workload/synthetic.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <limits>

namespace k3 {
namespace {

std::map<std::string, double> predict_keys(const cache::CacheSummary& s) {
  return {{"hit_rate_percent", 100 * s.token_hit_rate()},
          {"kv_hit_rate_percent", 100 * s.kv_hit_rate()},
          {"usd_per_million_input_tokens", s.cost_per_million_input_tokens_usd()}};
}

class PrefixCacheHitEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override {
    expect_params(c, {"model", "kda_state", "hash_block_tokens", "allocation_block_tokens", "checkpoint",
                      "checkpoint_interval_tokens", "hbm_tokens", "price_hit_per_mtok", "price_miss_per_mtok", "seed",
                      "workload", "chat_trace"});
    const ModelConfig m = load_model_config_by_name(param_string(c, "model", "kimi-k3"), data.models_dir);
    Precision p;
    p.kda_state = param_storage(c, "kda_state", StorageFormat::fp32, {"fp32", "bf16"});
    const cache::CacheSizes sizes = cache::cache_sizes(m, p);
    cache::CacheConfig cfg;
    cfg.hash_block_tokens = param_count(c, "hash_block_tokens", 512, at_least(limit::tokens, 1));
    cfg.allocation_block_tokens = param_count(c, "allocation_block_tokens", 512, at_least(limit::tokens, 1));
    cfg.checkpoint = param_string(c, "checkpoint", "sparse");
    const long long interval = param_count(c, "checkpoint_interval_tokens", 4096, at_least(limit::tokens, 1));
    // Every placement compared gets the interval if it takes one.
    const std::map<std::string, double> offered = {{"interval_tokens", double(interval)}};
    cfg.checkpoint_params = cache::checkpoint_params_for(cfg.checkpoint, offered);
    const double inf = std::numeric_limits<double>::infinity();
    const double hbm_tokens = param_double(c, "hbm_tokens", inf);
    if (!(hbm_tokens > 0)) throw InputError(fmt::format("{}: params.hbm_tokens: expected a positive number", c.file));
    cfg.tiers = {{"hbm", hbm_tokens * sizes.kv_bytes_per_token, 0}};
    try {
      cache::validate(cfg);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: params: {}", c.file, e.what()));
    }
    cache::Prices prices;
    prices.hit_per_mtok = param_double(c, "price_hit_per_mtok", 0.30);
    prices.miss_per_mtok = param_double(c, "price_miss_per_mtok", 3.00);
    if (!c.params || !c.params->has("workload")) throw InputError(fmt::format("{}: params.workload: missing", c.file));
    const workload::SessionWorkloadSpec spec = workload::parse_session_workload((*c.params)["workload"]);
    const auto requests =
        workload::generate_sessions(spec, static_cast<uint64_t>(param_count(c, "seed", 1, limit::seed)));

    auto run = [&](const std::vector<workload::Request>& r, const cache::CacheConfig& x, const cache::CacheSizes& z) {
      return cache::summarize(r, cache::simulate(r, x, z), prices, nullptr);
    };
    const cache::CacheSummary s = run(requests, cfg, sizes);
    Evaluation e;
    e.predicted = predict_keys(s);
    const double all_miss = prices.miss_per_mtok;
    e.breakdown = {
        fmt::format("{} requests in {} agent sessions of {}-{} turns; first prompts {}-{} tokens (+{} system, {} "
                    "distinct), {}-{} tokens of tool output per later turn, answers {}-{}; mean prompt {:.0f} tokens",
                    requests.size(), spec.sessions, spec.turns_min, spec.turns_max, spec.first_user_tokens_min,
                    spec.first_user_tokens_max, spec.system_prompt_tokens, spec.system_prompts, spec.new_tokens_min,
                    spec.new_tokens_max, spec.output_tokens_min, spec.output_tokens_max,
                    double(s.input_tokens) / double(std::max<int64_t>(1, s.requests))),
        fmt::format("model {}: {:.1f} KB of MLA KV per token, {:.1f} MB per state checkpoint; hash block {}, "
                    "allocation block {}, '{}' checkpoints (interval {}), {} cache",
                    m.name, sizes.kv_bytes_per_token / 1e3, sizes.state_bytes / 1e6, cfg.hash_block_tokens,
                    cfg.allocation_block_tokens, cfg.checkpoint, interval,
                    std::isinf(hbm_tokens) ? std::string("unbounded") : fmt::format("{:g}-token", hbm_tokens)),
        fmt::format("token hit rate {:.2f}% (KV alone would match {:.2f}%): {} of {} prompt tokens reused, {} "
                    "recomputed for want of a state at the KV match's end",
                    100 * s.token_hit_rate(), 100 * s.kv_hit_rate(), s.hit_tokens, s.input_tokens, s.recomputed_tokens),
        fmt::format("at ${:.2f} (hit) / ${:.2f} (miss) per M input tokens: ${:.3f} per M, ${:.4f} per request "
                    "({:.1f}x cheaper than all misses)",
                    prices.hit_per_mtok, prices.miss_per_mtok, s.cost_per_million_input_tokens_usd(),
                    s.cost_per_request_usd(),
                    s.cost_per_million_input_tokens_usd() > 0 ? all_miss / s.cost_per_million_input_tokens_usd() : 0),
    };
    for (const std::string& policy : cache::CheckpointPolicies::instance().names()) {
      if (policy == cfg.checkpoint) continue;
      cache::CacheConfig x = cfg;
      x.checkpoint = policy;
      x.checkpoint_params = cache::checkpoint_params_for(policy, offered);
      const cache::CacheSummary a = run(requests, x, sizes);
      e.alternatives.push_back({fmt::format("with '{}' checkpoint placement", policy), predict_keys(a)});
      e.breakdown.push_back(fmt::format("  '{}' instead: token hit rate {:.2f}%", policy, 100 * a.token_hit_rate()));
    }
    const cache::CacheSummary kv = run(requests, cfg, cache::kv_only(sizes));
    e.alternatives.push_back({"a pure-attention cache (no state needed at the boundary), same KV", predict_keys(kv)});
    e.breakdown.push_back(fmt::format("  needing no state: token hit rate {:.2f}%", 100 * kv.token_hit_rate()));
    const std::string trace = param_string(c, "chat_trace", "");
    if (!trace.empty()) {
      // Relative to the data directory's parent (the repository), as the shipped traces are.
      const std::filesystem::path path = std::filesystem::path(data.models_dir).parent_path().parent_path() / trace;
      if (!std::filesystem::exists(path)) {
        e.breakdown.push_back(
            fmt::format("  chat-trace alternative not run: {} is not beside this data folder", trace));
        return e;
      }
      const auto chat = workload::read_mooncake_trace(path.string());
      const cache::CacheSummary t = run(chat, cfg, sizes);
      e.alternatives.push_back({fmt::format("Kimi chat traffic instead of coding ({})", trace), predict_keys(t)});
      e.breakdown.push_back(
          fmt::format("  the Mooncake conversation trace ({} chat requests) instead: token hit "
                      "rate {:.2f}% (the trace's own prefix reuse bounds it)",
                      chat.size(), 100 * t.token_hit_rate()));
    }
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(PrefixCacheHitEvaluator, "prefix_cache_hit");
}  // namespace k3
