// P16-style claims: decode latency added by Block Attention Residuals, from the op costs of the
// mixers, compared with the same model and deployment using a plain residual.
#include "core/error.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/predict.h"

#include <fmt/format.h>

namespace k3 {
namespace {

class AttnResOverheadEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    expect_params(c, scenario_param_keys({"batch", "context_tokens"}));
    const Phase phase = Phase::decode(param_count(c, "batch", 1), param_count(c, "context_tokens", 131072));
    const Scenario with = claim_scenario(c, data, phase, "kimi-k3", "h200-sxm");
    if (with.model.residual != ResidualKind::block_attnres) {
      throw InputError(fmt::format("{}: model '{}' has no Block AttnRes", c.file, with.model.name));
    }
    const Scenario without = with_model(with, without_attnres(with.model));
    const Prediction pw = predict(with), po = predict(without);
    Evaluation e;
    e.predicted["overhead_percent"] = 100.0 * (pw.step.step_us / po.step.step_us - 1.0);
    int mixers = 0;
    double bytes = 0;
    for (const Op& op : pw.graph.ops) {
      if (op.kind == OpKind::attnres_mix) {
        ++mixers;
        bytes += op.bytes();
      }
    }
    const double mix_us = pw.time_us_matching("attnres");
    e.breakdown = {
        fmt::format("{} on {} x{} (tp {}, ep {}, attention_dp {}), batch {}, context {}, CUDA graphs {}",
                    with.model.name, with.hardware.name, with.parallelism.gpus(), with.parallelism.tp,
                    with.parallelism.ep, with.parallelism.attention_dp, phase.batch, phase.context_tokens,
                    with.runtime.cuda_graphs ? "on" : "off"),
        fmt::format("{} mixers per step move {:.2f} MB and take {:.1f} us (launch overhead included)", mixers,
                    bytes / 1e6, mix_us),
        fmt::format("step {:.3f} ms with AttnRes vs {:.3f} ms with a plain residual: +{:.2f}%", pw.step_ms(),
                    po.step_ms(), e.predicted["overhead_percent"]),
    };
    Scenario eager = with;
    eager.runtime.cuda_graphs = false;
    Scenario eager_plain = without;
    eager_plain.runtime.cuda_graphs = false;
    const double eager_pct = 100.0 * (predict(eager).step.step_us / predict(eager_plain).step.step_us - 1.0);
    e.breakdown.push_back(fmt::format("the mixers' bytes are small; their cost is mostly per-kernel fixed time ({} "
                                      "kernels per step)", mixers));
    e.alternatives.push_back({"with eager kernel launches instead of CUDA graphs", {{"overhead_percent", eager_pct}}});
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(AttnResOverheadEvaluator, "attnres_overhead");
}  // namespace k3
