#include "sim/plan/plan.h"

#include "core/error.h"
#include "core/hardware.h"
#include "core/limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <tuple>

namespace k3::plan {

namespace {

template <typename T>
std::vector<T> read_list(const YamlNode& parent, const std::string& key, std::vector<T> fallback, auto read_one) {
  auto n = parent.find(key);
  if (!n) return fallback;
  std::vector<T> out;
  if (n->is_sequence()) {
    for (const YamlNode& item : n->items()) out.push_back(read_one(item));
  } else {
    out.push_back(read_one(*n));
  }
  if (out.empty()) n->fail("expected at least one value");
  return out;
}

// Nearest-rank percentile, as serving::percentiles.
double at_percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double r = std::ceil(q / 100.0 * double(v.size()));
  return v[static_cast<std::size_t>(std::clamp(r, 1.0, double(v.size()))) - 1];
}

// TTFT and TPOT at the SLO's percentile over a run's served requests (TPOT of those with more than one token).
struct SloLatencies {
  double ttft_ms = 0, tpot_ms = 0;
};
SloLatencies slo_latencies(const serving::ServingResult& r, double percentile) {
  std::vector<double> ttft, tpot;
  for (const serving::RequestOutcome& q : r.requests) {
    if (q.rejected) continue;
    ttft.push_back(q.ttft_ms());
    if (q.output_tokens > 1) tpot.push_back(q.tpot_ms());
  }
  return {at_percentile(std::move(ttft), percentile), at_percentile(std::move(tpot), percentile)};
}

}  // namespace

PlanSpace read_plan_space(const YamlNode& plan, const serving::ServingScenario& base) {
  plan.expect_keys({"hardware", "tp", "attention_dp", "ep", "max_sequences", "max_batched_tokens", "modes", "pd_ratios",
                    "kv_cache", "kda_state", "max_replicas", "max_gpus", "slo_percentile", "max_rejected_fraction",
                    "sample_requests", "rank_by"});
  PlanSpace s;
  const Parallelism& par = base.deployment.parallelism;
  auto degree = [](const YamlNode& n) { return read_int<int>(n, limit::parallel_degree); };
  s.hardware = read_list<std::string>(plan, "hardware", {}, [](const YamlNode& n) { return n.as_string(); });
  if (s.hardware.empty()) plan["hardware"].fail("name the hardware to search (e.g. [h200-sxm, b200])");
  s.tp = read_list<int>(plan, "tp", {par.tp}, degree);
  s.attention_dp = read_list<int>(plan, "attention_dp", {par.attention_dp}, degree);
  s.ep = read_list<int>(plan, "ep", {par.ep}, degree);
  s.max_sequences = read_list<int64_t>(plan, "max_sequences", {base.options.limits.max_sequences},
                                       [](const YamlNode& n) { return read_int<int64_t>(n, limit::batch); });
  s.max_batched_tokens =
      read_list<int64_t>(plan, "max_batched_tokens", {base.options.limits.max_batched_tokens},
                         [](const YamlNode& n) { return read_int<int64_t>(n, at_least(limit::tokens, 1)); });
  s.modes = read_list<std::string>(plan, "modes", {base.options.disaggregated ? "disaggregated" : "aggregated"},
                                   [](const YamlNode& n) {
                                     return n.as_choice({"aggregated", "disaggregated"});
                                   });
  s.pd_ratios = read_list<std::pair<int, int>>(plan, "pd_ratios", {{0, 0}}, [](const YamlNode& n) {
    const std::string text = n.as_string();
    if (text == "auto") return std::pair<int, int>{0, 0};
    long long p = 0, d = 0;
    char colon = 0;
    if (std::sscanf(text.c_str(), "%lld%c%lld", &p, &colon, &d) != 3 || colon != ':' || p <= 0 || d <= 0) {
      n.fail(fmt::format("expected auto or a prefill:decode ratio such as \"1:3\", got '{}'", text));
    }
    if (std::max(p, d) > limit::replicas.max) {
      n.fail(exceeds(std::max(p, d), limit::replicas));
    }
    return std::pair<int, int>{static_cast<int>(p), static_cast<int>(d)};
  });
  auto storage = [](std::vector<std::string> allowed) {
    return [allowed](const YamlNode& n) {
      StorageFormat f{};
      parse_storage_format(n.as_choice(allowed), &f);
      return f;
    };
  };
  s.kv_cache =
      read_list<StorageFormat>(plan, "kv_cache", {base.deployment.precision.kv_cache}, storage({"bf16", "fp8"}));
  s.kda_state =
      read_list<StorageFormat>(plan, "kda_state", {base.deployment.precision.kda_state}, storage({"fp32", "bf16"}));
  if (auto v = plan.find("max_replicas")) s.max_replicas = read_int<int>(*v, limit::replicas);
  if (auto v = plan.find("max_gpus")) s.max_gpus = read_int<int>(*v, limit::gpus);
  if (auto v = plan.find("slo_percentile")) {
    s.slo_percentile = v->as_positive();
    if (s.slo_percentile > 100) v->fail("expected a percentile in (0, 100]");
  }
  if (auto v = plan.find("max_rejected_fraction")) {
    s.max_rejected_fraction = v->as_non_negative();
    if (s.max_rejected_fraction >= 1) v->fail("expected a fraction in [0, 1)");
  }
  if (auto v = plan.find("sample_requests")) s.sample_requests = read_int<int64_t>(*v, limit::requests);
  if (auto v = plan.find("rank_by")) s.rank_by = v->as_choice({"gpus", "cost"});
  if (base.options.slo.ttft_ms <= 0 && base.options.slo.tpot_ms <= 0) {
    plan.fail("planning needs an objective: set serving.slo.ttft_ms and/or serving.slo.tpot_ms");
  }
  return s;
}

