// The baselines a scenario_metric claim compares with (docs/verify.md#baseline-transforms). Each
// is one class ending in K3PERF_REGISTER_BASELINE_TRANSFORM; a new one may live in its own file.
#include "core/error.h"
#include "sim/claims/claim_scenario.h"
#include "sim/claims/scenario_metric.h"

#include <fmt/format.h>

#include <algorithm>

namespace k3 {
namespace {

// The subject itself: for a comparison made only by `baseline.<key>=value` assignments.
class NoTransform : public BaselineTransform {
 public:
  Scenario apply(const Scenario& s, const DataPaths&) const override { return s; }
  std::string describe() const override { return "the same scenario"; }
};
K3PERF_REGISTER_BASELINE_TRANSFORM(NoTransform, "none");

// The same model with every layer MLA (the full-attention counterpart of a hybrid).
class AllMla : public BaselineTransform {
 public:
  Scenario apply(const Scenario& s, const DataPaths&) const override {
    return with_model(s, with_all_attention(s.model, AttentionKind::mla));
  }
  std::string describe() const override { return "all-MLA"; }
};
K3PERF_REGISTER_BASELINE_TRANSFORM(AllMla, "all_mla");

// The same model with a plain residual instead of Block Attention Residuals.
class NoAttnRes : public BaselineTransform {
 public:
  Scenario apply(const Scenario& s, const DataPaths&) const override {
    if (s.model.residual != ResidualKind::block_attnres) {
      throw InputError(fmt::format("{}: model '{}' has no Block AttnRes", s.source, s.model.name));
    }
    return with_model(s, without_attnres(s.model));
  }
  std::string describe() const override { return "plain residual"; }
};
K3PERF_REGISTER_BASELINE_TRANSFORM(NoAttnRes, "no_attnres");

// Another checkpoint (`model`), stored as published unless `weights` / `routed_experts` are given.
class BaselineModel : public BaselineTransform {
 public:
  explicit BaselineModel(const Params& p)
      : model_(p.param<std::string>("model").required()),
        weights_(p.param<std::string>("weights").default_val("")),
        experts_(p.param<std::string>("routed_experts").default_val("")),
        params_(p) {
    check(weights_, "weights", {"bf16", "fp8", "mxfp8"});
    check(experts_, "routed_experts", {"bf16", "fp8", "mxfp8", "mxfp4", "int4"});
  }
  Scenario apply(const Scenario& s, const DataPaths& data) const override {
    Scenario b = s;
    b.model = load_model_config_by_name(model_, data.models_dir);
    b.precision.weights = b.model.quantize_attention_and_dense ? b.model.weight_format : StorageFormat::bf16;
    b.precision.routed_experts = b.model.routed_expert_format;
    if (!weights_.empty()) parse_storage_format(weights_, &b.precision.weights);
    if (!experts_.empty()) parse_storage_format(experts_, &b.precision.routed_experts);
    validate(b);
    return b;
  }
  std::string describe() const override {
    std::string how = weights_.empty() && experts_.empty()
                          ? "as published"
                          : fmt::format("weights {}, routed experts {}", weights_.empty() ? "as published" : weights_,
                                        experts_.empty() ? "as published" : experts_);
    return fmt::format("{} ({})", model_, how);
  }

 private:
  void check(const std::string& v, const std::string& key, const std::vector<std::string>& allowed) const {
    if (!v.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      std::string known;
      for (const std::string& a : allowed) known += (known.empty() ? "" : ", ") + a;
      params_.fail(key, fmt::format("expected one of {{{}}}", known));
    }
  }
  std::string model_, weights_, experts_;
  Params params_;
};
K3PERF_REGISTER_BASELINE_TRANSFORM(BaselineModel, "baseline_model");

// The same scenario with kernels launched one by one instead of replayed from CUDA graphs.
class EagerLaunches : public BaselineTransform {
 public:
  Scenario apply(const Scenario& s, const DataPaths&) const override {
    Scenario b = s;
    b.runtime.cuda_graphs = false;
    return b;
  }
  std::string describe() const override { return "eager kernel launches"; }
};
K3PERF_REGISTER_BASELINE_TRANSFORM(EagerLaunches, "eager_launches");

}  // namespace
}  // namespace k3
