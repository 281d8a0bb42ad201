#include "sim/plan/breakeven.h"

#include "core/error.h"
#include "core/limits.h"
#include "core/output_header.h"
#include "core/yaml_reader.h"
#include "sim/memory.h"
#include "sim/predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>

namespace k3 {

std::string to_string(BreakevenMetric m) {
  switch (m) {
    case BreakevenMetric::memory_per_request: return "memory_per_request";
    case BreakevenMetric::tpot: return "tpot";
    case BreakevenMetric::throughput_at_budget: return "throughput_at_budget";
    case BreakevenMetric::cost_per_million_tokens: return "cost_per_million_tokens";
  }
  return "?";
}

std::string unit_of(BreakevenMetric m) {
  switch (m) {
    case BreakevenMetric::memory_per_request: return "GiB";
    case BreakevenMetric::tpot: return "ms";
    case BreakevenMetric::throughput_at_budget: return "tok/s";
    case BreakevenMetric::cost_per_million_tokens: return "USD/M tokens";
  }
  return "";
}

bool higher_is_better(BreakevenMetric m) { return m == BreakevenMetric::throughput_at_budget; }

BreakevenSpec load_breakeven_spec(const std::string& path, const DataPaths& data,
                                  const std::vector<std::string>& sets) {
  const YamlNode y = YamlNode::load_file(path);
  y.expect_keys({"scenario", "workload", "input_tokens", "gpu_hour_usd"});
  BreakevenSpec s;
  const std::string ref = y["scenario"].as_string();
  const std::filesystem::path scenario_path = std::filesystem::path(path).parent_path() / ref;
  if (!std::filesystem::is_regular_file(scenario_path)) {
    y["scenario"].fail(fmt::format("no scenario file {}", scenario_path.string()));
  }
  s.deployment = load_scenario(scenario_path.string(), data, sets);
  const YamlNode w = y["workload"];
  w.expect_keys({"output_tokens", "cached_prefix_tokens", "batch"});
  s.output_tokens = read_int<long long>(w["output_tokens"], at_least(limit::tokens, 1));
  if (auto p = w.find("cached_prefix_tokens")) {
    s.cached_prefix_tokens = read_int<long long>(*p, limit::tokens);
  }
  s.batch = read_int<long long>(w["batch"], limit::batch);
  const YamlNode in = y["input_tokens"];
  in.expect_keys({"min", "max", "points"});
  s.min_input_tokens = read_int<long long>(in["min"], at_least(limit::tokens, 1));
  s.max_input_tokens = read_int<long long>(in["max"], at_least(limit::tokens, 1));
  if (s.max_input_tokens <= s.min_input_tokens) in["max"].fail("expected max > min");
  if (auto p = in.find("points")) {
    const long long n = p->as_positive_int();
    if (n < 2 || n > 10000) p->fail("expected 2..10000 points");
    s.points = static_cast<int>(n);
  }
  if (auto price = y.find("gpu_hour_usd")) {
    price->expect_keys({"value", "source"});
    s.gpu_hour_usd = (*price)["value"].as_positive();
    s.price_source = (*price)["source"].as_string();
  }
  return s;
}

namespace {

Scenario with_phase(const Scenario& base, const ModelConfig& m, const Phase& ph) {
  Scenario s = base;
  s.model = m;
  s.phase = ph;
  return s;
}

struct Models {
  ModelConfig hybrid, all_mla;
};

Models models_of(const BreakevenSpec& spec) {
  return {spec.deployment.model, with_all_attention(spec.deployment.model, AttentionKind::mla)};
}

double metric_for(const BreakevenSpec& spec, const ModelConfig& m, BreakevenMetric metric, long long input) {
  const long long final_context = spec.cached_prefix_tokens + input + spec.output_tokens;
  const long long decode_context = spec.cached_prefix_tokens + input + spec.output_tokens / 2;
  const Scenario& d = spec.deployment;
  switch (metric) {
    case BreakevenMetric::memory_per_request: {
      const Precision& p = d.precision;
      return (kv_bytes_per_token(m, p) * double(final_context) + kda_recurrent_state_bytes(m, p) +
              kda_conv_state_bytes(m, p)) /
             double(1ull << 30);
    }
    case BreakevenMetric::tpot: return predict(with_phase(d, m, Phase::decode(spec.batch, decode_context))).step_ms();
    case BreakevenMetric::throughput_at_budget:
    case BreakevenMetric::cost_per_million_tokens: {
      const Scenario probe = with_phase(d, m, Phase::decode(1, decode_context));
      const long long batch = max_batch(probe, decode_context);
      const double tok_s =
          batch > 0 ? predict(with_phase(d, m, Phase::decode(batch, decode_context))).tokens_per_s() : 0.0;
      if (metric == BreakevenMetric::throughput_at_budget) return tok_s;
      if (tok_s <= 0) return std::numeric_limits<double>::infinity();
      const double prefill_s =
          predict(with_phase(d, m, Phase::prefill(1, input, spec.cached_prefix_tokens))).step.step_us * 1e-6;
      const double seconds = prefill_s + double(spec.output_tokens) / tok_s;
      return spec.gpu_hour_usd * d.parallelism.gpus() * seconds / 3600.0 / double(spec.output_tokens) * 1e6;
    }
  }
  return 0;
}

int sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

// False where neither model fits a single request (no throughput, no cost): nothing to compare.
bool comparable(BreakevenMetric m, const MetricPair& v) {
  if (m == BreakevenMetric::throughput_at_budget) return v.hybrid > 0 || v.all_mla > 0;
  if (m == BreakevenMetric::cost_per_million_tokens) return std::isfinite(v.hybrid) || std::isfinite(v.all_mla);
  return true;
}

}  // namespace

MetricPair evaluate_breakeven_metric(const BreakevenSpec& spec, BreakevenMetric metric, long long input) {
  if (input < 1) throw InputError(fmt::format("break-even: prompt length {} must be at least 1 token", input));
  const Models m = models_of(spec);
  return {metric_for(spec, m.hybrid, metric, input), metric_for(spec, m.all_mla, metric, input)};
}

double hybrid_advantage(BreakevenMetric m, const MetricPair& v) {
  if (v.hybrid == v.all_mla) return 0.0;  // also both infinite
  return higher_is_better(m) ? v.hybrid - v.all_mla : v.all_mla - v.hybrid;
}

long long bisect_crossing(const std::function<double(long long)>& advantage, long long lo, long long hi) {
  K3_CHECK(lo < hi, "bisect_crossing needs lo < hi ({} >= {})", lo, hi);
  const int s_hi = sign(advantage(hi));
  K3_CHECK(sign(advantage(lo)) != s_hi, "bisect_crossing: no sign change between {} and {}", lo, hi);
  while (hi - lo > 1) {
    const long long mid = lo + (hi - lo) / 2;
    (sign(advantage(mid)) == s_hi ? hi : lo) = mid;
  }
  return hi;
}

bool MetricCurve::hybrid_wins(long long input) const {
  bool wins = hybrid_wins_at_min;
  for (const Crossing& c : crossings) {
    if (input >= c.input_tokens) wins = c.hybrid_wins_above;
  }
  return wins;
}

BreakevenResult solve_breakeven(const BreakevenSpec& spec) {
  if (spec.min_input_tokens < 1 || spec.max_input_tokens <= spec.min_input_tokens || spec.points < 2) {
    throw InputError(fmt::format("break-even: prompt range [{}, {}] with {} points is empty", spec.min_input_tokens,
                                 spec.max_input_tokens, spec.points));
  }
  BreakevenResult r;
  r.spec = spec;
  std::vector<long long> grid;
  const double ratio = std::log(double(spec.max_input_tokens) / spec.min_input_tokens) / (spec.points - 1);
  for (int i = 0; i < spec.points; ++i) {
    const long long t = i == spec.points - 1 ? spec.max_input_tokens
                                             : std::llround(double(spec.min_input_tokens) * std::exp(ratio * i));
    if (grid.empty() || t > grid.back()) grid.push_back(t);
  }
  for (BreakevenMetric metric : kAllBreakevenMetrics) {
    if (metric == BreakevenMetric::cost_per_million_tokens && spec.gpu_hour_usd <= 0) continue;
    MetricCurve c{metric, grid, {}, {}, false};
    for (long long t : grid) c.values.push_back(evaluate_breakeven_metric(spec, metric, t));
    auto advantage = [&](long long t) { return hybrid_advantage(metric, evaluate_breakeven_metric(spec, metric, t)); };
    c.hybrid_wins_at_min = hybrid_advantage(metric, c.values.front()) > 0;
    bool side = c.hybrid_wins_at_min;
    std::size_t previous = 0;
    for (std::size_t i = 1; i < grid.size(); ++i) {
      if (!comparable(metric, c.values[i])) {
        if (c.longest_comparable_tokens == 0) c.longest_comparable_tokens = grid[previous];
        continue;
      }
      const bool now = hybrid_advantage(metric, c.values[i]) > 0;
      const std::size_t from = previous;
      previous = i;
      if (now == side) continue;
      // Refine on "wins" vs "does not win" (a tie does not win).
      const long long at =
          bisect_crossing([&](long long t) { return advantage(t) > 0 ? 1.0 : -1.0; }, grid[from], grid[i]);
      c.crossings.push_back({at, now});
      side = now;
    }
    r.curves.push_back(std::move(c));
  }
  return r;
}

double losing_share(const MetricCurve& curve, const std::vector<long long>& lengths) {
  std::size_t losing = 0, counted = 0;
  for (long long t : lengths) {
    if (curve.longest_comparable_tokens > 0 && t > curve.longest_comparable_tokens) continue;  // fits neither model
    ++counted;
    losing += curve.hybrid_wins(t) ? 0 : 1;
  }
  return counted ? double(losing) / double(counted) : 0.0;
}

namespace {

// A unit as a column name takes it: "GiB" -> "gib", "tok/s" -> "tok_per_s", "USD/M tokens" -> "usd_per_m_tokens".
std::string csv_unit(BreakevenMetric m) {
  std::string out;
  for (char ch : unit_of(m)) {
    if (ch == '/') {
      out += "_per_";
    } else if (ch == ' ') {
      out += '_';
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  }
  return out;
}

}  // namespace

std::string breakeven_csv(const BreakevenResult& r) {
  std::string out = "input_tokens";
  for (const MetricCurve& c : r.curves) {
    out += fmt::format(",{0}_{1}_hybrid,{0}_{1}_all_mla,{0}_hybrid_wins", to_string(c.metric), csv_unit(c.metric));
  }
  out += "\n";
  if (r.curves.empty()) return out;
  for (std::size_t i = 0; i < r.curves.front().input_tokens.size(); ++i) {
    out += fmt::format("{}", r.curves.front().input_tokens[i]);
    for (const MetricCurve& c : r.curves) {
      out += fmt::format(",{:.6g},{:.6g},{}", c.values[i].hybrid, c.values[i].all_mla,
                         hybrid_advantage(c.metric, c.values[i]) > 0 ? 1 : 0);
    }
    out += "\n";
  }
  return out;
}

nlohmann::ordered_json to_json(const BreakevenResult& r, const std::vector<double>& losing_shares) {
  const BreakevenSpec& s = r.spec;
  const Scenario& d = s.deployment;
  nlohmann::ordered_json j = output_header("k3perf-breakeven", 1);
  j["deployment"] = {{"model", d.model.name},        {"hardware", d.hardware.name},
                     {"gpus", d.parallelism.gpus()}, {"tp", d.parallelism.tp},
                     {"ep", d.parallelism.ep},       {"attention_dp", d.parallelism.attention_dp}};
  j["workload"] = {{"min_input_tokens", s.min_input_tokens},
                   {"max_input_tokens", s.max_input_tokens},
                   {"output_tokens", s.output_tokens},
                   {"cached_prefix_tokens", s.cached_prefix_tokens},
                   {"batch", s.batch},
                   {"points", s.points}};
  j["gpu_hour_usd"] = s.gpu_hour_usd > 0 ? nlohmann::ordered_json(s.gpu_hour_usd) : nlohmann::ordered_json();
  j["price_source"] = s.price_source;
  nlohmann::ordered_json metrics = nlohmann::ordered_json::array();
  for (std::size_t m = 0; m < r.curves.size(); ++m) {
    const MetricCurve& c = r.curves[m];
    nlohmann::ordered_json crossings = nlohmann::ordered_json::array();
    for (const Crossing& x : c.crossings) {
      crossings.push_back({{"input_tokens", x.input_tokens}, {"hybrid_wins_above", x.hybrid_wins_above}});
    }
    nlohmann::ordered_json jm = {{"metric", to_string(c.metric)},
                                 {"unit", unit_of(c.metric)},
                                 {"higher_is_better", higher_is_better(c.metric)},
                                 {"hybrid_wins_at_min", c.hybrid_wins_at_min},
                                 {"crossings", crossings},
                                 {"longest_comparable_tokens", c.longest_comparable_tokens > 0
                                                                   ? nlohmann::ordered_json(c.longest_comparable_tokens)
                                                                   : nlohmann::ordered_json()}};
    if (m < losing_shares.size()) jm["losing_share"] = losing_shares[m];
    metrics.push_back(jm);
  }
  j["metrics"] = metrics;
  nlohmann::ordered_json curve = nlohmann::ordered_json::array();
  for (std::size_t i = 0; !r.curves.empty() && i < r.curves.front().input_tokens.size(); ++i) {
    nlohmann::ordered_json row = {{"input_tokens", r.curves.front().input_tokens[i]}};
    for (const MetricCurve& c : r.curves) {
      const std::string name = to_string(c.metric), unit = csv_unit(c.metric);
      // null where the model does not fit (the CSV's inf, which JSON cannot hold)
      const auto number = [](double v) {
        return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
      };
      row[name + "_" + unit + "_hybrid"] = number(c.values[i].hybrid);
      row[name + "_" + unit + "_all_mla"] = number(c.values[i].all_mla);
      row[name + "_hybrid_wins"] = hybrid_advantage(c.metric, c.values[i]) > 0;
    }
    curve.push_back(row);
  }
  j["curve"] = curve;
  return j;
}

std::string format_breakeven(const BreakevenResult& r) {
  const BreakevenSpec& s = r.spec;
  const Scenario& d = s.deployment;
  std::string out = fmt::format(
      "{} vs all-MLA on {} x{} (tp {}, ep {}, attention_dp {})\n  workload: prompt {}..{} tokens, answer {} tokens, "
      "cached prefix {}, TPOT batch {}{}\n\n",
      d.model.name, d.hardware.name, d.parallelism.gpus(), d.parallelism.tp, d.parallelism.ep,
      d.parallelism.attention_dp, s.min_input_tokens, s.max_input_tokens, s.output_tokens, s.cached_prefix_tokens,
      s.batch, s.gpu_hour_usd > 0 ? fmt::format(", ${:.2f} per GPU-hour ({})", s.gpu_hour_usd, s.price_source) : "");
  out += fmt::format("{:<26} {:<14} {:>12} {:>12}  {}\n", "metric", "unit", "at min", "at max",
                     "crossings (prompt tokens)");
  for (const MetricCurve& c : r.curves) {
    std::string cross;
    for (const Crossing& x : c.crossings) {
      cross += fmt::format("{}{} ({} {})", cross.empty() ? "" : "; ", x.input_tokens, "hybrid",
                           x.hybrid_wins_above ? "wins above" : "loses above");
    }
    if (cross.empty())
      cross = c.hybrid_wins_at_min ? "none: the hybrid wins everywhere" : "none: the hybrid loses everywhere";
    if (c.longest_comparable_tokens > 0)
      cross += fmt::format("; neither model fits above {} tokens", c.longest_comparable_tokens);
    auto ratio = [&](const MetricPair& v) { return fmt::format("{:.3g}/{:.3g}", v.hybrid, v.all_mla); };
    out += fmt::format("{:<26} {:<14} {:>12} {:>12}  {}\n", to_string(c.metric), unit_of(c.metric),
                       ratio(c.values.front()), ratio(c.values.back()), cross);
  }
  out += "  (values are hybrid/all-MLA)\n";
  return out;
}

}  // namespace k3