Prices load_prices(const std::string& path) {
  const YamlNode y = YamlNode::load_file(path);
  y.expect_keys({"sources", "prices_per_gpu_hour"});
  const YamlNode sources = y["sources"];
  Prices p;
  const YamlNode table = y["prices_per_gpu_hour"];
  for (const auto& [name, e] : table.entries()) {
    e.expect_keys({"value", "source"});
    const std::string src = e["source"].as_string();
    if (!sources.has(src)) e["source"].fail(fmt::format("source '{}' is not listed under 'sources'", src));
    p.per_gpu_hour[name] = e["value"].as_positive();
    p.source[name] = sources[src].as_string();
  }
  return p;
}

std::string to_string(Refusal r) {
  switch (r) {
    case Refusal::none: return "feasible";
    case Refusal::layout: return "layout refused";
    case Refusal::weights: return "weights do not fit";
    case Refusal::one_sequence: return "one sequence misses TPOT";
    case Refusal::request_memory: return "a request does not fit";
    case Refusal::estimate_replicas: return "first estimate > max_replicas";
    case Refusal::estimate_gpus: return "first estimate > max_gpus";
    case Refusal::slos_missed: return "SLOs missed at the limit";
  }
  return "?";
}

std::string Candidate::label() const {
  // A sized P:D shows its x:y once sized, "auto" before.
  std::string mode = !disaggregated ? "agg"
                     : pd_sized && prefill_per_unit == 0
                         ? "disagg auto"
                         : fmt::format("disagg {}:{}", prefill_per_unit, decode_per_unit);
  std::string formats;
  if (kv_cache != StorageFormat::bf16) formats += " kv " + to_string(kv_cache);
  if (kda_state != StorageFormat::fp32) formats += " state " + to_string(kda_state);
  return fmt::format("{} tp{} dp{} ep{} b{} t{}{} {}", hardware, parallelism.tp, parallelism.attention_dp,
                     parallelism.ep, limits.max_sequences, limits.max_batched_tokens, formats, mode);
}

std::pair<int, int> size_pd(double rate_per_s, double prefill_rate_per_s, double decode_rate_per_s) {
  auto fewest = [rate_per_s](double per_replica) {
    const double q = rate_per_s / per_replica;
    if (!(per_replica > 0) || !(q <= double(std::numeric_limits<int>::max()))) return std::numeric_limits<int>::max();
    // A rate that is a whole multiple up to rounding (40 / 10) needs that many, not one more.
    return std::max(1, static_cast<int>(std::ceil(q * (1 - 1e-12))));
  };
  return {fewest(prefill_rate_per_s), fewest(decode_rate_per_s)};
}

std::string plan_defaults_file(const DataPaths& data) {
  return (std::filesystem::path(data.prices_dir).parent_path() / "serving" / "plan-defaults.yaml").string();
}

