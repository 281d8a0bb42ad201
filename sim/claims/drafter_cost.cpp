// P10-style claims: how the drafter's time grows with the draft length, for a block-parallel drafter
// (one pass over the block) and an autoregressive one (one step per token), both from the drafter's
// op graph on the claim's GPUs. Predicted: each drafter's time at the longest draft over its time at
// one token, and the autoregressive growth per added token relative to one step. Alternative: batch 64.
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/claims/spec_params.h"
#include "sim/spec/speculative.h"

#include <fmt/format.h>

namespace k3 {
namespace {

struct Growth {
  double block_ratio = 0, ar_ratio = 0;
  std::vector<std::string> lines;
};

Growth growth(const Scenario& s, DrafterSpec d, int longest) {
  Growth out;
  DrafterSpec block = d, ar = d;
  block.kind = DrafterKind::block_parallel;
  ar.kind = DrafterKind::autoregressive;
  const double b1 = draft_time_us(s, block, 1), a1 = draft_time_us(s, ar, 1);
  std::string row_b, row_a;
  for (int g = 1; g <= longest; ++g) {
    const double b = draft_time_us(s, block, g), a = draft_time_us(s, ar, g);
    row_b += fmt::format(" {:.0f}", b);
    row_a += fmt::format(" {:.0f}", a);
    if (g == longest) {
      out.block_ratio = b / b1;
      out.ar_ratio = a / a1;
    }
  }
  out.lines.push_back(fmt::format("drafter {} layers, MLP {}, batch {}, context {} on {} x{} (tp {})", d.layers,
                                  d.mlp_intermediate, s.phase.batch, s.phase.context_tokens, s.hardware.name,
                                  s.parallelism.gpus(), s.parallelism.tp));
  out.lines.push_back("block-parallel time (us) for 1.." + std::to_string(longest) + " tokens:" + row_b);
  out.lines.push_back("autoregressive time (us) for 1.." + std::to_string(longest) + " tokens:" + row_a);
  out.lines.push_back(
      fmt::format("growth 1 -> {} tokens: block-parallel {:.2f}x (weights read once; attention and "
                  "activations grow), autoregressive {:.2f}x (one full pass per token)",
                  longest, out.block_ratio, out.ar_ratio));
  return out;
}

class DrafterCostEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override {
    expect_params(c, scenario_param_keys(spec_param_keys({"batch", "context_tokens"})));
    const Phase phase =
        Phase::decode(param_count(c, "batch", 1, limit::batch), param_count(c, "context_tokens", 4096, limit::tokens));
    const Scenario s = claim_scenario(c, data, phase, "kimi-k3", "gb300-nvl72");
    const int longest = claim_draft_tokens(c);
    const DrafterSpec d = claim_drafter(c);
    const Growth main = growth(s, d, longest);
    Evaluation e;
    e.predicted["block_parallel_growth"] = main.block_ratio;
    e.predicted["autoregressive_growth_per_token"] = main.ar_ratio / longest;
    e.breakdown = main.lines;
    Scenario big = s;
    big.phase.batch = 64;
    const Growth alt = growth(big, d, longest);
    e.alternatives.push_back(
        {"at batch 64",
         {{"block_parallel_growth", alt.block_ratio}, {"autoregressive_growth_per_token", alt.ar_ratio / longest}}});
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(DrafterCostEvaluator, "drafter_cost");
}  // namespace k3
