// Metrics on predicted steps (docs/verify.md#metrics): step time, throughput, their ratios against
// the baseline, fixed costs and memory per GPU. Each is one class ending in
// K3PERF_REGISTER_CLAIM_METRIC; a new one may live in its own file.
#include "core/error.h"
#include "sim/claims/scenario_metric.h"
#include "sim/memory.h"
#include "sim/roofline.h"

#include <fmt/format.h>

#include <algorithm>

namespace k3 {
namespace {

constexpr double kGiB = double(1ull << 30);

std::string label(const MetricInputs& in, const std::string& of) {
  return of == "baseline" ? in.baseline_name() : in.subject().model.name;
}

class StepMs : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override { return in.prediction(of()).step_ms(); }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    return {describe_step(label(in, of()), in.prediction(of()))};
  }
};
K3PERF_REGISTER_CLAIM_METRIC(StepMs, "step_ms");

class TokensPerS : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override { return in.prediction(of()).tokens_per_s(); }
};
K3PERF_REGISTER_CLAIM_METRIC(TokensPerS, "tokens_per_s");

// Time per generated token of the whole replica: 1 / throughput, in ms.
class MsPerToken : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override { return 1000.0 / in.prediction(of()).tokens_per_s(); }
};
K3PERF_REGISTER_CLAIM_METRIC(MsPerToken, "ms_per_token");

std::vector<std::string> both_steps(const MetricInputs& in) {
  return {describe_step(in.baseline_name(), in.baseline_prediction()),
          describe_step(in.subject().model.name, in.subject_prediction())};
}

// Step time of the baseline over the subject's (> 1: the subject is faster).
class Speedup : public ClaimMetric {
 public:
  double value(const MetricInputs& in) const override {
    return in.baseline_prediction().step.step_us / in.subject_prediction().step.step_us;
  }
  std::vector<std::string> explain(const MetricInputs& in) const override { return both_steps(in); }
};
K3PERF_REGISTER_CLAIM_METRIC(Speedup, "speedup");

// Step time the subject adds over the baseline, in percent.
class OverheadPercent : public ClaimMetric {
 public:
  double value(const MetricInputs& in) const override {
    return 100.0 * (in.subject_prediction().step.step_us / in.baseline_prediction().step.step_us - 1.0);
  }
  std::vector<std::string> explain(const MetricInputs& in) const override { return both_steps(in); }
};
K3PERF_REGISTER_CLAIM_METRIC(OverheadPercent, "overhead_percent");

// Bytes per generated token that no batch amortises: KV and KDA state read and written per sequence.
double per_sequence_bytes(const Prediction& p) {
  double bytes = 0;
  for (const Op& op : p.graph.ops) bytes += op.read.kv + op.written.kv + op.read.state + op.written.state;
  return bytes / double(p.graph.sequences_per_gpu);
}

double weight_bytes_read(const Prediction& p) {
  double bytes = 0;
  for (const Op& op : p.graph.ops) bytes += op.read.weights;
  return bytes;
}

// Throughput of the subject over the baseline's, each at its own batch (e.g. `batch=largest`).
class ThroughputRatio : public ClaimMetric {
 public:
  double value(const MetricInputs& in) const override {
    return in.subject_prediction().tokens_per_s() / in.baseline_prediction().tokens_per_s();
  }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    const Prediction& ps = in.subject_prediction();
    const Prediction& pb = in.baseline_prediction();
    const double seq_s = per_sequence_bytes(ps), seq_b = per_sequence_bytes(pb);
    return {
        fmt::format("{} at batch {}: {:.2f} ms per step -> {:.1f} tok/s ({:.2f} ms per generated token)",
                    in.baseline_name(), pb.scenario.phase.batch, pb.step_ms(), pb.tokens_per_s(),
                    1000.0 / pb.tokens_per_s()),
        fmt::format("{} at batch {}: {:.2f} ms per step -> {:.1f} tok/s ({:.2f} ms per generated token)",
                    ps.scenario.model.name, ps.scenario.phase.batch, ps.step_ms(), ps.tokens_per_s(),
                    1000.0 / ps.tokens_per_s()),
        fmt::format(
            "per GPU and step, weights {:.1f} / {:.1f} GB are shared by the batch; KV and state {:.2f} / {:.2f} "
            "GB per sequence are not: with weights fully amortised the ratio tends to {:.2f}x",
            weight_bytes_read(pb) / 1e9, weight_bytes_read(ps) / 1e9, seq_b / 1e9, seq_s / 1e9, seq_b / seq_s),
    };
  }
};
K3PERF_REGISTER_CLAIM_METRIC(ThroughputRatio, "throughput_ratio");