std::vector<std::string> PlanQuestion::sets() const {
  std::vector<std::string> out;
  if (!model.empty()) out.push_back("model=" + model);
  if (!hardware.empty()) {
    out.push_back("hardware=" + hardware.front());
    std::string list;
    for (const std::string& h : hardware) list += (list.empty() ? "" : ", ") + h;
    out.push_back("plan.hardware=[" + list + "]");
  }
  if (input_tokens > 0) out.push_back(fmt::format("serving.requests.input_tokens={}", input_tokens));
  if (output_tokens > 0) out.push_back(fmt::format("serving.requests.output_tokens={}", output_tokens));
  if (rate_per_s > 0) out.push_back(fmt::format("serving.requests.rate_per_s={}", rate_per_s));
  if (prefix_hit >= 0) {
    K3_CHECK(input_tokens > 0, "a prefix hit rate needs the prompt length");
    const auto cached = static_cast<int64_t>(std::floor(prefix_hit * double(input_tokens)));
    out.push_back(fmt::format("serving.requests.cached_tokens={}", cached));
  }
  if (ttft_ms > 0) out.push_back(fmt::format("serving.slo.ttft_ms={}", ttft_ms));
  if (tpot_ms > 0) out.push_back(fmt::format("serving.slo.tpot_ms={}", tpot_ms));
  if (max_gpus > 0) out.push_back(fmt::format("plan.max_gpus={}", max_gpus));
  return out;
}

std::vector<std::size_t> pareto_front(const std::vector<std::pair<double, double>>& pts) {
  std::vector<std::size_t> order(pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) order[i] = i;
  // By x descending (then y descending): a point is on the front when its y beats every y before it.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(pts[b].first, pts[b].second, a) < std::tie(pts[a].first, pts[a].second, b);
  });
  std::vector<std::size_t> front;
  double best_y = -std::numeric_limits<double>::infinity();
  for (std::size_t i : order) {
    if (pts[i].second > best_y) {
      front.push_back(i);
      best_y = pts[i].second;
    }
  }
  std::reverse(front.begin(), front.end());
  return front;
}

namespace {

struct Evaluator {
  const serving::ServingScenario& base;
  const PlanSpace& space;
  const serving::Workload& work;
  double rate;
  double mean_input = 0, mean_cached = 0, mean_output = 0, trace_span_ms = 0;
  std::size_t n = 0;

  Evaluator(const serving::ServingScenario& b, const PlanSpace& s, const serving::Workload& w, double r)
      : base(b), space(s), work(w), rate(r) {
    n = std::min<std::size_t>(w.requests.size(), static_cast<std::size_t>(s.sample_requests));
    K3_CHECK(n > 0, "planning needs requests");
    for (std::size_t i = 0; i < n; ++i) {
      mean_input += double(w.requests[i].input_tokens) / double(n);
      mean_output += double(std::max<int64_t>(1, w.requests[i].output_tokens)) / double(n);
      if (!w.cached_prefix_tokens.empty()) mean_cached += double(w.cached_prefix_tokens[i]) / double(n);
    }
    trace_span_ms = w.requests[n - 1].arrival_ms - w.requests[0].arrival_ms;
  }

  // The sample at `unit_rate` requests/s: the trace's own arrival pattern stretched to that mean
  // rate, or evenly spaced when it has no spread.
  std::vector<workload::Request> sample(double unit_rate) const {
    std::vector<workload::Request> out(work.requests.begin(), work.requests.begin() + static_cast<std::ptrdiff_t>(n));
    const double want_span_ms = double(n - 1) * 1000.0 / unit_rate;
    const double t0 = out.front().arrival_ms;
    for (std::size_t i = 0; i < n; ++i) {
      out[i].arrival_ms =
          trace_span_ms > 0 ? (out[i].arrival_ms - t0) * want_span_ms / trace_span_ms : double(i) * 1000.0 / unit_rate;
    }
    return out;
  }

