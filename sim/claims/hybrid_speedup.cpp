// P5/P6-style claims: batch-1 speedup of the hybrid over the same model with every layer MLA,
// for decode (TPOT at a context) or prefill (TTFT of a prompt), at each listed context length.
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/predict.h"

#include <fmt/format.h>

namespace k3 {
namespace {

class HybridSpeedupEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    const bool prefill = param_string(c, "phase", "decode") == "prefill";
    Evaluation e;
    std::string gaps;
    for (double ctx : param_list(c, "context_tokens")) {
      const long long tokens = static_cast<long long>(ctx);
      // Decode "at N tokens": N - 1 cached plus the one being generated.
      const Phase phase = prefill ? Phase::prefill(1, tokens, 0) : Phase::decode(1, tokens - 1);
      const Scenario hybrid = claim_scenario(c, data, phase, "kimi-linear-48b-a3b", "h100-sxm");
      const Scenario full = with_model(hybrid, with_all_attention(hybrid.model, AttentionKind::mla));
      const Prediction ph = predict(hybrid), pf = predict(full);
      const double speedup = pf.step.step_us / ph.step.step_us;
      e.predicted[fmt::format("speedup_at_{}", tokens)] = speedup;
      auto describe = [&](const char* label, const Prediction& p) {
        double attn_us = 0, bytes = 0, flops = 0;
        for (const GroupTotal& g : p.by_module()) {
          if (g.group == "mla" || g.group == "kda") attn_us += g.time_us;
          bytes += g.bytes;
          flops += g.flops;
        }
        return fmt::format("  {:<8} {:>10.3f} ms  (attention mixers {:.3f} ms; {:.1f} GB moved, {:.2f} TFLOP)", label,
                           p.step_ms(), attn_us / 1000, bytes / 1e9, flops / 1e12);
      };
      e.breakdown.push_back(fmt::format("{} tokens, batch 1, {} x{} ({}): speedup {:.2f}x", tokens,
                                        hybrid.hardware.name, hybrid.parallelism.gpus(),
                                        prefill ? "prefill TTFT" : "decode TPOT", speedup));
      e.breakdown.push_back(describe("all-MLA", pf));
      e.breakdown.push_back(describe("hybrid", ph));
      // Claim inversion: how far from this roofline either side must be for the reported ratio.
      for (const ReportedValue& r : c.reported) {
        if (r.key != fmt::format("speedup_at_{}", tokens) || !r.value || r.accepts(speedup)) continue;
        const double hybrid_extra_ms = pf.step_ms() / *r.value - ph.step_ms();
        const double mla_faster_ms = pf.step_ms() - *r.value * ph.step_ms();
        gaps += fmt::format("{}at {} tokens the reported {:.2f}x needs the hybrid {:.1f} ms ({:+.0f}%) slower, or the "
                            "all-MLA model {:.1f} ms ({:+.0f}%) faster, than this roofline",
                            gaps.empty() ? "" : "; ", tokens, *r.value, hybrid_extra_ms,
                            100 * hybrid_extra_ms / ph.step_ms(), mla_faster_ms, -100 * mla_faster_ms / pf.step_ms());
      }
    }
    if (!gaps.empty()) {
      e.explanation = fmt::format(
          "{} at batch 1 is {}-bound and the MLA layers' {} dominate; {}. The figure names no GPU or kernel "
          "efficiencies, so a KDA kernel below the assumed efficiency or a faster MLA kernel is the likely term",
          prefill ? "prefill" : "decode", prefill ? "compute" : "memory",
          prefill ? "quadratic attention FLOPs" : "KV bytes", gaps);
    }
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(HybridSpeedupEvaluator, "hybrid_speedup");
}  // namespace k3
