// P2/P3-style claims: KV cache plus KDA state of one sequence at a context length, for the model
// as published and for the same model with every layer MLA.
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/memory.h"

#include <fmt/format.h>

namespace k3 {
namespace {

constexpr double kGiB = double(1ull << 30);

struct Sizes {
  double kv = 0, state = 0, full = 0;
  double hybrid() const { return kv + state; }
};

Sizes sizes(const ModelConfig& m, const Precision& p, double tokens) {
  return {kv_bytes_per_token(m, p) * tokens, kda_recurrent_state_bytes(m, p) + kda_conv_state_bytes(m, p),
          kv_bytes_per_token(with_all_attention(m, AttentionKind::mla), p) * tokens};
}

std::map<std::string, double> predicted(const Sizes& s) {
  return {{"all_mla_gib", s.full / kGiB},
          {"hybrid_gib", s.hybrid() / kGiB},
          {"reduction_percent", 100.0 * (1.0 - s.hybrid() / s.full)}};
}

class KvStateMemoryEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    expect_params(c, {"model", "context_tokens", "kda_state", "kv_cache"});
    const ModelConfig m = load_model_config_by_name(param_string(c, "model", "kimi-k3"), data.models_dir);
    Precision p;
    p.kda_state = param_storage(c, "kda_state", StorageFormat::bf16, {"fp32", "bf16"});
    p.kv_cache = param_storage(c, "kv_cache", StorageFormat::bf16, {"bf16", "fp8"});
    const double tokens = static_cast<double>(param_count(c, "context_tokens", 1 << 20));
    const Sizes s = sizes(m, p, tokens);
    const int mla = m.count_layers(AttentionKind::mla);
    Evaluation e;
    e.predicted = predicted(s);
    e.predicted["layer_reduction_percent"] = 100.0 * (1.0 - double(mla) / m.num_layers);
    e.breakdown = {
        fmt::format("all {} layers MLA: {} B/token/layer x {:.0f} tokens = {}", m.num_layers,
                    kv_bytes_per_token(m, p) / std::max(1, mla), tokens, gib(s.full)),
        fmt::format("{}: {} MLA layers KV {} + KDA recurrent and conv state ({}) {} = {}", m.name, mla, gib(s.kv),
                    to_string(p.kda_state), gib(s.state), gib(s.hybrid())),
        fmt::format("reduction {:.2f}% (layer ratio alone {:.2f}%: {} of {} layers keep KV)",
                    e.predicted["reduction_percent"], e.predicted["layer_reduction_percent"], mla, m.num_layers),
    };
    Precision q = p;
    q.kda_state = p.kda_state == StorageFormat::bf16 ? StorageFormat::fp32 : StorageFormat::bf16;
    e.alternatives.push_back({fmt::format("with the KDA state in {}", to_string(q.kda_state)), predicted(sizes(m, q, tokens))});
    Sizes layers_only = s;
    layers_only.state = 0;
    e.alternatives.push_back({"counting KV layers only (the constant KDA state left out)", predicted(layers_only)});
    Sizes pure = s;
    pure.kv = s.full / 4;
    pure.state = 0;
    e.alternatives.push_back({"for an exact 3:1 layout (one MLA layer in four) with the state left out", predicted(pure)});
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(KvStateMemoryEvaluator, "kv_state_memory");
}  // namespace k3
