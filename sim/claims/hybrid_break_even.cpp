// P15-style claims on every side of the break-even: the memory facts of `state_break_even` (one KDA
// layer's state in tokens of KV) and, from sim/plan/breakeven.h on a deployment, the prompt length
// at which the hybrid starts to win on memory per request, TPOT, throughput at a memory budget and
// cost per token. Predicted: those lengths (0 when the hybrid wins from the shortest prompt) and the
// number of metrics on which the hybrid loses at the shortest prompt. No alternatives.
#include "core/error.h"
#include "sim/claims/claim.h"
#include "sim/plan/breakeven.h"

#include <fmt/format.h>

#include <filesystem>

namespace k3 {
namespace {

class HybridBreakEvenEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override {
    expect_params(c, {"model", "kda_state", "breakeven"});
    // The memory facts: the state_break_even evaluator on the same model and state dtype.
    ClaimInputs memory = c;
    YAML::Node params = YAML::Clone(c.params->raw());
    params.remove("breakeven");
    memory.params = YamlNode(params, c.file, "params");
    Evaluation e = ClaimEvaluators::instance().make("state_break_even")->evaluate(memory, data);

    const std::string ref = param_string(c, "breakeven", "");
    const std::filesystem::path file = std::filesystem::path(c.file).parent_path() / ref;
    if (ref.empty() || !std::filesystem::is_regular_file(file)) {
      throw InputError(fmt::format(
          "{}: key 'params.breakeven': expected a break-even file relative to the claim, got '{}'", c.file, ref));
    }
    const BreakevenResult r = solve_breakeven(load_breakeven_spec(file.string(), data));
    int losing_short = 0;
    e.breakdown.push_back(
        fmt::format("on {} x{}, prompts {}..{} tokens, answer {}, batch {}:", r.spec.deployment.hardware.name,
                    r.spec.deployment.parallelism.gpus(), r.spec.min_input_tokens, r.spec.max_input_tokens,
                    r.spec.output_tokens, r.spec.batch));
    for (const MetricCurve& curve : r.curves) {
      long long wins_from = curve.hybrid_wins_at_min ? 0 : -1;
      for (const Crossing& x : curve.crossings) {
        if (x.hybrid_wins_above)
          wins_from = x.input_tokens;
        else
          wins_from = -1;
      }
      losing_short += curve.hybrid_wins_at_min ? 0 : 1;
      e.predicted[to_string(curve.metric) + "_break_even_tokens"] =
          wins_from < 0 ? double(r.spec.max_input_tokens + 1) : double(wins_from);
      e.breakdown.push_back(fmt::format(
          "  {:<24} hybrid/all-MLA {:.3g}/{:.3g} {} at {} tokens, {:.3g}/{:.3g} at {}: {}", to_string(curve.metric),
          curve.values.front().hybrid, curve.values.front().all_mla, unit_of(curve.metric), curve.input_tokens.front(),
          curve.values.back().hybrid, curve.values.back().all_mla, curve.input_tokens.back(),
          (wins_from == 0  ? std::string("the hybrid wins at every length")
           : wins_from < 0 ? std::string("the hybrid does not win at the longest length compared")
                           : fmt::format("the hybrid wins from {} prompt tokens", wins_from)) +
              (curve.longest_comparable_tokens > 0
                   ? fmt::format(" (neither model fits a request above {} tokens)", curve.longest_comparable_tokens)
                   : std::string())));
    }
    e.predicted["metrics_lost_at_shortest_prompt"] = losing_short;
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(HybridBreakEvenEvaluator, "hybrid_break_even");
}  // namespace k3