// Kernel fixed time (launch or graph replay) and the latency every collective call pays, as a share
// of the step: the part that bytes and FLOPs do not explain.
struct Fixed {
  double step_us = 0, overhead_us = 0, latency_us = 0, bytes_us = 0;
  int kernels = 0, collective_calls = 0;
  double share_percent() const { return 100 * (overhead_us + latency_us) / step_us; }
};

Fixed fixed_costs(const Prediction& p) {
  const Scenario& s = p.scenario;
  Fixed f;
  f.step_us = p.step.step_us;
  for (std::size_t i = 0; i < p.graph.ops.size(); ++i) {
    const Op& op = p.graph.ops[i];
    const OpTime& t = p.step.ops[i];
    if (op.collective) {
      // The part of the call that does not depend on the bytes: its time at one byte.
      Op probe = op;
      probe.collective->bytes = probe.collective->calls;
      const double fixed = time_op(probe, s.hardware, s.runtime).communication_us;
      f.latency_us += std::min(fixed, t.exposed_us);
      f.collective_calls += op.collective->calls;
    } else {
      f.overhead_us += std::min(t.overhead_us, t.exposed_us);
      f.kernels += op.kernels;
    }
  }
  f.bytes_us = f.step_us - f.overhead_us - f.latency_us;
  return f;
}

class FixedSharePercent : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override { return fixed_costs(in.prediction(of())).share_percent(); }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    const Fixed f = fixed_costs(in.prediction(of()));
    return {fmt::format(
        "step {:.3f} ms = {} kernels x fixed time {:.3f} ms + {} collective calls x latency {:.3f} ms + bytes and "
        "FLOPs {:.3f} ms: fixed share {:.0f}%",
        f.step_us / 1000, f.kernels, f.overhead_us / 1000, f.collective_calls, f.latency_us / 1000, f.bytes_us / 1000,
        f.share_percent())};
  }
};
K3PERF_REGISTER_CLAIM_METRIC(FixedSharePercent, "fixed_share_percent");

// What a host-side cost per step of before_us -> after_us (on top of the predicted step) saves.
class HostSavingPercent : public OneScenarioMetric {
 public:
  explicit HostSavingPercent(const Params& p)
      : OneScenarioMetric(p),
        before_us_(p.param<double>("before_us").required()),
        after_us_(p.param<double>("after_us").required()) {
    if (after_us_ < 0) p.fail("after_us", "expected a time >= 0");
    if (before_us_ < after_us_) p.fail("before_us", fmt::format("expected a time >= after_us ({})", after_us_));
  }
  double value(const MetricInputs& in) const override {
    return 100 * (before_us_ - after_us_) / (in.prediction(of()).step.step_us + before_us_);
  }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    const double step = in.prediction(of()).step.step_us;
    return {fmt::format("a per-step host cost of {:.0f} us -> {:.0f} us on top: {:.1f} -> {:.1f} tok/s per sequence",
                        before_us_, after_us_, 1e6 / (step + before_us_), 1e6 / (step + after_us_))};
  }

 private:
  double before_us_, after_us_;
};
K3PERF_REGISTER_CLAIM_METRIC(HostSavingPercent, "host_saving_percent");

// Memory per GPU for the step (weights, KV, state, activations, reserve), in GiB.
class MemoryPerGpuGib : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override { return in.prediction(of()).memory.total_bytes / kGiB; }
  std::vector<std::string> explain(const MetricInputs& in) const override {
    const MemoryBreakdown& m = in.prediction(of()).memory;
    return {
        fmt::format("per GPU: weights {:.2f} + KV {:.2f} + KDA state {:.2f} + activations {:.2f} + reserve {:.2f} "
                    "= {:.2f} GiB of {:.2f} usable",
                    m.weights_bytes / kGiB, m.kv_bytes / kGiB, m.kda_state_bytes / kGiB, m.activation_bytes / kGiB,
                    m.reserved_bytes / kGiB, m.total_bytes / kGiB, m.usable_bytes / kGiB)};
  }
};
K3PERF_REGISTER_CLAIM_METRIC(MemoryPerGpuGib, "memory_per_gpu_gib");

}  // namespace
}  // namespace k3
