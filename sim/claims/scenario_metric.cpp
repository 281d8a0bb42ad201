// The generic evaluator (scenario_metric.h): builds the subject and baseline of every predicted
// key, evaluates its metric, and enumerates the alternatives.
#include "sim/claims/scenario_metric.h"

#include "core/error.h"
#include "core/limits.h"
#include "core/yaml_set.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

namespace k3 {

MetricInputs::MetricInputs(Scenario subject, std::optional<Scenario> baseline, std::string baseline_name)
    : subject_(std::move(subject)), baseline_(std::move(baseline)), baseline_name_(std::move(baseline_name)) {}

const Scenario& MetricInputs::baseline() const {
  if (!baseline_)
    throw InputError(fmt::format("{}: this metric compares with a baseline: set params.baseline", subject_.source));
  return *baseline_;
}

const Prediction& MetricInputs::subject_prediction() const {
  if (!subject_prediction_) subject_prediction_ = predict(subject_);
  return *subject_prediction_;
}

const Prediction& MetricInputs::baseline_prediction() const {
  if (!baseline_prediction_) baseline_prediction_ = predict(baseline());
  return *baseline_prediction_;
}

OneScenarioMetric::OneScenarioMetric(const Params& p) : of_(p.param<std::string>("of").default_val("subject")) {
  if (of_ != "subject" && of_ != "baseline") p.fail("of", "expected subject or baseline");
}

double bytes_moved(const Prediction& p) {
  double bytes = 0;
  for (const Op& op : p.graph.ops) bytes += op.bytes();
  return bytes;
}

std::string describe_step(const std::string& label, const Prediction& p) {
  double flops = 0;
  for (const Op& op : p.graph.ops) flops += op.flops;
  return fmt::format("{} {:.3f} ms per step ({:.1f} GB moved, {:.2f} TFLOP per GPU)", label, p.step_ms(),
                     bytes_moved(p) / 1e9, flops / 1e12);
}

namespace {

const std::vector<std::string>& scenario_keys() {
  static const std::vector<std::string> keys =
      scenario_param_keys({"phase", "batch", "context_tokens", "prompt_tokens"});
  return keys;
}

YAML::Node map_node() { return YAML::Node(YAML::NodeType::Map); }

std::string dump(const YAML::Node& n) {
  YAML::Emitter out;
  out << YAML::Flow << n;
  return out.c_str();
}

// A built scenario, or why an alternative's combination has none (an invalid layout, no batch that fits).
struct Built {
  std::optional<Scenario> scenario;
  std::string why_not;
};

// One question: the subject's scenario keys, the keys the baseline changes before its transform,
// the transform and the metric.
struct Question {
  YAML::Node subject = map_node();
  YAML::Node baseline_keys = map_node();
  YAML::Node baseline;  // null: none
  bool has_baseline() const { return baseline.IsDefined() && !baseline.IsNull(); }
  YAML::Node metric;
  std::vector<std::string> assignments;  // "params.scenario.<key>=<value>", for error locations

  Question copy() const {
    Question q;
    q.subject = YAML::Clone(subject);
    q.baseline_keys = YAML::Clone(baseline_keys);
    q.baseline = has_baseline() ? YAML::Clone(baseline) : YAML::Node();
    q.metric = YAML::Clone(metric);
    q.assignments = assignments;
    return q;
  }
  std::string scenarios_signature() const {
    return dump(subject) + "|" + dump(baseline_keys) + "|" + (has_baseline() ? dump(baseline) : "~");
  }
  std::string signature() const { return scenarios_signature() + "|" + dump(metric); }
};

// One --set-style assignment, `key=value` (value read as YAML; a list enumerates), or
// `baseline.key=value` for the baseline alone.
struct Assignment {
  bool baseline = false;
  std::string key;
  YAML::Node value;
  std::string text;
};

Assignment parse_assignment(const YamlNode& node) {
  const std::string text = node.as_string();
  Assignment a;
  a.text = text;
  try {
    SetAssignment parsed = parse_set(text, "assignment");
    a.key = parsed.key;
    a.value = parsed.value;
  } catch (const InputError& e) {
    node.fail(e.what());
  }
  if (a.key.rfind("baseline.", 0) == 0) {
    a.baseline = true;
    a.key = a.key.substr(9);
  }
  const auto& keys = scenario_keys();
  if (std::find(keys.begin(), keys.end(), a.key) == keys.end()) {
    std::string known;
    for (const std::string& k : keys) known += (known.empty() ? "" : ", ") + k;
    node.fail(
        fmt::format("'{}': unknown scenario key '{}' (known: {}, each also as baseline.<key>)", text, a.key, known));
  }
  return a;
}

void apply(Question& q, const std::string& key, bool to_baseline, const YAML::Node& value) {
  (to_baseline ? q.baseline_keys : q.subject)[key] = YAML::Clone(value);
  q.assignments.push_back(fmt::format("params.scenario.{}={}", key, dump(value)));
}

class Evaluator {
 public:
  Evaluator(const ClaimInputs& c, const DataPaths& data) : c_(c), data_(data) {}