  // A trace's bursts would all land on one simulated replica if its arrivals were only stretched,
  // so the sample is what one of `units` replicas receives when the whole trace is dealt out in turn:
  // requests 0, units, 2·units, ... (at most sample_requests), at the trace's arrival times scaled to
  // `rate`, with their cached-prefix counts.
  std::vector<workload::Request> dealt(int units, std::vector<int64_t>* cached) const {
    const std::size_t all = work.requests.size();
    const double full_rate =
        all > 1 ? double(all - 1) * 1000.0 / (work.requests.back().arrival_ms - work.requests.front().arrival_ms)
                : rate;
    const double scale = std::isfinite(full_rate) && full_rate > 0 ? full_rate / rate : 1.0;
    const double t0 = work.requests.front().arrival_ms;
    std::vector<workload::Request> out;
    cached->clear();
    for (std::size_t i = 0; i < all && out.size() < n; i += static_cast<std::size_t>(units)) {
      workload::Request q = work.requests[i];
      q.arrival_ms = (q.arrival_ms - t0) * scale;
      out.push_back(q);
      if (!work.cached_prefix_tokens.empty()) cached->push_back(work.cached_prefix_tokens[i]);
    }
    return out;
  }

  // The cached-prefix counts of the first n requests (the fixed-rate sample's).
  std::vector<int64_t> first_cached() const {
    return {work.cached_prefix_tokens.begin(),
            work.cached_prefix_tokens.begin() + static_cast<std::ptrdiff_t>(work.cached_prefix_tokens.empty() ? 0 : n)};
  }

  // One trial of one side of a sized P:D with `count` replicas on that side: one replica's share of the rate
  // (rate / count, or for a trace what one of `count` replicas is dealt). The prefill side is one prefill replica whose
  // requests end with their first token (TTFT is the prefill replica's alone); the decode side is one decode replica
  // fed by ceil(prefill / count) prefill replicas, so that no prefill replica carries more than in the deployment.
  struct SideTrial {
    bool ok = false;
    double metric_ms = 0;  // the side's SLO metric at the percentile: TTFT (prefill) or TPOT (decode)
    double ttft_ms = 0, tpot_ms = 0;
    double output_tokens_per_s = 0, tokens_per_s_per_user = 0;
  };
  SideTrial side_trial(bool prefill_side, int count, int prefill_count, const serving::ReplicaModel& model,
                       serving::ServingOptions o) const {
    std::vector<int64_t> cached = first_cached();
    std::vector<workload::Request> requests = work.from_trace ? dealt(count, &cached) : sample(rate / count);
    o.disaggregated = true;
    o.decode_replicas = 1;
    o.prefill_replicas = prefill_side ? 1 : (prefill_count + count - 1) / count;
    if (prefill_side) {
      for (workload::Request& q : requests) q.output_tokens = 1;
    }
    const serving::ServingResult r = serving::simulate(requests, cached, model, o);
    const SloLatencies at = slo_latencies(r, space.slo_percentile);
    SideTrial t;
    t.ttft_ms = at.ttft_ms;
    t.tpot_ms = at.tpot_ms;
    t.metric_ms = prefill_side ? t.ttft_ms : t.tpot_ms;
    const double slo_ms = prefill_side ? base.options.slo.ttft_ms : base.options.slo.tpot_ms;
    t.ok = r.completed > 0 && (slo_ms <= 0 || t.metric_ms <= slo_ms) &&
           double(r.rejected) <= space.max_rejected_fraction * double(r.requests.size());
    t.output_tokens_per_s = r.output_tokens_per_s;
    t.tokens_per_s_per_user = r.tokens_per_s_per_user;
    return t;
  }

  // The fewest replicas of one side, from `start` (what the rates give) up to `most`, whose share meets the side's SLO:
  // grown by 25 % (at least 1) until one passes, then bisected between the last count that failed and the first that
  // passed. As for a fixed ratio, the growth stops once the missed SLO improves by under 1 % from one count to the
  // next (`stalled`: the step time itself misses it).
  struct Side {
    int count = 0;  // the fewest that passed, or the last tried
    bool ok = false, stalled = false;
    SideTrial trial;  // of `count`
  };
  Side fewest_replicas(bool prefill_side, int start, int most, int prefill_count, Candidate& c,
                       const serving::ReplicaModel& model, const serving::ServingOptions& o) const {
    const double slo_ms = prefill_side ? base.options.slo.ttft_ms : base.options.slo.tpot_ms;
    Side pass, fail;
    int count = start;
    while (count <= most) {
      c.trials += 1;
      const SideTrial t = side_trial(prefill_side, count, prefill_count, model, o);
      if (t.ok) {
        pass = {count, true, false, t};
        break;
      }
      const bool missed = slo_ms > 0 && t.metric_ms > slo_ms;
      if (fail.count > 0 && missed && t.metric_ms > 0.99 * fail.trial.metric_ms) return {count, false, true, t};
      fail = {count, false, false, t};
      if (count == most) break;
      count = static_cast<int>(std::min<double>(most, std::max(count + 1.0, std::ceil(count * 1.25))));
    }
    if (!pass.ok) return fail;
    while (fail.count > 0 && pass.count - fail.count > 1) {
      const int mid = fail.count + (pass.count - fail.count) / 2;
      c.trials += 1;
      const SideTrial t = side_trial(prefill_side, mid, prefill_count, model, o);
      (t.ok ? pass : fail) = {mid, t.ok, false, t};
    }
    return pass;
  }

