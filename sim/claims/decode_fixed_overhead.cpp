// P20-style claims: at small batch a decode step is dominated by fixed costs — per-kernel launch or
// graph-replay time and the latency every collective call pays — rather than by bytes or FLOPs.
// Predicted: that fixed share of the step (percent), and what a host-side saving of
// (before_us - after_us) per step, e.g. a fused metadata builder, is worth in tokens/s.
// Alternatives: eager launches instead of CUDA graphs; batch 64.
#include "core/error.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/predict.h"

#include <fmt/format.h>

namespace k3 {
namespace {

struct Fixed {
  double step_us = 0, overhead_us = 0, latency_us = 0, bytes_us = 0;
  int kernels = 0, collective_calls = 0;
  double share_percent() const { return 100 * (overhead_us + latency_us) / step_us; }
};

Fixed fixed_costs(const Scenario& s) {
  const Prediction p = predict(s);
  Fixed f;
  f.step_us = p.step.step_us;
  for (std::size_t i = 0; i < p.graph.ops.size(); ++i) {
    const Op& op = p.graph.ops[i];
    const OpTime& t = p.step.ops[i];
    if (op.collective) {
      // The part of the call that does not depend on the bytes: its time at one byte.
      Op probe = op;
      probe.collective->bytes = probe.collective->calls;
      const double fixed = time_op(probe, s.hardware, s.runtime).communication_us;
      f.latency_us += std::min(fixed, t.exposed_us);
      f.collective_calls += op.collective->calls;
    } else {
      f.overhead_us += std::min(t.overhead_us, t.exposed_us);
      f.kernels += op.kernels;
    }
  }
  f.bytes_us = f.step_us - f.overhead_us - f.latency_us;
  return f;
}

class DecodeFixedOverheadEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    expect_params(c, scenario_param_keys({"batch", "context_tokens", "before_us", "after_us"}));
    const Phase phase = Phase::decode(param_count(c, "batch", 1), param_count(c, "context_tokens", 4096));
    const Scenario s = claim_scenario(c, data, phase, "kimi-k3", "gb300-nvl72");
    const double before = param_double(c, "before_us", 0), after = param_double(c, "after_us", 0);
    if (before < after || after < 0) {
      throw InputError(fmt::format("{}: params.before_us ({}) must be >= after_us ({}) >= 0", c.file, before, after));
    }
    const Fixed f = fixed_costs(s);
    Evaluation e;
    e.predicted["fixed_share_percent"] = f.share_percent();
    const double with_old = f.step_us + before, with_new = f.step_us + after;
    e.predicted["saving_percent"] = 100 * (with_old - with_new) / with_old;
    e.breakdown = {
        fmt::format("{} on {} x{} (tp {}, ep {}), batch {}, context {}, CUDA graphs {}", s.model.name, s.hardware.name,
                    s.parallelism.gpus(), s.parallelism.tp, s.parallelism.ep, phase.batch, phase.context_tokens,
                    s.runtime.cuda_graphs ? "on" : "off"),
        fmt::format(
            "step {:.3f} ms = {} kernels x fixed time {:.3f} ms + {} collective calls x latency {:.3f} ms + bytes "
            "and FLOPs {:.3f} ms: fixed share {:.0f}%",
            f.step_us / 1000, f.kernels, f.overhead_us / 1000, f.collective_calls, f.latency_us / 1000,
            f.bytes_us / 1000, f.share_percent()),
        fmt::format(
            "a per-step host/metadata cost of {:.0f} us -> {:.0f} us on top: {:.1f} -> {:.1f} tok/s per sequence "
            "({:.1f}% of the step saved)",
            before, after, 1e6 / with_old, 1e6 / with_new, e.predicted["saving_percent"]),
    };
    Scenario eager = s;
    eager.runtime.cuda_graphs = false;
    const Fixed fe = fixed_costs(eager);
    e.alternatives.push_back({"with eager kernel launches instead of CUDA graphs",
                              {{"fixed_share_percent", fe.share_percent()},
                               {"saving_percent", 100 * (before - after) / (fe.step_us + before)}}});
    Scenario big = s;
    big.phase.batch = 64;
    const Fixed fb = fixed_costs(big);
    e.alternatives.push_back({"at batch 64",
                              {{"fixed_share_percent", fb.share_percent()},
                               {"saving_percent", 100 * (before - after) / (fb.step_us + before)}}});
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(DecodeFixedOverheadEvaluator, "decode_fixed_overhead");
}  // namespace k3
