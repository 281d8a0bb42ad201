// P1-style claims: total and active parameter counts from the config.
#include "core/parameters.h"
#include "sim/claims/claim.h"

#include <fmt/format.h>

namespace k3 {
namespace {

class ParameterCountsEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    expect_params(c, {"model"});
    const ModelConfig m = load_model_config_by_name(param_string(c, "model", "kimi-k3"), data.models_dir);
    const ParameterCounts p = count_parameters(m);
    Evaluation e;
    e.predicted["total_params"] = double(p.total());
    e.predicted["active_params"] = double(p.active_per_token);
    e.breakdown = {
        fmt::format("total {} = embedding {} + lm_head {} + KDA layers {} + MLA layers {} + dense MLP {} + "
                    "routed experts {} + other MoE {} + norms/AttnRes {}",
                    p.total(), p.embedding, p.lm_head, p.attention_kda, p.attention_mla, p.dense_mlp,
                    p.moe_routed, p.moe_non_routed, p.norms),
        fmt::format("active per token (without the input embedding) {} = {:.2f} B", p.active_per_token,
                    p.active_per_token / 1e9),
        fmt::format("routed experts are {:.1f}% of all parameters", 100.0 * p.moe_routed / p.total()),
    };
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(ParameterCountsEvaluator, "parameter_counts");
}  // namespace k3