  // A sized P:D: one replica's rate on each side, the fewest x:y those rates give, then each side simulated at its
  // share and raised until its SLO holds (docs/plan.md#sized-pd).
  void evaluate_sized(Candidate& c, const serving::ReplicaModel& model, const serving::ServingOptions& o,
                      double prefill_us, int64_t batch) const {
    const serving::Slo& slo = base.options.slo;
    // Prefill: the token budget's throughput. Decode: the largest batch whose step meets the TPOT SLO (one sequence
    // does, checked before), each request taking its answer's steps.
    auto decode_step_us = [&](int64_t b) {
      serving::BatchShape shape;
      shape.decode_sequences = b;
      shape.decode_context_tokens = double(b) * (mean_input + mean_output / 2);
      return model.step.step_us(shape);
    };
    int64_t b = std::max<int64_t>(1, batch);
    if (slo.tpot_ms > 0 && decode_step_us(b) > slo.tpot_ms * 1000.0) {
      int64_t lo = 1, hi = b;  // lo meets the SLO, hi does not
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (decode_step_us(mid) <= slo.tpot_ms * 1000.0 ? lo : hi) = mid;
      }
      b = lo;
    }
    c.decode_batch = b;
    c.prefill_rate_per_s = 1e6 / prefill_us;
    c.decode_rate_per_s = double(b) / (mean_output * decode_step_us(b) / 1e6);
    const std::pair<int, int> rated = size_pd(rate, c.prefill_rate_per_s, c.decode_rate_per_s);
    const int x0 = rated.first, y0 = rated.second;  // not a structured binding: lambdas below capture them
    c.rated_prefill = x0;
    c.rated_decode = y0;
    if (std::max(x0, y0) > space.max_replicas) {
      c.refusal = Refusal::estimate_replicas;
      c.needed = std::max(x0, y0);
      c.reason =
          fmt::format("the per-side rates need {}:{} replicas > plan.max_replicas {}", x0, y0, space.max_replicas);
      return;
    }
    const int g = model.gpus;
    if (space.max_gpus > 0 && int64_t(x0 + y0) * g > space.max_gpus) {
      c.refusal = Refusal::estimate_gpus;
      c.needed = (x0 + y0) * g;
      c.reason = fmt::format("the per-side rates need {}:{} replicas of {} GPUs = {} GPUs > plan.max_gpus {}", x0, y0,
                             g, c.needed, space.max_gpus);
      return;
    }
    auto most = [&](int other) {
      return space.max_gpus > 0 ? std::min(space.max_replicas, space.max_gpus / g - other) : space.max_replicas;
    };
    int prefill_count = 0;  // once the prefill side passed
    auto missed = [&](bool prefill_side, const Side& s, int limit) {
      const char* side = prefill_side ? "prefill" : "decode";
      c.refusal = Refusal::slos_missed;
      c.needed = s.count;
      if (s.count == 0) {  // the other side grew, and the GPU budget leaves this side fewer than its rate needs
        c.needed = prefill_side ? x0 : y0;
        c.reason = fmt::format(
            "{} prefill replicas meet TTFT; plan.max_gpus {} leaves fewer than the {} decode "
            "replicas the rates need",
            prefill_count, space.max_gpus, y0);
        return;
      }
      const std::string metric = prefill_side
                                     ? fmt::format("p{:g} TTFT {:.0f} ms", space.slo_percentile, s.trial.ttft_ms)
                                     : fmt::format("p{:g} TPOT {:.1f} ms", space.slo_percentile, s.trial.tpot_ms);
      if (s.stalled) {
        c.reason = fmt::format("SLOs missed, and more {} replicas stopped helping at {} ({})", side, s.count, metric);
      } else {
        const std::string bound = limit == space.max_replicas ? fmt::format("plan.max_replicas {}", space.max_replicas)
                                                              : fmt::format("plan.max_gpus {}", space.max_gpus);
        c.reason = fmt::format("SLOs missed with {} {} replicas, the most under {} ({})", s.count, side, bound, metric);
      }
    };
    const Side prefill = fewest_replicas(true, x0, most(y0), 0, c, model, o);
    c.ttft_ms = prefill.trial.ttft_ms;
    if (!prefill.ok) return missed(true, prefill, most(y0));
    prefill_count = prefill.count;
    const Side decode = fewest_replicas(false, y0, most(prefill.count), prefill.count, c, model, o);
    c.tpot_ms = decode.trial.tpot_ms;
    if (!decode.ok) return missed(false, decode, most(prefill.count));
    c.feasible = true;
    c.prefill_per_unit = prefill.count;
    c.decode_per_unit = decode.count;
    c.replicas = 1;
    c.gpus = (prefill.count + decode.count) * g;
    c.tokens_per_s_per_gpu = decode.trial.output_tokens_per_s * decode.count / c.gpus;
    c.tokens_per_s_per_user = decode.trial.tokens_per_s_per_user;
  }

