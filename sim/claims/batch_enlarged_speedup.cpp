// P4/P7-style claims: "N x faster decode" of a hybrid versus all-MLA. Separates the terms:
// the Amdahl bound on the KV term (layers / MLA layers), the batch-1 TPOT ratio, and the ratio of
// per-GPU decode throughput when each model runs the largest batch its memory allows.
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/memory.h"
#include "sim/predict.h"

#include <fmt/format.h>

namespace k3 {
namespace {

class BatchEnlargedSpeedupEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    const long long ctx = static_cast<long long>(param_double(c, "context_tokens", 1048576));
    // Decode "at N tokens": N - 1 cached plus the one being generated.
    const Scenario hybrid = claim_scenario(c, data, Phase::decode(1, ctx - 1), "kimi-linear-48b-a3b", "h200-sxm");
    const Scenario full = with_model(hybrid, with_all_attention(hybrid.model, AttentionKind::mla));
    const ModelConfig& m = hybrid.model;
    Evaluation e;
    const double amdahl = double(m.num_layers) / m.count_layers(AttentionKind::mla);
    e.predicted["amdahl_bound"] = amdahl;
    const double batch1 = predict(full).step.step_us / predict(hybrid).step.step_us;
    e.predicted["batch1_speedup"] = batch1;

    const long long bh = max_batch(hybrid, ctx - 1), bf = max_batch(full, ctx - 1);
    e.breakdown.push_back(fmt::format("Amdahl: if only the KV term shrinks, {} of {} layers keep KV -> at most {:.2f}x",
                                      m.count_layers(AttentionKind::mla), m.num_layers, amdahl));
    e.breakdown.push_back(fmt::format("batch 1 at {} tokens on {} x{}: TPOT ratio {:.2f}x (weights are read by both)",
                                      ctx, hybrid.hardware.name, hybrid.parallelism.gpus(), batch1));
    e.breakdown.push_back(fmt::format("largest batch that fits at {} tokens: all-MLA {}, hybrid {}", ctx, bf, bh));
    if (bh == 0 || bf == 0) {
      e.predicted["speedup"] = 0;
      e.explanation = fmt::format("on {} x{} {} fits no sequence of {} tokens, so the batch-enlarged figure cannot be "
                                  "formed there; choose more GPUs in the claim's params",
                                  hybrid.hardware.name, hybrid.parallelism.gpus(), bf == 0 ? "all-MLA" : "the hybrid", ctx);
      return e;
    }
    Scenario sh = hybrid, sf = full;
    sh.phase.batch = bh;
    sf.phase.batch = bf;
    const Prediction ph = predict(sh), pf = predict(sf);
    const double enlarged = ph.tokens_per_s() / pf.tokens_per_s();
    e.predicted["speedup"] = enlarged;
    e.breakdown.push_back(fmt::format("at those batches: all-MLA TPOT {:.2f} ms -> {:.1f} tok/s; hybrid TPOT {:.2f} ms "
                                      "-> {:.1f} tok/s; throughput ratio {:.2f}x (per-token time {:.2f} vs {:.2f} ms)",
                                      pf.step_ms(), pf.tokens_per_s(), ph.step_ms(), ph.tokens_per_s(), enlarged,
                                      1000.0 / pf.tokens_per_s(), 1000.0 / ph.tokens_per_s()));
    e.explanation = fmt::format(
        "the Amdahl bound ({:.2f}x) holds for latency at a fixed batch (predicted {:.2f}x at batch 1); a figure above it "
        "is a throughput ratio: the hybrid's smaller per-sequence memory admits {}x the batch, and each step "
        "amortises the weights over more tokens (predicted {:.2f}x on {} x{})",
        amdahl, batch1, bf > 0 ? fmt::format("{:.1f}", double(bh) / bf) : "inf", enlarged, hybrid.hardware.name,
        hybrid.parallelism.gpus());
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(BatchEnlargedSpeedupEvaluator, "batch_enlarged_speedup");
}  // namespace k3
