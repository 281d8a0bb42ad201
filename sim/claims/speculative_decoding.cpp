// P8-style claims: output tokens/s at a batch with and without speculative decoding, for each listed
// tensor-parallel size: the target's decode step (roofline + collectives), the drafter's own op graph,
// the verify phase and the KDA rollback (sim/spec/speculative.h), with the acceptance from params.
// The breakdown lists the speedup at whole tokens per step. Alternatives: other
// acceptances, the other drafter and rollback kinds, other contexts — each named, none fitted.
#include "core/error.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/claims/spec_params.h"
#include "sim/collective_time.h"
#include "sim/predict.h"
#include "sim/spec/speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace k3 {
namespace {

struct TpResult {
  int tp;
  Scenario scenario;
  SpecStepCosts costs;
  SpecOutcome outcome;
};

class SpeculativeDecodingEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override {
    expect_params(
        c, scenario_param_keys(spec_param_keys(
               {"batch", "context_tokens", "tp_list", "alternative_tokens_per_step", "alternative_context_tokens"})));
    const Phase phase =
        Phase::decode(param_count(c, "batch", 1, limit::batch), param_count(c, "context_tokens", 4096, limit::tokens));
    const Scenario base = claim_scenario(c, data, phase, "kimi-k3", "gb300-nvl72");
    const int g = claim_draft_tokens(c);
    const DrafterSpec drafter = claim_drafter(c);
    const RollbackKind rollback = claim_rollback(c);
    const AcceptanceModel acc = claim_acceptance(c, g);
    std::vector<double> tps = {double(base.parallelism.tp)};
    if (c.params && c.params->has("tp_list")) tps = param_list(c, "tp_list");

    Evaluation e;
    std::vector<TpResult> results;
    for (double tp_value : tps) {
      const int tp = static_cast<int>(tp_value);
      const std::optional<Scenario> s = on_hardware(base, base.hardware, tp);
      if (!s)
        throw InputError(
            fmt::format("{}: key 'params.tp_list': tp {} is not a valid layout for {}", c.file, tp, base.model.name));
      const SpecStepCosts costs = speculative_step_costs(*s, drafter, g);
      const SpecOutcome out = speculative_outcome(*s, costs, acc, rollback);
      results.push_back({tp, *s, costs, out});
      const std::string k = fmt::format("tp{}", tp);
      e.predicted[k + "_baseline_tok_s"] = out.baseline_tokens_per_s;
      e.predicted[k + "_speculative_tok_s"] = out.tokens_per_s;
      e.predicted[k + "_speedup"] = out.speedup;

      const Prediction p = predict(*s);
      double comm_us = 0;
      for (const GroupTotal& grp : p.by_module()) {
        if (grp.group == "comm") comm_us += grp.time_us;
      }
      e.breakdown.push_back(fmt::format(
          "TP{} ({} x{}, ep {}), batch {}, context {}: decode step {:.3f} ms -> {:.1f} tok/s "
          "(collectives {:.3f} ms = {:.0f}% of the step)",
          tp, s->hardware.name, s->parallelism.gpus(), s->parallelism.ep, phase.batch, phase.context_tokens,
          costs.decode_us / 1000, out.baseline_tokens_per_s, comm_us / 1000, 100 * comm_us / costs.decode_us));
      e.breakdown.push_back(
          fmt::format("  round: draft {:.3f} ms ({} drafter, {:.2f} B params, {} tokens) + verify {:.3f} ms "
                      "({} tokens/seq; experts touched per GPU {:.1f} vs {:.1f} at decode) + rollback "
                      "{:.3f} ms ({}) = {:.3f} ms",
                      costs.draft_us / 1000, to_string(drafter.kind), costs.drafter_params / 1e9, g,
                      costs.verify_us / 1000, g + 1, costs.verify_distinct_experts, costs.decode_distinct_experts,
                      out.rollback_us / 1000, to_string(rollback), out.round_us / 1000));
      e.breakdown.push_back(
          fmt::format("  acceptance {}: {:.2f} ± {:.2f} tokens per step -> {:.1f} tok/s, speedup {:.2f}x",
                      acc.describe(), out.tokens_per_step, out.tokens_per_step_std, out.tokens_per_s, out.speedup));
      // Tokens per step against speedup under these costs, at whole tokens per step (an enumeration, not
      // an inversion of the reported figure).
      std::string row;
      for (double t = 2; t <= g + 1; t += 1) {
        const SpecOutcome o =
            speculative_outcome(*s, costs, AcceptanceModel::iid(iid_alpha_for_tokens_per_step(t, g), g), rollback);
        row += fmt::format("{}{:.0f} -> {:.2f}x", row.empty() ? "" : ", ", t, o.speedup);
      }
      e.breakdown.push_back("  speedup by tokens per step under these costs: " + row);
    }
    if (results.size() >= 2) {
      const TpResult& a = results.front();
      const TpResult& b = results.back();
      e.breakdown.push_back(
          fmt::format("TP{} -> TP{}: baseline {:+.0f}%, speculative {:+.0f}%: the weights per GPU halve, but every "
                      "collective still "
                      "pays its fixed latency once per layer",
                      a.tp, b.tp, 100 * (b.outcome.baseline_tokens_per_s / a.outcome.baseline_tokens_per_s - 1),
                      100 * (b.outcome.tokens_per_s / a.outcome.tokens_per_s - 1)));
    }