  void evaluate(Candidate& c, const serving::ReplicaModel& model) const {
    const serving::Slo& slo = base.options.slo;
    serving::ServingOptions o = base.options;
    o.limits = c.limits;
    o.decode_limits = c.limits;
    o.disaggregated = c.disaggregated;
    o.replicas = 1;
    o.prefill_replicas = c.prefill_per_unit;
    o.decode_replicas = c.decode_per_unit;
    o.queue_sample_interval_ms = 0;
    const int unit_gpus = model.gpus * (c.disaggregated ? c.prefill_per_unit + c.decode_per_unit : 1);

    serving::BatchShape one;
    one.add_decode(mean_input + mean_output / 2);
    if (slo.tpot_ms > 0 && model.step.step_us(one) > slo.tpot_ms * 1000.0) {
      c.refusal = Refusal::one_sequence;
      c.reason = fmt::format("one sequence alone decodes at {:.1f} ms per token", model.step.step_us(one) / 1000.0);
      return;
    }
    const double seq_bytes = model.sequence_bytes(mean_input + mean_output);
    const double fit = std::floor(model.capacity_bytes * model.attention_dp / seq_bytes);
    if (fit < 1) {
      c.refusal = Refusal::request_memory;
      c.reason = "a mean request's KV and state do not fit";
      return;
    }
    // First estimate: prefill work plus the request's share of full decode steps.
    const double batch = std::min(double(c.limits.max_sequences), fit);
    serving::BatchShape full, chunk;
    for (int i = 0; i < static_cast<int>(batch); ++i) full.add_decode(mean_input + mean_output / 2);
    chunk.add_prefill(double(c.limits.max_batched_tokens), 0);
    const double prefill_us =
        (mean_input - mean_cached) * model.step.step_us(chunk) / double(c.limits.max_batched_tokens);
    const double decode_us = mean_output * model.step.step_us(full) / batch;
    if (c.pd_sized) return evaluate_sized(c, model, o, prefill_us, static_cast<int64_t>(batch));
    const double estimate = c.disaggregated ? std::max(std::ceil(rate * prefill_us / 1e6 / c.prefill_per_unit),
                                                       std::ceil(rate * decode_us / 1e6 / c.decode_per_unit))
                                            : std::ceil(rate * (prefill_us + decode_us) / 1e6);
    const char* unit_name = c.disaggregated ? "units" : "replicas";
    // Past max_replicas the search ends at once; the estimate is compared as a double (it may exceed any int, or be
    // NaN), and only a count within the limit becomes an int.
    if (!(estimate <= double(space.max_replicas))) {
      c.refusal = Refusal::estimate_replicas;
      c.needed = estimate <= double(std::numeric_limits<int>::max()) ? static_cast<int>(estimate)
                                                                     : std::numeric_limits<int>::max();  // NaN too
      c.reason = fmt::format("the first estimate needs {:.0f} {} > plan.max_replicas {}", estimate, unit_name,
                             space.max_replicas);
      return;
    }
    int units = std::max(1, static_cast<int>(estimate));
    if (space.max_gpus > 0 && int64_t(units) * unit_gpus > space.max_gpus) {
      c.refusal = Refusal::estimate_gpus;
      c.needed = units * unit_gpus;
      c.reason = fmt::format("the first estimate needs {} {} of {} GPUs = {} GPUs > plan.max_gpus {}", units, unit_name,
                             unit_gpus, units * unit_gpus, space.max_gpus);
      return;
    }
    std::vector<int64_t> cached = first_cached();
    int tried = units;
    double last_ttft = 0, last_tpot = 0;
    while (units <= space.max_replicas && (space.max_gpus <= 0 || units * unit_gpus <= space.max_gpus)) {
      tried = units;
      c.trials += 1;
      std::vector<workload::Request> requests;
      if (work.from_trace) {
        requests = dealt(units, &cached);
      } else {
        requests = sample(rate / units);
      }
      const serving::ServingResult r = serving::simulate(requests, cached, model, o);
      const SloLatencies at = slo_latencies(r, space.slo_percentile);
      c.ttft_ms = at.ttft_ms;
      c.tpot_ms = at.tpot_ms;
      const bool ok = r.completed > 0 && (slo.ttft_ms <= 0 || c.ttft_ms <= slo.ttft_ms) &&
                      (slo.tpot_ms <= 0 || c.tpot_ms <= slo.tpot_ms) &&
                      double(r.rejected) <= space.max_rejected_fraction * double(r.requests.size());
      if (ok) {
        c.feasible = true;
        c.replicas = units;
        c.gpus = units * unit_gpus;
        c.tokens_per_s_per_gpu = r.output_tokens_per_s / unit_gpus;
        c.tokens_per_s_per_user = r.tokens_per_s_per_user;
        return;
      }
      // More replicas only lower each one's load: once the SLOs that are missed improve by under 1 % from one
      // count to the next, the step time itself is what misses them, and larger counts are not tried.
      const bool ttft_missed = slo.ttft_ms > 0 && c.ttft_ms > slo.ttft_ms;
      const bool tpot_missed = slo.tpot_ms > 0 && c.tpot_ms > slo.tpot_ms;
      const bool stalled = c.trials > 1 && (ttft_missed || tpot_missed) &&
                           (!ttft_missed || c.ttft_ms > 0.99 * last_ttft) &&
                           (!tpot_missed || c.tpot_ms > 0.99 * last_tpot);
      if (stalled) {
        c.refusal = Refusal::slos_missed;
        c.needed = tried;
        c.reason = fmt::format("SLOs missed, and more {} stopped helping at {} (p{:g} TTFT {:.0f} ms, TPOT {:.1f} ms)",
                               unit_name, tried, space.slo_percentile, c.ttft_ms, c.tpot_ms);
        return;
      }
      last_ttft = c.ttft_ms;
      last_tpot = c.tpot_ms;
      units = std::max(units + 1, static_cast<int>(std::ceil(units * 1.25)));
    }
    c.refusal = Refusal::slos_missed;
    c.needed = tried;
    const std::string limit = units > space.max_replicas ? fmt::format("plan.max_replicas {}", space.max_replicas)
                                                         : fmt::format("plan.max_gpus {}", space.max_gpus);
    c.reason = fmt::format("SLOs missed with {} {}, the most under {} (p{:g} TTFT {:.0f} ms, TPOT {:.1f} ms)", tried,
                           unit_name, limit, space.slo_percentile, c.ttft_ms, c.tpot_ms);
  }
};

}  // namespace

