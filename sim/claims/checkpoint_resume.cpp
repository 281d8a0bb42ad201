// P13/P14: whether multi-turn conversations resume from the prefix cache, given where KDA state
// checkpoints are kept. A synthetic session workload (params.workload, docs/cache.md) runs through an
// unbounded cache, so capacity plays no part: only the hash block, the allocation block and the
// checkpoint placement decide. Alternatives: every other registered placement, same granularities.
#include "core/error.h"
#include "sim/cache/cache_metrics.h"
#include "sim/cache/prefix_cache.h"
#include "sim/claims/claim.h"
#include "sim/workload/synthetic.h"

#include <fmt/format.h>

namespace k3 {
namespace {

std::map<std::string, double> predict_keys(const cache::CacheSummary& s) {
  const double sessions = double(s.sessions_multi_turn);
  return {{"never_resumed_percent", sessions > 0 ? 100.0 * double(s.sessions_never_resumed) / sessions : 0},
          {"token_hit_rate_percent", 100 * s.token_hit_rate()},
          {"kv_hit_rate_percent", 100 * s.kv_hit_rate()}};
}

class CheckpointResumeEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override {
    expect_params(c, {"model", "kda_state", "hash_block_tokens", "allocation_block_tokens", "checkpoint",
                      "checkpoint_interval_tokens", "seed", "workload"});
    const ModelConfig m = load_model_config_by_name(param_string(c, "model", "kimi-k3"), data.models_dir);
    Precision p;
    p.kda_state = param_storage(c, "kda_state", StorageFormat::fp32, {"fp32", "bf16"});
    const cache::CacheSizes sizes = cache::cache_sizes(m, p);
    if (!sizes.needs_state) throw InputError(fmt::format("{}: model '{}' has no KDA layers", c.file, m.name));
    cache::CacheConfig cfg;
    cfg.hash_block_tokens = param_count(c, "hash_block_tokens", 512, at_least(limit::tokens, 1));
    cfg.allocation_block_tokens = param_count(c, "allocation_block_tokens", 6144, at_least(limit::tokens, 1));
    cfg.checkpoint = param_string(c, "checkpoint", "allocation_block");
    const long long interval =
        param_count(c, "checkpoint_interval_tokens", cfg.allocation_block_tokens, at_least(limit::tokens, 1));
    // Every placement compared gets the interval if it takes one.
    const std::map<std::string, double> offered = {{"interval_tokens", double(interval)}};
    cfg.checkpoint_params = cache::checkpoint_params_for(cfg.checkpoint, offered);
    try {
      cache::validate(cfg);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: params: {}", c.file, e.what()));
    }
    if (!c.params || !c.params->has("workload")) throw InputError(fmt::format("{}: params.workload: missing", c.file));
    const workload::SessionWorkloadSpec spec = workload::parse_session_workload((*c.params)["workload"]);
    const auto requests =
        workload::generate_sessions(spec, static_cast<uint64_t>(param_count(c, "seed", 1, limit::seed)));

    auto run = [&](const std::string& policy) {
      cache::CacheConfig x = cfg;
      x.checkpoint = policy;
      x.checkpoint_params = cache::checkpoint_params_for(policy, offered);
      return cache::summarize(requests, cache::simulate(requests, x, sizes), {}, nullptr);
    };
    const cache::CacheSummary s = run(cfg.checkpoint);
    Evaluation e;
    e.predicted = predict_keys(s);
    e.breakdown = {
        fmt::format("{} requests in {} sessions of {}-{} turns; first prompts {}-{} tokens (+{} system), {}-{} new "
                    "tokens per later turn; model {} (state checkpoint {:.0f} MB)",
                    requests.size(), spec.sessions, spec.turns_min, spec.turns_max, spec.first_user_tokens_min,
                    spec.first_user_tokens_max, spec.system_prompt_tokens, spec.new_tokens_min, spec.new_tokens_max,
                    m.name, sizes.state_bytes / 1e6),
        fmt::format("hash block {} tokens, allocation block {} tokens, checkpoints '{}' (interval {}), unbounded cache",
                    cfg.hash_block_tokens, cfg.allocation_block_tokens, cfg.checkpoint, interval),
        fmt::format("KV hit rate {:.1f}%, token hit rate {:.1f}%: {} tokens recomputed because the state at the KV "
                    "match's end was never kept",
                    100 * s.kv_hit_rate(), 100 * s.token_hit_rate(), s.recomputed_tokens),
        fmt::format("{} of {} multi-turn sessions never resume (their later turns match KV but find no state)",
                    s.sessions_never_resumed, s.sessions_multi_turn),
    };
    for (const std::string& policy : cache::CheckpointPolicies::instance().names()) {
      if (policy == cfg.checkpoint) continue;
      const cache::CacheSummary a = run(policy);
      e.alternatives.push_back({fmt::format("with '{}' checkpoint placement", policy), predict_keys(a)});
      e.breakdown.push_back(fmt::format("  '{}' instead: token hit rate {:.1f}%, {} of {} sessions never resume",
                                        policy, 100 * a.token_hit_rate(), a.sessions_never_resumed,
                                        a.sessions_multi_turn));
    }
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(CheckpointResumeEvaluator, "checkpoint_resume");
}  // namespace k3