  Evaluation run() {
    if (!c_.params) throw InputError(fmt::format("{}: scenario_metric needs params", c_.file));
    const YamlNode& p = *c_.params;
    p.expect_keys({"scenario", "baseline", "predict", "alternatives"});
    p["scenario"].expect_keys(scenario_keys());
    Question base;
    base.subject = YAML::Clone(p["scenario"].raw());
    if (auto b = p.find("baseline")) base.baseline = YAML::Clone(b->raw());
    const YamlNode predict_node = p["predict"];
    std::vector<std::string> keys = predict_node.keys();
    if (keys.empty()) predict_node.fail("expected at least one predicted key");
    for (const std::string& key : keys) main_[key] = question_of(base, key, predict_node[key]);

    Evaluation e;
    std::vector<std::string> headers_done;
    for (const std::string& key : keys) {
      const Question& q = main_.at(key);
      std::shared_ptr<const MetricInputs> in = inputs(q, /*required=*/true);
      const std::unique_ptr<ClaimMetric> metric = make_metric(YamlNode(q.metric, c_.file, "params.predict." + key));
      e.predicted[key] = metric->value(*in);
      if (std::find(headers_done.begin(), headers_done.end(), q.scenarios_signature()) == headers_done.end()) {
        headers_done.push_back(q.scenarios_signature());
        e.breakdown.push_back(describe(*in));
      }
      e.breakdown.push_back(fmt::format("  {} = {} {:.4g}", key, metric_name(q.metric), e.predicted[key]));
      for (const std::string& line : metric->explain(*in)) e.breakdown.push_back("    " + line);
    }
    if (auto alts = p.find("alternatives")) {
      for (const YamlNode& alt : alts->items()) enumerate(alt, keys, e);
    }
    return e;
  }

 private:
  // The key's question: the claim's scenario with the key's own `set` (which also wins over every
  // alternative's), and its metric.
  Question question_of(const Question& base, const std::string& key, const YamlNode& spec) {
    Question q = base.copy();
    if (spec.is_map() && !spec.has("name")) {
      spec.expect_keys({"metric", "set"});
      q.metric = YAML::Clone(spec["metric"].raw());
      if (auto set = spec.find("set")) {
        for (const YamlNode& item : set->items()) {
          const Assignment a = parse_assignment(item);
          if (a.value.IsSequence()) item.fail(fmt::format("'{}': a predicted key takes one value", a.text));
          apply(q, a.key, a.baseline, a.value);
          key_sets_[key].push_back(a);
        }
      }
    } else {
      q.metric = YAML::Clone(spec.raw());
    }
    make_metric(YamlNode(q.metric, c_.file, spec.key_path()));  // a bad metric is an error before any prediction
    return q;
  }

  static std::string metric_name(const YAML::Node& metric) {
    return metric.IsMap() ? metric["name"].as<std::string>() : metric.as<std::string>();
  }

  std::unique_ptr<ClaimMetric> make_metric(const YamlNode& node) const {
    if (!node.is_map()) {
      const std::string name = node.as_string();
      if (!ClaimMetrics::instance().contains(name)) node.fail(ClaimMetrics::instance().unknown(name));
      return ClaimMetrics::instance().make(name);
    }
    const std::string name = node["name"].as_string();
    if (!ClaimMetrics::instance().contains(name)) node["name"].fail(ClaimMetrics::instance().unknown(name));
    return ClaimMetrics::instance().make(name, Params(node, {"name", "label"}));
  }

