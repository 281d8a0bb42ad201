// P2/P3-style claims: KV cache plus KDA state of one sequence at a context length, for the model
// as published and for the same model with every layer MLA.
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/memory.h"

#include <fmt/format.h>

namespace k3 {
namespace {

class KvStateMemoryEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    const ModelConfig m = load_model_config_by_name(param_string(c, "model", "kimi-k3"), data.models_dir);
    const ModelConfig all_mla = with_all_attention(m, AttentionKind::mla);
    Precision p;
    parse_storage_format(param_string(c, "kda_state", "bf16"), &p.kda_state);
    parse_storage_format(param_string(c, "kv_cache", "bf16"), &p.kv_cache);
    const double tokens = param_double(c, "context_tokens", 1048576);
    const double kv = kv_bytes_per_token(m, p) * tokens;
    const double state = kda_recurrent_state_bytes(m, p);
    const double conv = kda_conv_state_bytes(m, p);
    const double hybrid = kv + state + conv;
    const double full = kv_bytes_per_token(all_mla, p) * tokens;
    const double gi = double(1ull << 30);
    Evaluation e;
    e.predicted["all_mla_gib"] = full / gi;
    e.predicted["hybrid_gib"] = hybrid / gi;
    e.predicted["reduction_percent"] = 100.0 * (1.0 - hybrid / full);
    e.predicted["layer_reduction_percent"] =
        100.0 * (1.0 - double(m.count_layers(AttentionKind::mla)) / m.num_layers);
    e.breakdown = {
        fmt::format("all {} layers MLA: {} layers x {:.0f} B/token x {:.0f} tokens = {}", m.num_layers,
                    m.num_layers, kv_bytes_per_token(all_mla, p) / m.num_layers, tokens, gib(full)),
        fmt::format("{}: {} MLA layers KV {} + KDA state ({}) {} + conv state {} = {}", m.name,
                    m.count_layers(AttentionKind::mla), gib(kv), to_string(p.kda_state), gib(state), gib(conv),
                    gib(hybrid)),
        fmt::format("reduction {:.2f}% (layer ratio alone {:.2f}%: {} of {} layers keep KV)",
                    e.predicted["reduction_percent"], e.predicted["layer_reduction_percent"],
                    m.count_layers(AttentionKind::mla), m.num_layers),
    };
    Precision q = p;
    q.kda_state = p.kda_state == StorageFormat::bf16 ? StorageFormat::fp32 : StorageFormat::bf16;
    e.breakdown.push_back(fmt::format("with the KDA state in {} instead: {}", to_string(q.kda_state),
                                      gib(kv + kda_recurrent_state_bytes(m, q) + conv)));
    // Used only when a reported figure is missed: the cut follows the layer schedule, not "3:1".
    e.explanation = fmt::format(
        "{} of {} layers are MLA, so the KV shrinks by {:.2f}%; the constant KDA state ({}) takes back "
        "a little at this length",
        m.count_layers(AttentionKind::mla), m.num_layers, e.predicted["layer_reduction_percent"], gib(state + conv));
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(KvStateMemoryEvaluator, "kv_state_memory");
}  // namespace k3