    auto alternative = [&](const std::string& what, const AcceptanceModel& a, const DrafterSpec& d, RollbackKind r,
                           long long context) {
      Alternative alt{what, {}};
      for (const TpResult& t : results) {
        Scenario s = t.scenario;
        s.phase.context_tokens = context;
        const SpecStepCosts costs = (context == t.scenario.phase.context_tokens && d.kind == drafter.kind)
                                        ? t.costs
                                        : speculative_step_costs(s, d, g);
        const SpecOutcome out = speculative_outcome(s, costs, a, r);
        const std::string k = fmt::format("tp{}", t.tp);
        alt.predicted[k + "_baseline_tok_s"] = out.baseline_tokens_per_s;
        alt.predicted[k + "_speculative_tok_s"] = out.tokens_per_s;
        alt.predicted[k + "_speedup"] = out.speedup;
      }
      e.alternatives.push_back(alt);
    };
    if (c.params && c.params->has("alternative_tokens_per_step")) {
      for (double t : param_list(c, "alternative_tokens_per_step")) {
        alternative(fmt::format("with {:.2f} tokens per step", t),
                    AcceptanceModel::iid(iid_alpha_for_tokens_per_step(t, g), g), drafter, rollback,
                    phase.context_tokens);
      }
    }
    DrafterSpec other = drafter;
    other.kind =
        drafter.kind == DrafterKind::block_parallel ? DrafterKind::autoregressive : DrafterKind::block_parallel;
    alternative(fmt::format("with an {} drafter", to_string(other.kind)), acc, other, rollback, phase.context_tokens);
    const RollbackKind other_rb =
        rollback == RollbackKind::replay_inputs ? RollbackKind::copy_states : RollbackKind::replay_inputs;
    alternative(fmt::format("with KDA rollback by {}", to_string(other_rb)), acc, drafter, other_rb,
                phase.context_tokens);
    if (c.params && c.params->has("alternative_context_tokens")) {
      for (double ctx : param_list(c, "alternative_context_tokens")) {
        alternative(fmt::format("at a {}-token context", static_cast<long long>(ctx)), acc, drafter, rollback,
                    static_cast<long long>(ctx));
      }
    }
    // Collective latency is half the batch-1 step; shipped files may carry a stand-in value (docs/hardware.md).
    const int tp = std::max(2, base.parallelism.tp);
    const double modelled = collective_latency(base.hardware, CollectiveKind::all_reduce, tp).latency_us;
    for (double latency : {5.0, 10.0}) {
      if (latency >= modelled) continue;
      Alternative alt{fmt::format("with a flat {:.0f} us NVLink collective latency instead of the modelled {:.0f} us "
                                  "of a TP{} all-reduce (e.g. one-shot NVLink collectives)",
                                  latency, modelled, tp),
                      {}};
      for (const TpResult& t : results) {
        Scenario s = t.scenario;
        s.hardware.nvlink.set_flat_latency_us(latency);
        const SpecOutcome out = speculative_outcome(s, speculative_step_costs(s, drafter, g), acc, rollback);
        const std::string k = fmt::format("tp{}", t.tp);
        alt.predicted[k + "_baseline_tok_s"] = out.baseline_tokens_per_s;
        alt.predicted[k + "_speculative_tok_s"] = out.tokens_per_s;
        alt.predicted[k + "_speedup"] = out.speedup;
      }
      e.alternatives.push_back(alt);
    }
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(SpeculativeDecodingEvaluator, "speculative_decoding");
}  // namespace k3