  // Reads the phase keys and builds the scenario; the layout is checked here too (validate).
  // `batch: largest` is resolved here unless a transform comes first (`resolve_largest` false).
  Built build(const YAML::Node& keys_node, const std::vector<std::string>& assignments, bool resolve = true) const {
    YamlNode keys(keys_node, c_.file, "params.scenario");
    keys.mark_overridden(assignments);
    const std::string phase = keys.find("phase") ? keys["phase"].as_choice({"decode", "prefill"}) : "decode";
    bool largest = false;
    long long batch = 1;
    if (auto b = keys.find("batch")) {
      if (b->raw().IsScalar() && b->raw().Scalar() == "largest")
        largest = true;
      else
        batch = read_int<long long>(*b, limit::batch);
    }
    long long context = 0;
    if (auto v = keys.find("context_tokens")) {
      context = read_int<long long>(*v, limit::tokens);
    }
    Phase ph = Phase::decode(batch, context);
    if (phase == "prefill") {
      ph = Phase::prefill(batch, read_int<long long>(keys["prompt_tokens"], at_least(limit::tokens, 1)), context);
    } else if (auto v = keys.find("prompt_tokens")) {
      v->fail("a decode step has no prompt (prompt_tokens is for phase: prefill)");
    }
    Scenario s = scenario_from_keys(keys, c_.file, data_, ph, "", "");
    s.name = c_.id;
    if (largest) s.phase.batch = std::max(1, s.parallelism.attention_dp);
    try {
      validate(s);
    } catch (const InputError& e) {
      return {std::nullopt, e.what()};
    }
    if (largest && resolve) return resolve_largest(std::move(s));
    return {std::move(s), ""};
  }

  static Built resolve_largest(Scenario s) {
    s.phase.batch = max_batch(s, s.phase.context_tokens);
    if (s.phase.batch == 0) {
      return {std::nullopt, fmt::format("{}: batch 'largest': not one sequence of {} tokens fits on {} x{}", s.source,
                                        s.phase.context_tokens, s.hardware.name, s.parallelism.gpus())};
    }
    return {std::move(s), ""};
  }

  // The subject and baseline of a question, shared by every metric that asks about the same two;
  // nullptr (an alternative that does not apply) or an InputError (the claim's own scenario).
  std::shared_ptr<const MetricInputs> inputs(const Question& q, bool required) {
    const std::string sig = q.scenarios_signature();
    if (auto it = cache_.find(sig); it != cache_.end()) return it->second;
    std::shared_ptr<const MetricInputs> out;
    Built subject = build(q.subject, q.assignments);
    if (!subject.scenario && required) throw InputError(subject.why_not);
    if (subject.scenario) {
      if (!q.has_baseline()) {
        out = std::make_shared<MetricInputs>(*subject.scenario, std::nullopt, "");
      } else {
        const std::unique_ptr<BaselineTransform> t =
            BaselineTransforms::instance().make(YamlNode(q.baseline, c_.file, "params.baseline"));
        YAML::Node keys = YAML::Clone(q.subject);
        for (const auto& kv : q.baseline_keys) keys[kv.first.as<std::string>()] = kv.second;
        Built b = build(keys, q.assignments, /*resolve=*/false);
        if (b.scenario) {
          const bool largest = keys["batch"] && keys["batch"].IsScalar() && keys["batch"].Scalar() == "largest";
          try {
            b = {t->apply(*b.scenario, data_), ""};
            if (largest) b = resolve_largest(*b.scenario);
          } catch (const InputError& e) {
            if (required) throw;
            b = {std::nullopt, e.what()};
          }
        }
        if (!b.scenario && required) throw InputError(b.why_not);
        if (b.scenario) out = std::make_shared<MetricInputs>(*subject.scenario, *b.scenario, t->describe());
      }
    }
    cache_[sig] = out;
    return out;
  }

  std::string describe(const MetricInputs& in) const {
    const Scenario& s = in.subject();
    const std::string where =
        s.hardware.name.empty()
            ? std::string()
            : fmt::format(" on {} x{} (tp {}, ep {}, attention_dp {}, pp {}, CUDA graphs {})", s.hardware.name,
                          s.parallelism.gpus(), s.parallelism.tp, s.parallelism.ep, s.parallelism.attention_dp,
                          s.parallelism.pp, s.runtime.cuda_graphs ? "on" : "off");
    const std::string phase =
        s.phase.kind == PhaseKind::prefill
            ? fmt::format("prefill of {} tokens after {} cached", s.phase.new_tokens, s.phase.context_tokens)
            : fmt::format("decode with {} tokens cached", s.phase.context_tokens);
    std::string baseline;
    if (!in.baseline_name().empty()) {
      const Scenario& b = in.baseline();
      baseline = fmt::format("; baseline: {}{}", in.baseline_name(),
                             b.phase.batch != s.phase.batch ? fmt::format(" at batch {}", b.phase.batch) : "");
    }
    return fmt::format("{}{}, {}, batch {}{}", s.model.name, where, phase, s.phase.batch, baseline);
  }

  // One dimension of an alternative's enumeration: its options, each an edit of every key's question
  // and the words it adds to the assumption.
  struct Option {
    std::function<void(const std::string& key, Question&)> edit;
    std::string words;
  };

