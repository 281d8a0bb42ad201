#include "sim/serving/serving_config.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/yaml_set.h"

#include <cmath>
#include <filesystem>
#include <sstream>
#include <tuple>

namespace k3::serving {

namespace {

bool is_own_key(const std::string& assignment) {
  return assignment.rfind("serving.", 0) == 0 || assignment.rfind("plan.", 0) == 0;
}

// The text with the top-level `serving:` and `plan:` blocks turned into blank lines, so that the
// deployment keys keep their line numbers for parse_scenario's errors.
std::string without_own_sections(const std::string& text, bool* has_workload) {
  std::stringstream in(text);
  std::string out, line;
  bool blanking = false;
  *has_workload = false;
  while (std::getline(in, line)) {
    const bool top_level = !line.empty() && line[0] != ' ' && line[0] != '\t' && line[0] != '#';
    if (top_level) {
      blanking = line.rfind("serving:", 0) == 0 || line.rfind("plan:", 0) == 0;
      if (line.rfind("workload:", 0) == 0) *has_workload = true;
    }
    out += blanking ? "" : line;
    out += '\n';
  }
  return out;
}

BatchLimits read_limits(const YamlNode& n, const std::string& sequences_key, const BatchLimits& defaults) {
  BatchLimits l = defaults;
  if (auto v = n.find(sequences_key)) l.max_sequences = read_int<int64_t>(*v, limit::batch);
  if (auto v = n.find("max_batched_tokens")) l.max_batched_tokens = read_int<int64_t>(*v, at_least(limit::tokens, 1));
  return l;
}

}  // namespace

ServingScenario parse_serving_scenario(const std::string& yaml_text, const std::string& origin, const DataPaths& data,
                                       const std::vector<std::string>& sets) {
  std::vector<std::string> own_sets, core_sets;
  for (const std::string& s : sets) (is_own_key(s) ? own_sets : core_sets).push_back(s);
  bool has_workload = false;
  std::string core_text = without_own_sections(yaml_text, &has_workload);
  // serve and plan form their own batches; the core reader still wants a workload to check.
  if (!has_workload) core_text += "workload: {batch: 1048576}\n";

  ServingScenario out;
  out.deployment = parse_scenario(core_text, origin, data, core_sets);

  YamlNode y = YamlNode::load_string(yaml_text, origin);
  apply_sets(y.raw(), own_sets);
  y.mark_overridden(own_sets);
  out.plan = y.find("plan");
  const YamlNode sv = y["serving"];
  sv.expect_keys({"mode", "replicas", "prefill_replicas", "decode_replicas", "max_sequences", "max_batched_tokens",
                  "decode_max_sequences", "slo", "admission", "scheduler", "queue_sample_interval_ms", "requests",
                  "cache"});
  ServingOptions& o = out.options;
  if (auto m = sv.find("mode")) o.disaggregated = m->as_choice({"aggregated", "disaggregated"}) == "disaggregated";
  if (auto v = sv.find("replicas")) o.replicas = read_int<int>(*v, limit::replicas);
  if (auto v = sv.find("prefill_replicas")) o.prefill_replicas = read_int<int>(*v, limit::replicas);
  if (auto v = sv.find("decode_replicas")) o.decode_replicas = read_int<int>(*v, limit::replicas);
  o.limits = read_limits(sv, "max_sequences", o.limits);
  o.decode_limits = o.limits;
  if (auto v = sv.find("decode_max_sequences")) o.decode_limits.max_sequences = read_int<int64_t>(*v, limit::batch);
  if (auto slo = sv.find("slo")) {
    slo->expect_keys({"ttft_ms", "tpot_ms"});
    if (auto v = slo->find("ttft_ms")) o.slo.ttft_ms = v->as_positive();
    if (auto v = slo->find("tpot_ms")) o.slo.tpot_ms = v->as_positive();
  }
  if (auto a = sv.find("admission")) {
    o.admission = a->as_choice({"accept_all", "slo"}) == "slo" ? Admission::slo : Admission::accept_all;
    if (o.admission == Admission::slo && o.slo.ttft_ms <= 0 && o.slo.tpot_ms <= 0) {
      a->fail("admission 'slo' needs serving.slo.ttft_ms or serving.slo.tpot_ms");
    }
  }
  if (auto v = sv.find("scheduler")) {
    std::tie(o.scheduler, o.scheduler_params) = name_and_params(*v);
    Schedulers::instance().make(*v);  // the name and parameters are checked here, against the file
  }
  if (auto v = sv.find("queue_sample_interval_ms")) {
    o.queue_sample_interval_ms = v->as_positive();
    // Finer than this, adding the interval to a clock of hours no longer moves it.
    if (o.queue_sample_interval_ms < limit::queue_sample_interval.value) {
      v->fail(fmt::format("{:g} ms is below {:g} ms, the limit on {}", o.queue_sample_interval_ms,
                          limit::queue_sample_interval.value, limit::queue_sample_interval.what));
    }
  }
  out.cache = sv.find("cache");

  const YamlNode rq = sv["requests"];
  rq.expect_keys(
      {"trace", "limit", "time_scale", "count", "rate_per_s", "input_tokens", "output_tokens", "cached_tokens"});
  RequestSource& src = out.requests;
  if (auto t = rq.find("trace")) {
    for (const char* k : {"count", "rate_per_s", "input_tokens", "output_tokens", "cached_tokens"}) {
      if (rq.has(k)) rq[k].fail("give either a trace or a fixed-rate stream (count, rate_per_s, ...), not both");
    }
    src.trace_path = t->as_string();
    if (auto v = rq.find("limit")) src.limit = read_int<int64_t>(*v, limit::requests);
    if (auto v = rq.find("time_scale")) src.time_scale = v->as_positive();
  } else {
    constexpr IntLimit tokens = at_least(limit::tokens, 1);
    src.count = read_int<int64_t>(rq["count"], limit::requests);
    src.rate_per_s = rq["rate_per_s"].as_positive();
    src.input_tokens = read_int<int64_t>(rq["input_tokens"], tokens);
    src.output_tokens = read_int<int64_t>(rq["output_tokens"], tokens);
    if (auto v = rq.find("cached_tokens")) src.cached_tokens = read_int<int64_t>(*v, limit::tokens);
    if (src.cached_tokens < 0 || src.cached_tokens >= src.input_tokens) {
      rq["cached_tokens"].fail(fmt::format("expected 0 <= cached_tokens < input_tokens ({})", src.input_tokens));
    }
  }
  return out;
}

ServingScenario load_serving_scenario(const std::string& path, const DataPaths& data,
                                      const std::vector<std::string>& sets) {
  ServingScenario s = parse_serving_scenario(read_file(path), path, data, sets);
  // A relative trace path is read from the serving file's folder, wherever the command runs.
  const std::filesystem::path trace(s.requests.trace_path);
  if (!trace.empty() && trace.is_relative()) {
    s.requests.trace_path = (std::filesystem::path(path).parent_path() / trace).lexically_normal().string();
  }
  return s;
}

Workload fixed_rate_workload(const RequestSource& src) {
  K3_CHECK(src.count > 0 && src.rate_per_s > 0, "fixed-rate stream needs a count and a rate");
  Workload w;
  w.requests.reserve(src.count);
  const double interval_ms = 1000.0 / src.rate_per_s;
  for (int64_t i = 0; i < src.count; ++i) {
    workload::Request r;
    r.id = i;
    r.arrival_ms = double(i) * interval_ms;
    r.input_tokens = src.input_tokens;
    r.output_tokens = src.output_tokens;
    w.requests.push_back(r);
  }
  w.cached_prefix_tokens.assign(src.count, src.cached_tokens);
  return w;
}

}  // namespace k3::serving
