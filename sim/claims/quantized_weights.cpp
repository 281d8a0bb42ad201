// P19-style claims: a quantised checkpoint's size and its decode speedup over a baseline
// checkpoint of the same architecture (both from their published quantization_config).
// Alternatives: other decode batches, and a bf16 baseline instead of the published one.
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/memory.h"
#include "sim/predict.h"

#include <fmt/format.h>

namespace k3 {
namespace {

double step_bytes(const Prediction& p) {
  double s = 0;
  for (const Op& op : p.graph.ops) s += op.bytes();
  return s;
}

class QuantizedWeightsEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    expect_params(c, scenario_param_keys({"baseline_model", "batch", "context_tokens"}));
    const Phase phase = Phase::decode(param_count(c, "batch", 1), param_count(c, "context_tokens", 4096));
    const Scenario q = claim_scenario(c, data, phase, "kimi-k2-thinking", "h200-sxm");
    Scenario b = q;
    b.model = load_model_config_by_name(param_string(c, "baseline_model", "kimi-k2"), data.models_dir);
    b.precision.weights = b.model.quantize_attention_and_dense ? b.model.weight_format : StorageFormat::bf16;
    b.precision.routed_experts = b.model.routed_expert_format;
    validate(b);
    const double size_q = weight_bytes(q.model, q.precision), size_b = weight_bytes(b.model, b.precision);
    const Prediction pq = predict(q), pb = predict(b);
    Evaluation e;
    e.predicted["model_size_gb"] = size_q / 1e9;
    e.predicted["speedup"] = pb.step.step_us / pq.step.step_us;
    e.breakdown = {
        fmt::format("{}: routed experts {} ({:.3f} bits/weight incl. scales), other linear layers {} -> {:.1f} GB",
                    q.model.name, to_string(q.precision.routed_experts), bits_per_element(q.precision.routed_experts),
                    to_string(q.precision.weights), size_q / 1e9),
        fmt::format("{}: routed experts {}, other linear layers {} -> {:.1f} GB", b.model.name,
                    to_string(b.precision.routed_experts), to_string(b.precision.weights), size_b / 1e9),
        fmt::format("decode batch {} at {} tokens on {} x{}: {:.3f} ms vs {:.3f} ms -> {:.2f}x ({:.1f} vs {:.1f} GB "
                    "moved per GPU per step)",
                    phase.batch, phase.context_tokens, q.hardware.name, q.parallelism.gpus(), pq.step_ms(),
                    pb.step_ms(), e.predicted["speedup"], step_bytes(pq) / 1e9, step_bytes(pb) / 1e9),
        "quantising the experts shrinks only the expert bytes: attention, shared expert and fixed costs stay",
    };
    Scenario b16 = b;
    b16.precision.weights = StorageFormat::bf16;
    b16.precision.routed_experts = StorageFormat::bf16;
    for (const bool bf16_baseline : {false, true}) {
      for (long long batch : {1LL, 8LL, 16LL, 32LL, 64LL, 128LL, 256LL, 512LL}) {
        if (!bf16_baseline && batch == phase.batch) continue;
        Scenario qa = q, ba = bf16_baseline ? b16 : b;
        qa.phase.batch = ba.phase.batch = batch;
        const double speedup = predict(ba).step.step_us / predict(qa).step.step_us;
        e.alternatives.push_back(
            {fmt::format("at decode batch {} against {}", batch,
                         bf16_baseline ? "an all-bf16 checkpoint" : "the published " + b.model.name + " checkpoint"),
             {{"speedup", speedup}}});
      }
    }
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(QuantizedWeightsEvaluator, "quantized_weights");
}  // namespace k3
