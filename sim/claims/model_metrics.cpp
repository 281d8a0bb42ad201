// Metrics on the model and its per-sequence memory (docs/verify.md#metrics): parameter counts,
// checkpoint size, KV cache and KDA state, the Amdahl bound of a hybrid, and arithmetic intensity
// against the GPU's ridge point. Each is one class ending in K3PERF_REGISTER_CLAIM_METRIC.
#include "core/op_graph.h"
#include "core/parameters.h"
#include "sim/claims/claim_scenario.h"
#include "sim/claims/scenario_metric.h"
#include "sim/memory.h"

#include <fmt/format.h>

namespace k3 {
namespace {

constexpr double kGiB = double(1ull << 30);

class TotalParams : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override {
    return double(count_parameters(in.scenario(of()).model).total());
  }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    const ParameterCounts p = count_parameters(in.scenario(of()).model);
    return {fmt::format("total {} = embedding {} + lm_head {} + KDA layers {} + MLA layers {} + dense MLP {} + "
                        "routed experts {} + other MoE {} + norms/AttnRes {}",
                        p.total(), p.embedding, p.lm_head, p.attention_kda, p.attention_mla, p.dense_mlp, p.moe_routed,
                        p.moe_non_routed, p.norms),
            fmt::format("routed experts are {:.1f}% of all parameters", 100.0 * p.moe_routed / p.total())};
  }
};
K3PERF_REGISTER_CLAIM_METRIC(TotalParams, "total_params");

// Parameters one token reads, without the input embedding.
class ActiveParams : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override {
    return double(count_parameters(in.scenario(of()).model).active_per_token);
  }
};
K3PERF_REGISTER_CLAIM_METRIC(ActiveParams, "active_params");

// The whole checkpoint at the scenario's storage formats, in decimal GB.
class WeightGb : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override {
    const Scenario& s = in.scenario(of());
    return weight_bytes(s.model, s.precision) / 1e9;
  }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    const Scenario& s = in.scenario(of());
    return {fmt::format("{}: routed experts {} ({:.3f} bits/weight incl. scales), other linear layers {} -> {:.1f} GB",
                        s.model.name, to_string(s.precision.routed_experts),
                        bits_per_element(s.precision.routed_experts), to_string(s.precision.weights),
                        weight_bytes(s.model, s.precision) / 1e9)};
  }
};
K3PERF_REGISTER_CLAIM_METRIC(WeightGb, "weight_gb");

// One sequence's MLA KV after the step (context + new tokens) and, unless include_state is false,
// its KDA recurrent and conv state.
struct KvState {
  double kv = 0, state = 0;
};

KvState kv_state(const Scenario& s) {
  const double tokens = double(s.phase.context_tokens + s.phase.new_tokens);
  return {kv_bytes_per_token(s.model, s.precision) * tokens,
          kda_recurrent_state_bytes(s.model, s.precision) + kda_conv_state_bytes(s.model, s.precision)};
}

class KvStateGib : public OneScenarioMetric {
 public:
  explicit KvStateGib(const Params& p)
      : OneScenarioMetric(p), include_state_(p.param<bool>("include_state").default_val(true)) {}
  double value(const MetricInputs& in) const override {
    const KvState k = kv_state(in.scenario(of()));
    return (include_state_ ? k.kv + k.state : k.kv) / kGiB;
  }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    const Scenario& s = in.scenario(of());
    const KvState k = kv_state(s);
    const int mla = s.model.count_layers(AttentionKind::mla);
    return {fmt::format("{}: {} MLA layers x {:.0f} B/token/layer x {} tokens = {}{}", s.model.name, mla,
                        kv_bytes_per_token(s.model, s.precision) / std::max(1, mla),
                        s.phase.context_tokens + s.phase.new_tokens, gib(k.kv),
                        k.state > 0 && include_state_
                            ? fmt::format(", + KDA recurrent and conv state ({}) {} = {}",
                                          to_string(s.precision.kda_state), gib(k.state), gib(k.kv + k.state))
                            : std::string())};
  }

 private:
  bool include_state_;
};
K3PERF_REGISTER_CLAIM_METRIC(KvStateGib, "kv_state_gib");

// How much less KV (and state) one sequence of the subject holds than one of the baseline, in percent.
class KvStateReductionPercent : public ClaimMetric {
 public:
  explicit KvStateReductionPercent(const Params& p)
      : include_state_(p.param<bool>("include_state").default_val(true)) {}
  double value(const MetricInputs& in) const override {
    const KvState s = kv_state(in.subject()), b = kv_state(in.baseline());
    return include_state_ ? 100.0 * (1.0 - (s.kv + s.state) / (b.kv + b.state)) : 100.0 * (1.0 - s.kv / b.kv);
  }

