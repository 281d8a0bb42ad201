// P15 (memory side): how many tokens of MLA KV one KDA layer's state equals, and the context
// length below which the hybrid holds more memory per sequence than the same model all-MLA.
#include "core/error.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/memory.h"

#include <fmt/format.h>

namespace k3 {
namespace {

class StateBreakEvenEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override {
    expect_params(c, {"model", "kda_state"});
    const ModelConfig m = load_model_config_by_name(param_string(c, "model", "kimi-k3"), data.models_dir);
    if (!m.kda) throw InputError(fmt::format("{}: model '{}' has no KDA layers", c.file, m.name));
    Precision p;
    p.kda_state = param_storage(c, "kda_state", StorageFormat::fp32, {"fp32", "bf16"});
    const double kda_layers = m.count_layers(AttentionKind::kda);
    const double state_per_layer = (kda_recurrent_state_bytes(m, p) + kda_conv_state_bytes(m, p)) / kda_layers;
    const double kv_per_layer_token = kv_bytes_per_token(m, p) / m.count_layers(AttentionKind::mla);
    const double state_total = kda_recurrent_state_bytes(m, p) + kda_conv_state_bytes(m, p);
    const double kv_hybrid = kv_bytes_per_token(m, p);
    const double kv_all_mla = kv_bytes_per_token(with_all_attention(m, AttentionKind::mla), p);
    Evaluation e;
    e.predicted["tokens_per_kda_layer_state"] = state_per_layer / kv_per_layer_token;
    // state + kv_hybrid·L = kv_all_mla·L  ->  L = state / (kv_all_mla - kv_hybrid)
    e.predicted["break_even_tokens_vs_all_mla"] = state_total / (kv_all_mla - kv_hybrid);
    e.predicted["state_equals_own_kv_tokens"] = state_total / kv_hybrid;
    e.breakdown = {
        fmt::format("one KDA layer's state ({}, with conv state): {:.2f} MB = {:.0f} tokens of one MLA layer's KV "
                    "({:.0f} B/token)",
                    to_string(p.kda_state), state_per_layer / 1e6, e.predicted["tokens_per_kda_layer_state"],
                    kv_per_layer_token),
        fmt::format("per sequence: {} of state over {} KDA layers; {:.0f} B/token of KV in {} MLA layers vs {:.0f} "
                    "B/token if all {} layers were MLA",
                    gib(state_total), kda_layers, kv_hybrid, m.count_layers(AttentionKind::mla), kv_all_mla,
                    m.num_layers),
        fmt::format("memory break-even vs all-MLA: {:.0f} tokens; below it the hybrid holds more per sequence",
                    e.predicted["break_even_tokens_vs_all_mla"]),
        fmt::format("the state equals the hybrid's own KV at {:.0f} tokens: shorter requests are state-dominated",
                    e.predicted["state_equals_own_kv_tokens"]),
    };
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(StateBreakEvenEvaluator, "state_break_even");
}  // namespace k3