  std::vector<Option> options_of(const YamlNode& item) const {
    const Assignment a = parse_assignment(item);
    std::vector<YAML::Node> values;
    if (a.value.IsSequence()) {
      for (const auto& v : a.value) values.push_back(v);
    } else if (a.key == "hardware" && a.value.IsScalar() && a.value.Scalar() == "every") {
      for (const std::string& name : list_hardware_names(data_.hardware_dir)) values.push_back(YAML::Node(name));
    } else {
      values.push_back(a.value);
    }
    std::vector<Option> out;
    for (const YAML::Node& v : values) {
      const std::string words = fmt::format("{}{}={}", a.baseline ? "baseline." : "", a.key, dump(v));
      out.push_back({[a, v](const std::string&, Question& q) { apply(q, a.key, a.baseline, v); }, words});
    }
    return out;
  }

  void enumerate(const YamlNode& alt, const std::vector<std::string>& keys, Evaluation& e) {
    std::vector<std::vector<Option>> dims;
    std::string assumption;
    auto add_sets = [&](const YamlNode& list) {
      for (const YamlNode& item : list.items()) dims.push_back(options_of(item));
    };
    if (alt.is_sequence()) {
      add_sets(alt);
    } else {
      alt.expect_keys({"set", "baseline", "read", "assumption"});
      if (auto a = alt.find("assumption")) assumption = a->as_string();
      if (auto s = alt.find("set")) add_sets(*s);
      if (auto b = alt.find("baseline")) {
        BaselineTransforms::instance().make(*b);  // checked here, not only when it applies
        const YAML::Node spec = YAML::Clone(b->raw());
        dims.push_back({{[spec](const std::string&, Question& q) { q.baseline = YAML::Clone(spec); }, ""}});
      }
      if (auto read = alt.find("read")) {
        for (const std::string& key : read->keys()) {
          if (!main_.count(key)) (*read)[key].fail(fmt::format("'{}' is not a predicted key", key));
          const YamlNode r = (*read)[key];
          std::vector<YamlNode> specs = r.is_sequence() ? r.items() : std::vector<YamlNode>{r};
          std::vector<Option> opts;
          for (const YamlNode& spec : specs) {
            make_metric(spec);
            const YAML::Node metric = YAML::Clone(spec.raw());
            const std::string label = spec.is_map() && spec.has("label") ? spec["label"].as_string() : "";
            opts.push_back({[key, metric](const std::string& k, Question& q) {
                              if (k == key) q.metric = YAML::Clone(metric);
                            },
                            fmt::format("{} as {}", key, label.empty() ? dump(metric) : label)});
          }
          dims.push_back(opts);
        }
      }
    }
    if (dims.empty()) alt.fail("an alternative changes at least one thing (set, baseline or read)");
    std::vector<std::size_t> at(dims.size(), 0);
    while (true) {
      add_alternative(dims, at, assumption, keys, e);
      std::size_t d = dims.size();
      while (d > 0 && ++at[d - 1] == dims[d - 1].size()) at[--d] = 0;
      if (d == 0) break;
    }
  }

  void add_alternative(const std::vector<std::vector<Option>>& dims, const std::vector<std::size_t>& at,
                       const std::string& assumption, const std::vector<std::string>& keys, Evaluation& e) {
    std::string words;
    for (std::size_t d = 0; d < dims.size(); ++d) {
      const std::string& w = dims[d][at[d]].words;
      if (!w.empty()) words += (words.empty() ? "" : ", ") + w;
    }
    Alternative alt{assumption.empty() ? "with " + words
                    : words.empty()    ? assumption
                                       : fmt::format("{} ({})", assumption, words),
                    {}};
    bool same_as_main = true;
    for (const std::string& key : keys) {
      Question q = main_.at(key).copy();
      for (std::size_t d = 0; d < dims.size(); ++d) dims[d][at[d]].edit(key, q);
      // A key's own assignments define the figure (e.g. "at batch 1"): an alternative does not undo them.
      for (const Assignment& a : key_sets_[key]) apply(q, a.key, a.baseline, a.value);
      same_as_main = same_as_main && q.signature() == main_.at(key).signature();
      const std::shared_ptr<const MetricInputs> in = inputs(q, /*required=*/false);
      if (!in) return;  // the combination does not apply (an invalid layout, nothing fits)
      alt.predicted[key] = make_metric(YamlNode(q.metric, c_.file, "params.alternatives"))->value(*in);
    }
    if (!same_as_main) e.alternatives.push_back(std::move(alt));
  }

  const ClaimInputs& c_;
  const DataPaths& data_;
  std::map<std::string, Question> main_;
  std::map<std::string, std::vector<Assignment>> key_sets_;
  std::map<std::string, std::shared_ptr<const MetricInputs>> cache_;
};

class ScenarioMetricEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override { return Evaluator(c, data).run(); }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(ScenarioMetricEvaluator, "scenario_metric");
}  // namespace k3