PlanResult run_plan(const serving::ServingScenario& base, const PlanSpace& space, const serving::Workload& workload,
                    double rate_per_s, const Prices& prices, const DataPaths& data,
                    const std::function<void(std::size_t, std::size_t)>& progress) {
  K3_CHECK(rate_per_s > 0, "request rate must be positive");
  PlanResult out;
  out.request_rate_per_s = rate_per_s;
  // Enumerate first, so the progress line knows the total.
  for (const std::string& hw : space.hardware) {
    for (int tp : space.tp) {
      for (int dp : space.attention_dp) {
        for (int ep : space.ep) {
          for (int64_t tokens : space.max_batched_tokens) {
            for (int64_t seqs : space.max_sequences) {
              for (const std::string& mode : space.modes) {
                const bool disagg = mode == "disaggregated";
                const std::vector<std::pair<int, int>> ratios =
                    disagg ? space.pd_ratios : std::vector<std::pair<int, int>>{{0, 0}};
                for (auto [p, d] : ratios) {
                  for (StorageFormat kv : space.kv_cache) {
                    for (StorageFormat state : space.kda_state) {
                      Candidate c;
                      c.hardware = hw;
                      c.parallelism = Parallelism{tp, dp, ep, 1};
                      c.limits = {seqs, tokens};
                      c.disaggregated = disagg;
                      c.pd_sized = disagg && p == 0;
                      c.prefill_per_unit = p;
                      c.decode_per_unit = d;
                      c.kv_cache = kv;
                      c.kda_state = state;
                      out.candidates.push_back(c);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  const Evaluator eval(base, space, workload, rate_per_s);
  std::map<std::string, Hardware> hardware;
  // Candidates sharing a deployment and token budget share one replica model (built on first use).
  std::string model_key;
  std::unique_ptr<serving::ReplicaModel> model;
  std::string model_error;
  Refusal model_refusal = Refusal::none;
  for (std::size_t i = 0; i < out.candidates.size(); ++i) {
    Candidate& c = out.candidates[i];
    if (!hardware.count(c.hardware)) hardware.emplace(c.hardware, load_hardware_by_name(c.hardware, data.hardware_dir));
    const std::string key =
        fmt::format("{} {} {} {} {} {} {}", c.hardware, c.parallelism.tp, c.parallelism.attention_dp, c.parallelism.ep,
                    c.limits.max_batched_tokens, to_string(c.kv_cache), to_string(c.kda_state));
    if (key != model_key) {
      model_key = key;
      model.reset();
      model_error.clear();
      Scenario s = base.deployment;
      s.hardware = hardware.at(c.hardware);
      s.parallelism = c.parallelism;
      s.precision.kv_cache = c.kv_cache;
      s.precision.kda_state = c.kda_state;
      s.phase = Phase::decode(std::max(1, c.parallelism.attention_dp), 0);
      try {
        validate(s);
        model = std::make_unique<serving::ReplicaModel>(s, c.limits.max_batched_tokens);
        if (model->capacity_bytes <= 0) {
          model_refusal = Refusal::weights;
          model_error =
              fmt::format("weights need {:.1f} GiB more than a GPU has", -model->capacity_bytes / double(1ull << 30));
        }
      } catch (const InputError& e) {
        model_refusal = Refusal::layout;
        model_error = e.what();
        const std::size_t colon = model_error.find(": ");  // drop the "<file>: " prefix
        if (colon != std::string::npos) model_error = model_error.substr(colon + 2);
      }
    }
    if (model_error.empty()) {
      eval.evaluate(c, *model);
    } else {
      c.refusal = model_refusal;
      c.reason = model_error;
    }
    if (c.feasible) {
      auto price = prices.per_gpu_hour.find(c.hardware);
      c.dollars_per_hour = price == prices.per_gpu_hour.end() ? 0.0 : price->second * c.gpus;
    }
    if (progress) progress(i + 1, out.candidates.size());
  }

  std::vector<std::pair<double, double>> points;
  std::vector<std::size_t> feasible;
  for (std::size_t i = 0; i < out.candidates.size(); ++i) {
    if (!out.candidates[i].feasible) continue;
    feasible.push_back(i);
    points.emplace_back(out.candidates[i].tokens_per_s_per_gpu, out.candidates[i].tokens_per_s_per_user);
  }
  for (std::size_t k : pareto_front(points)) out.pareto.push_back(feasible[k]);
  out.ranked = feasible;
  const bool by_cost = space.rank_by == "cost";
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [&](std::size_t a, std::size_t b) {
    const Candidate& x = out.candidates[a];
    const Candidate& y = out.candidates[b];
    // Unpriced hardware ranks after every priced one when ranking by cost.
    const double cx = x.dollars_per_hour > 0 ? x.dollars_per_hour : 1e300,
                 cy = y.dollars_per_hour > 0 ? y.dollars_per_hour : 1e300;
    if (by_cost && cx != cy) return cx < cy;
    if (x.gpus != y.gpus) return x.gpus < y.gpus;
    return x.tokens_per_s_per_user > y.tokens_per_s_per_user;
  });
  return out;
}

}  // namespace k3::plan
