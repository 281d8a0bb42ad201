// P19-style claims: a quantised checkpoint's size and its decode speedup over a baseline
// checkpoint of the same architecture (both from their published quantization_config).
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/memory.h"
#include "sim/predict.h"

#include <fmt/format.h>

namespace k3 {
namespace {

class QuantizedWeightsEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const Claim& c, const DataPaths& data) const override {
    const Phase phase = Phase::decode(static_cast<long long>(param_double(c, "batch", 1)),
                                      static_cast<long long>(param_double(c, "context_tokens", 4096)));
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
    Scenario q1 = q, b1 = b;
    q1.phase.batch = b1.phase.batch = 1;
    const double speedup_batch1 = predict(b1).step.step_us / predict(q1).step.step_us;
    e.breakdown = {
        fmt::format("{}: routed experts {} ({:.3f} bits/weight incl. scales), other linear layers {} -> {:.1f} GB",
                    q.model.name, to_string(q.precision.routed_experts), bits_per_element(q.precision.routed_experts),
                    to_string(q.precision.weights), size_q / 1e9),
        fmt::format("{}: routed experts {}, other linear layers {} -> {:.1f} GB", b.model.name,
                    to_string(b.precision.routed_experts), to_string(b.precision.weights), size_b / 1e9),
        fmt::format("decode batch {} at {} tokens on {} x{}: {:.3f} ms vs {:.3f} ms -> {:.2f}x", phase.batch,
                    phase.context_tokens, q.hardware.name, q.parallelism.gpus(), pq.step_ms(), pb.step_ms(),
                    e.predicted["speedup"]),
        fmt::format("at batch 1 (few experts touched per GPU, attention weights dominate): {:.2f}x", speedup_batch1),
    };
    e.explanation = fmt::format(
        "decode is memory-bound, so the gain follows the bytes per step ({:.1f} GB vs {:.1f} GB per GPU); the bf16 "
        "attention, shared expert and fixed costs are not shrunk by quantising the experts",
        [&] { double s = 0; for (const Op& op : pq.graph.ops) s += op.bytes(); return s / 1e9; }(),
        [&] { double s = 0; for (const Op& op : pb.graph.ops) s += op.bytes(); return s / 1e9; }());
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(QuantizedWeightsEvaluator, "quantized_weights");
}  // namespace k3
