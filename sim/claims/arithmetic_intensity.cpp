// P18-style claims: arithmetic intensity of decode attention versus the GPU's ridge point.
// K3 has two decode attentions: the KDA recurrent step and the absorbed MLA over the latent
// cache; the MHA form of MLA (keys and values expanded per head) is shown for comparison.
// Alternatives: each reading of "decode attention" against the ridge of each compute type the
// GPU lists.
#include "core/op_graph.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"

#include <fmt/format.h>

namespace k3 {
namespace {

class ArithmeticIntensityEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    expect_params(c, scenario_param_keys({"batch", "context_tokens"}));
    const Phase phase = Phase::decode(param_count(c, "batch", 1), param_count(c, "context_tokens", 131072));
    const Scenario s = claim_scenario(c, data, phase, "kimi-k3", "h100-sxm");
    const OpGraph g = build_op_graph(s.model, s.phase, s.parallelism, s.precision);
    double kda_flops = 0, kda_bytes = 0, mla_flops = 0, mla_bytes = 0;
    for (const Op& op : g.ops) {
      if (op.kind == OpKind::kda_recurrent) {
        kda_flops += op.flops;
        kda_bytes += op.bytes();
      } else if (op.kind == OpKind::mla_attention) {
        mla_flops += op.flops;
        mla_bytes += op.bytes();
      }
    }
    // MHA form, per cached token and head: 2·(qk + v) FLOP over (qk + v) bf16 values of key and value.
    const MlaSpec& a = s.model.mla;
    const double mha = 2.0 * (a.qk_head_dim() + a.v_head_dim) / ((a.qk_head_dim() + a.v_head_dim) * 2.0);
    const double kda_ai = kda_bytes > 0 ? kda_flops / kda_bytes : 0;
    const double mla_ai = mla_bytes > 0 ? mla_flops / mla_bytes : 0;
    const double all_ai = (kda_bytes + mla_bytes) > 0 ? (kda_flops + mla_flops) / (kda_bytes + mla_bytes) : 0;
    const double ridge = s.hardware.ridge_flops_per_byte(ComputeType::bf16);
    Evaluation e;
    e.predicted["kda_decode_intensity"] = kda_ai;
    e.predicted["mla_absorbed_decode_intensity"] = mla_ai;
    e.predicted["mha_decode_intensity"] = mha;
    e.predicted["decode_attention_intensity"] = all_ai;
    e.predicted["ridge_flops_per_byte"] = ridge;
    e.breakdown = {
        fmt::format("{} decode, batch {}, context {}, tp {}:", s.model.name, phase.batch, phase.context_tokens,
                    s.parallelism.tp),
        fmt::format("  KDA recurrent step ({} state): {:.2f} FLOP/B", to_string(s.precision.kda_state), kda_ai),
        fmt::format("  MLA absorbed over the {}-value latent, {} heads per GPU sharing it: {:.1f} FLOP/B",
                    a.cache_values_per_token(), a.num_heads / s.parallelism.tp, mla_ai),
        fmt::format("  MLA in MHA form (per-head bf16 keys and values): {:.2f} FLOP/B", mha),
        fmt::format("  all decode attention of the model together: {:.1f} FLOP/B", all_ai),
    };
    std::string ridges;
    for (const auto& [type, rate] : s.hardware.peak_flops_per_s) {
      ridges += fmt::format("{}{} {:.0f}", ridges.empty() ? "" : ", ", to_string(type),
                            s.hardware.ridge_flops_per_byte(type));
    }
    e.breakdown.push_back(fmt::format("{} ridge points (dense peak / HBM bandwidth, FLOP/B): {}", s.hardware.name, ridges));
    const std::pair<const char*, double> readings[] = {{"the KDA recurrent step", kda_ai},
                                                       {"MHA-form attention", mha},
                                                       {"absorbed MLA", mla_ai},
                                                       {"all decode attention", all_ai}};
    for (const auto& [what, ai] : readings) {
      for (const auto& [type, rate] : s.hardware.peak_flops_per_s) {
        e.alternatives.push_back(
            {fmt::format("reading decode attention as {} and the ridge at the {} peak", what, to_string(type)),
             {{"decode_attention_intensity", ai}, {"ridge_flops_per_byte", s.hardware.ridge_flops_per_byte(type)}}});
      }
    }
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(ArithmeticIntensityEvaluator, "arithmetic_intensity");
}  // namespace k3
