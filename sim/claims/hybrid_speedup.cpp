// P5/P6-style claims: batch-1 speedup of the hybrid over the same model with every layer MLA,
// for decode (TPOT at a context) or prefill (TTFT of a prompt), at each listed context length.
// Alternatives: every shipped GPU type, and one term outside the roofline fitted to all reported
// points at once (a fixed time per decode step, or a time per prefilled token) — one number that
// must fit every point, so a figure with an inconsistent shape stays contradicted.
#include "core/hardware.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/predict.h"

#include <fmt/format.h>

#include <cmath>

namespace k3 {
namespace {

struct Point {
  long long tokens;
  double hybrid_ms, full_ms;
  const ReportedValue* reported;  // nullptr when the claim reports no value at this length
};

std::string key(long long tokens) { return fmt::format("speedup_at_{}", tokens); }

class HybridSpeedupEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    expect_params(c, scenario_param_keys({"phase", "context_tokens"}));
    const std::string phase_name = param_string(c, "phase", "decode");
    if (phase_name != "decode" && phase_name != "prefill") {
      (*c.params)["phase"].fail("expected decode or prefill");
    }
    const bool prefill = phase_name == "prefill";
    Evaluation e;
    std::vector<Point> points;
    std::vector<Scenario> bases;
    for (double ctx : param_list(c, "context_tokens")) {
      const long long tokens = static_cast<long long>(ctx);
      // Decode "at N tokens": N - 1 cached plus the one being generated.
      const Phase phase = prefill ? Phase::prefill(1, tokens, 0) : Phase::decode(1, tokens - 1);
      const Scenario hybrid = claim_scenario(c, data, phase, "kimi-linear-48b-a3b", "h100-sxm");
      const Scenario full = with_model(hybrid, with_all_attention(hybrid.model, AttentionKind::mla));
      const Prediction ph = predict(hybrid), pf = predict(full);
      const ReportedValue* reported = nullptr;
      for (const ReportedValue& r : c.reported) {
        if (r.key == key(tokens)) reported = &r;
      }
      points.push_back({tokens, ph.step_ms(), pf.step_ms(), reported});
      bases.push_back(hybrid);
      e.predicted[key(tokens)] = pf.step.step_us / ph.step.step_us;
      auto describe = [&](const char* label, const Prediction& p) {
        double attn_us = 0, bytes = 0, flops = 0;
        for (const GroupTotal& g : p.by_module()) {
          if (g.group == "mla" || g.group == "kda") attn_us += g.time_us;
          bytes += g.bytes;
          flops += g.flops;
        }
        return fmt::format("  {:<8} {:>12.3f} ms  (attention layers' mixers {:.3f} ms; {:.1f} GB moved, {:.2f} TFLOP)",
                           label, p.step_ms(), attn_us / 1000, bytes / 1e9, flops / 1e12);
      };
      e.breakdown.push_back(fmt::format("{} tokens, batch 1, {} x{} ({}): speedup {:.2f}x", tokens, hybrid.hardware.name,
                                        hybrid.parallelism.gpus(), prefill ? "prefill TTFT" : "decode TPOT",
                                        e.predicted[key(tokens)]));
      e.breakdown.push_back(describe("all-MLA", pf));
      e.breakdown.push_back(describe("hybrid", ph));
    }

    // Other GPUs, same layout.
    for (const std::string& name : list_hardware_names(data.hardware_dir)) {
      const Hardware hw = load_hardware(data.hardware_dir + "/" + name + ".yaml");
      if (hw.name == bases.front().hardware.name) continue;
      Alternative alt{fmt::format("on {} x{}", hw.name, bases.front().parallelism.gpus()), {}};
      for (std::size_t i = 0; i < bases.size(); ++i) {
        Scenario h = bases[i];
        h.hardware = hw;
        const Scenario f = with_model(h, with_all_attention(h.model, AttentionKind::mla));
        alt.predicted[key(points[i].tokens)] = predict(f).step.step_us / predict(h).step.step_us;
      }
      e.alternatives.push_back(alt);
    }

    // One extra term in both models, fitted to all reported points: x ms per decode step, or x ms per
    // 1,000 prefilled tokens. Least squares on the relative error, scanned over [0, 10 x the largest step].
    auto with_term = [&](const Point& p, double x) {
      const double scale = prefill ? p.tokens / 1000.0 : 1.0;
      return (p.full_ms + x * scale) / (p.hybrid_ms + x * scale);
    };
    double best_x = 0, best_err = INFINITY;
    double hi = 0;
    for (const Point& p : points) hi = std::max(hi, 10 * p.full_ms / (prefill ? p.tokens / 1000.0 : 1.0));
    for (int i = 0; i <= 20000; ++i) {
      const double x = hi * i / 20000.0;
      double err = 0;
      for (const Point& p : points) {
        if (p.reported && p.reported->value) err += std::pow(with_term(p, x) / *p.reported->value - 1.0, 2);
      }
      if (err < best_err) {
        best_err = err;
        best_x = x;
      }
    }
    Alternative fitted{
        prefill ? fmt::format("with {:.2f} ms per 1,000 prompt tokens of work outside this roofline in both models "
                              "(one value fitted to all reported points; e.g. non-attention layers far below their "
                              "assumed efficiency)",
                              best_x)
                : fmt::format("with {:.2f} ms per step outside this roofline in both models (one value fitted to all "
                              "reported points; e.g. host, launch or synchronisation time of the serving engine)",
                              best_x),
        {}};
    for (const Point& p : points) fitted.predicted[key(p.tokens)] = with_term(p, best_x);
    e.alternatives.push_back(fitted);
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(HybridSpeedupEvaluator, "hybrid_speedup");
}  // namespace k3