 private:
  bool include_state_;
};
K3PERF_REGISTER_CLAIM_METRIC(KvStateReductionPercent, "kv_state_reduction_percent");

// The share of layers that keep no KV (the reduction from the layer ratio alone), in percent.
class KvLayerReductionPercent : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override {
    const ModelConfig& m = in.scenario(of()).model;
    return 100.0 * (1.0 - double(m.count_layers(AttentionKind::mla)) / m.num_layers);
  }
};
K3PERF_REGISTER_CLAIM_METRIC(KvLayerReductionPercent, "kv_layer_reduction_percent");

// Layers over MLA layers: the most a hybrid can gain when only the KV term shrinks.
class AmdahlBound : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override {
    const ModelConfig& m = in.scenario(of()).model;
    return double(m.num_layers) / m.count_layers(AttentionKind::mla);
  }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    const ModelConfig& m = in.scenario(of()).model;
    return {fmt::format("if only the KV term shrinks, {} of {} layers keep KV -> at most {:.2f}x",
                        m.count_layers(AttentionKind::mla), m.num_layers, value(in))};
  }
};
K3PERF_REGISTER_CLAIM_METRIC(AmdahlBound, "amdahl_bound");

// FLOP per byte of the step's attention ops: `ops` kda (the recurrent step), mla (absorbed MLA over
// the latent cache) or all (both together).
class AttentionIntensity : public OneScenarioMetric {
 public:
  explicit AttentionIntensity(const Params& p)
      : OneScenarioMetric(p), ops_(p.param<std::string>("ops").default_val("all")) {
    if (ops_ != "kda" && ops_ != "mla" && ops_ != "all") p.fail("ops", "expected kda, mla or all");
  }
  double value(const MetricInputs& in) const override {
    const Scenario& s = in.scenario(of());
    const OpGraph g = build_op_graph(s.model, s.phase, s.parallelism, s.precision);
    double flops = 0, bytes = 0;
    for (const Op& op : g.ops) {
      const bool kda = op.kind == OpKind::kda_recurrent, mla = op.kind == OpKind::mla_attention;
      if ((kda && ops_ != "mla") || (mla && ops_ != "kda")) {
        flops += op.flops;
        bytes += op.bytes();
      }
    }
    return bytes > 0 ? flops / bytes : 0;
  }

 private:
  std::string ops_;
};
K3PERF_REGISTER_CLAIM_METRIC(AttentionIntensity, "attention_intensity");

// MLA in its MHA form: per cached token and head, 2·(qk + v) FLOP over (qk + v) bf16 key and value entries.
class MhaAttentionIntensity : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override {
    const MlaSpec& a = in.scenario(of()).model.mla;
    return 2.0 * (a.qk_head_dim() + a.v_head_dim) / ((a.qk_head_dim() + a.v_head_dim) * 2.0);
  }
};
K3PERF_REGISTER_CLAIM_METRIC(MhaAttentionIntensity, "mha_attention_intensity");

// The GPU's dense peak of `compute` (default bf16) over its HBM bandwidth, FLOP/B.
class RidgeFlopsPerByte : public OneScenarioMetric {
 public:
  explicit RidgeFlopsPerByte(const Params& p) : OneScenarioMetric(p) {
    const std::string name = p.param<std::string>("compute").default_val("bf16");
    if (!parse_compute_type(name, &compute_)) p.fail("compute", "expected a compute type (fp32, tf32, bf16, fp8, fp4)");
  }
  double value(const MetricInputs& in) const override {
    const Hardware& hw = in.scenario(of()).hardware;
    if (!hw.supports(compute_)) {
      throw InputError(fmt::format("{}: {} lists no {} peak", in.subject().source, hw.name, to_string(compute_)));
    }
    return hw.ridge_flops_per_byte(compute_);
  }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    const Hardware& hw = in.scenario(of()).hardware;
    std::string ridges;
    for (const auto& [type, rate] : hw.peak_flops_per_s) {
      ridges += fmt::format("{}{} {:.0f}", ridges.empty() ? "" : ", ", to_string(type), hw.ridge_flops_per_byte(type));
    }
    return {fmt::format("{} ridge points (dense peak / HBM bandwidth, FLOP/B): {}", hw.name, ridges)};
  }

 private:
  ComputeType compute_ = ComputeType::bf16;
};
K3PERF_REGISTER_CLAIM_METRIC(RidgeFlopsPerByte, "ridge_flops_per_byte");

}  // namespace
}  // namespace k3
