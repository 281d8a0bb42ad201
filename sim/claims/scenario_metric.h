// The generic claim evaluator, `scenario_metric` (docs/verify.md#scenario_metric): a subject
// scenario, a baseline made from it by a registered transform, a registered metric per predicted
// key, and alternatives to enumerate, written as --set-style assignments to the scenario keys.
//
//   evaluator: scenario_metric
//   params:
//     scenario: {model: kimi-k3, hardware: h200-sxm, tp: 8, ep: 8, batch: 8, context_tokens: 131072}
//     baseline: no_attnres                      # or {name: baseline_model, model: kimi-k2}
//     predict:
//       overhead_percent: overhead_percent      # or {metric: <name or {name:, <param>:}>, set: [...]}
//     alternatives:
//       - [cuda_graphs=false]                   # or {set: [...], baseline: ..., read: {...}, assumption: ...}
//
// A transform and a metric are each one class in a .cpp file that ends in
// K3PERF_REGISTER_BASELINE_TRANSFORM / K3PERF_REGISTER_CLAIM_METRIC, plus one CMake line.
#pragma once

#include "core/registry.h"
#include "core/scenario.h"
#include "sim/predict.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace k3 {

// Makes the baseline from the subject (every layer MLA, a plain residual, another checkpoint, ...).
// Parses its parameters in its constructor (core/registry.h). Throws InputError when it does not
// apply to the subject (e.g. no AttnRes to remove).
class BaselineTransform {
 public:
  static constexpr const char* kind = "baseline transform";
  virtual ~BaselineTransform() = default;
  virtual Scenario apply(const Scenario& subject, const DataPaths& data) const = 0;
  virtual std::string describe() const = 0;  // "all-MLA", for breakdowns
};
using BaselineTransforms = Registry<BaselineTransform>;
#define K3PERF_REGISTER_BASELINE_TRANSFORM(Class, name) K3PERF_REGISTER(::k3::BaselineTransform, Class, name)

// The scenarios one metric reads: the subject and, when the claim names one, the baseline, each
// predicted at most once.
class MetricInputs {
 public:
  MetricInputs(Scenario subject, std::optional<Scenario> baseline, std::string baseline_name);
  const Scenario& subject() const { return subject_; }
  const Scenario& baseline() const;                                    // InputError when the claim names no baseline
  const std::string& baseline_name() const { return baseline_name_; }  // "" or the transform's describe()
  const Prediction& subject_prediction() const;
  const Prediction& baseline_prediction() const;
  // "subject" or "baseline" (a metric's `of` parameter).
  const Scenario& scenario(const std::string& of) const { return of == "baseline" ? baseline() : subject_; }
  const Prediction& prediction(const std::string& of) const {
    return of == "baseline" ? baseline_prediction() : subject_prediction();
  }

 private:
  Scenario subject_;
  std::optional<Scenario> baseline_;
  std::string baseline_name_;
  mutable std::optional<Prediction> subject_prediction_, baseline_prediction_;
};

// One predicted figure from the subject and baseline (a step time, a ratio, bytes, a count).
class ClaimMetric {
 public:
  static constexpr const char* kind = "claim metric";
  virtual ~ClaimMetric() = default;
  virtual double value(const MetricInputs& in) const = 0;
  // Lines with the numbers behind the value, for the breakdown of the main prediction.
  virtual std::vector<std::string> explain(const MetricInputs& in) const {
    (void)in;
    return {};
  }
};
using ClaimMetrics = Registry<ClaimMetric>;
#define K3PERF_REGISTER_CLAIM_METRIC(Class, name) K3PERF_REGISTER(::k3::ClaimMetric, Class, name)

// A metric that reads one scenario: `of: subject` (default) or `of: baseline`.
class OneScenarioMetric : public ClaimMetric {
 public:
  explicit OneScenarioMetric(const Params& p);

 protected:
  const std::string& of() const { return of_; }

 private:
  std::string of_;
};

// Helpers for metrics' breakdown lines.
std::string describe_step(const std::string& label, const Prediction& p);  // "label 5.490 ms (22.1 GB, 0.99 TFLOP)"
double bytes_moved(const Prediction& p);

}  // namespace k3
