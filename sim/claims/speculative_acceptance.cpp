// P9-style claims: tokens per step for named tasks. Acceptance is a property of the drafter and the
// text, so it is not derived here; what is checkable is its consistency with a measured speedup of
// the same system: the reference speedup (e.g. P8's tok/s pair) is inverted, under the modelled draft,
// verify and rollback costs, into the tokens per step it requires, and that is compared with the
// reported figure of the reference task. Every task's figure is also turned into the speedup and
// tok/s it implies. Alternatives: the other rollback kind, other contexts, lower collective latency.
#include "core/error.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/claims/spec_params.h"
#include "sim/collective_time.h"
#include "sim/spec/speculative.h"

#include <fmt/format.h>

#include <algorithm>

namespace k3 {
namespace {

class SpeculativeAcceptanceEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override {
    expect_params(c, scenario_param_keys(spec_param_keys({"batch", "context_tokens", "reference_baseline_tok_s",
                                                          "reference_speculative_tok_s", "reference_task",
                                                          "task_tokens_per_step", "alternative_context_tokens"})));
    const Phase phase =
        Phase::decode(param_count(c, "batch", 1, limit::batch), param_count(c, "context_tokens", 4096, limit::tokens));
    const Scenario s = claim_scenario(c, data, phase, "kimi-k3", "gb300-nvl72");
    const int g = claim_draft_tokens(c);
    const DrafterSpec drafter = claim_drafter(c);
    const RollbackKind rollback = claim_rollback(c);
    const double base_tok_s = param_double(c, "reference_baseline_tok_s", 0);
    const double spec_tok_s = param_double(c, "reference_speculative_tok_s", 0);
    if (!(base_tok_s > 0 && spec_tok_s > 0)) {
      throw InputError(
          fmt::format("{}: params.reference_baseline_tok_s and reference_speculative_tok_s are required "
                      "and positive",
                      c.file));
    }
    const std::string task = param_string(c, "reference_task", "coding");
    const double want = spec_tok_s / base_tok_s;

    auto required = [&](const Scenario& sc, const DrafterSpec& d, RollbackKind r) {
      return acceptance_for_speedup(sc, speculative_step_costs(sc, d, g), r, want);
    };
    Evaluation e;
    const SpecStepCosts costs = speculative_step_costs(s, drafter, g);
    const RequiredAcceptance need = acceptance_for_speedup(s, costs, rollback, want);
    e.predicted[task + "_tokens_per_step"] = need.tokens_per_step;
    e.breakdown.push_back(
        fmt::format("{} x{} (tp {}, ep {}), batch {}, context {}: decode {:.3f} ms; {} drafter {:.3f} ms "
                    "for {} tokens; verify {:.3f} ms; replay on rejection {:.3f} ms, copying states {:.3f} ms",
                    s.hardware.name, s.parallelism.gpus(), s.parallelism.tp, s.parallelism.ep, phase.batch,
                    phase.context_tokens, costs.decode_us / 1000, to_string(drafter.kind), costs.draft_us / 1000, g,
                    costs.verify_us / 1000, costs.replay_us / 1000, costs.copy_states_us / 1000));
    e.breakdown.push_back(
        need.attainable
            ? fmt::format(
                  "the reference {:.0f} -> {:.0f} tok/s ({:.2f}x) needs {:.2f} tokens per step (i.i.d. alpha {:.3f}); "
                  "compared with the reported {} figure",
                  base_tok_s, spec_tok_s, want, need.tokens_per_step, need.alpha, task)
            : fmt::format("the reference {:.2f}x is out of reach under these costs even at {} tokens per step", want,
                          g + 1));
    if (auto tasks = c.params->find("task_tokens_per_step")) {
      for (const std::string& name : tasks->keys()) {
        const double t = (*tasks)[name].as_positive();
        AcceptanceModel acc = AcceptanceModel::iid(0, g);
        try {
          acc = AcceptanceModel::iid(iid_alpha_for_tokens_per_step(t, g), g);
        } catch (const InputError& err) {
          (*tasks)[name].fail(err.what());
        }
        const SpecOutcome out = speculative_outcome(s, costs, acc, rollback);
        e.breakdown.push_back(
            fmt::format("{}: {:.2f} tokens per step (alpha {:.3f}, std {:.2f}, {:.0f}% of drafts accepted) "
                        "-> {:.0f} tok/s, speedup {:.2f}x",
                        name, t, iid_alpha_for_tokens_per_step(t, g), out.tokens_per_step_std,
                        100 * acc.draft_acceptance_rate(), out.tokens_per_s, out.speedup));
      }
    }
    const RollbackKind other_rb =
        rollback == RollbackKind::replay_inputs ? RollbackKind::copy_states : RollbackKind::replay_inputs;
    e.alternatives.push_back({fmt::format("with KDA rollback by {}", to_string(other_rb)),
                              {{task + "_tokens_per_step", required(s, drafter, other_rb).tokens_per_step}}});
    if (c.params->has("alternative_context_tokens")) {
      for (double ctx : param_list(c, "alternative_context_tokens")) {
        Scenario sc = s;
        sc.phase.context_tokens = static_cast<long long>(ctx);
        e.alternatives.push_back({fmt::format("at a {}-token context", sc.phase.context_tokens),
                                  {{task + "_tokens_per_step", required(sc, drafter, rollback).tokens_per_step}}});
      }
    }
    const int tp = std::max(2, s.parallelism.tp);
    const double modelled = collective_latency(s.hardware, CollectiveKind::all_reduce, tp).latency_us;
    for (double latency : {5.0, 10.0}) {
      if (latency >= modelled) continue;
      Scenario sc = s;
      sc.hardware.nvlink.set_flat_latency_us(latency);
      e.alternatives.push_back({fmt::format("with a flat {:.0f} us NVLink collective latency instead of the modelled "
                                            "{:.0f} us of a TP{} all-reduce",
                                            latency, modelled, tp),
                                {{task + "_tokens_per_step", required(sc, drafter, rollback).tokens_per_step}}});
    }
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(SpeculativeAcceptanceEvaluator, "speculative_acceptance");
}  // namespace k3
