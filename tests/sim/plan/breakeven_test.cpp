// Break-even of the hybrid against all-MLA: crossings found by bisection equal a brute-force scan,
// the memory crossing equals its closed form, the output is deterministic.
#include "sim/plan/breakeven.h"
#include "core/error.h"
#include "expect_input_error.h"
#include "sim/memory.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace k3 {
namespace {

BreakevenSpec chat_spec() {
  return load_breakeven_spec(test::scenario_path("breakeven/k3-h200x16-chat.yaml"), test::data());
}

const MetricCurve& curve_of(const BreakevenResult& r, BreakevenMetric m) {
  for (const MetricCurve& c : r.curves) {
    if (c.metric == m) return c;
  }
  throw std::runtime_error("no curve for " + to_string(m));
}

TEST(Breakeven, BisectionEqualsBruteForceOnAStepFunction) {
  for (long long cross : {101LL, 102LL, 150LL, 1999LL, 2000LL}) {
    auto f = [&](long long t) { return t >= cross ? 1.0 : -1.0; };
    EXPECT_EQ(bisect_crossing(f, 100, 2000), cross);
    auto g = [&](long long t) { return t >= cross ? -2.0 : 0.5; };  // the other direction
    EXPECT_EQ(bisect_crossing(g, 100, 2000), cross);
  }
}

TEST(Breakeven, MemoryCrossingMatchesClosedFormAndBruteForce) {
  const BreakevenSpec spec = chat_spec();
  const BreakevenResult r = solve_breakeven(spec);
  const MetricCurve& mem = curve_of(r, BreakevenMetric::memory_per_request);
  ASSERT_EQ(mem.crossings.size(), 1u);
  EXPECT_TRUE(mem.crossings[0].hybrid_wins_above);
  // The hybrid wins once kv_all·T > kv_hybrid·T + state, T = prefix + prompt + answer.
  const ModelConfig& m = spec.deployment.model;
  const Precision& p = spec.deployment.precision;
  const double state = kda_recurrent_state_bytes(m, p) + kda_conv_state_bytes(m, p);
  const double dkv = kv_bytes_per_token(with_all_attention(m, AttentionKind::mla), p) - kv_bytes_per_token(m, p);
  const long long first_total = static_cast<long long>(std::floor(state / dkv)) + 1;
  EXPECT_EQ(mem.crossings[0].input_tokens, first_total - spec.output_tokens - spec.cached_prefix_tokens);
  // Brute force over the grid interval that holds it.
  std::size_t i = 1;
  while (mem.input_tokens[i] < mem.crossings[0].input_tokens) ++i;
  long long brute = -1;
  for (long long t = mem.input_tokens[i - 1]; t <= mem.input_tokens[i] && brute < 0; ++t) {
    if (hybrid_advantage(BreakevenMetric::memory_per_request,
                         evaluate_breakeven_metric(spec, BreakevenMetric::memory_per_request, t)) > 0)
      brute = t;
  }
  EXPECT_EQ(brute, mem.crossings[0].input_tokens);
}

TEST(Breakeven, TpotCrossingEqualsBruteForceScan) {
  const BreakevenSpec spec = chat_spec();
  const BreakevenResult r = solve_breakeven(spec);
  const MetricCurve& tpot = curve_of(r, BreakevenMetric::tpot);
  if (tpot.crossings.empty()) {
    // No crossing reported (with the H200's per-kernel floors an MLA layer's decode costs more than a KDA layer's
    // at every length): the hybrid's side is the same at every grid point, checked point by point.
    for (long long t : tpot.input_tokens) {
      const bool wins =
          hybrid_advantage(BreakevenMetric::tpot, evaluate_breakeven_metric(spec, BreakevenMetric::tpot, t)) > 0;
      EXPECT_EQ(wins, tpot.hybrid_wins_at_min) << t;
    }
    return;
  }
  const Crossing& x = tpot.crossings.front();
  std::size_t i = 1;
  while (tpot.input_tokens[i] < x.input_tokens) ++i;
  long long brute = -1;
  for (long long t = tpot.input_tokens[i - 1] + 1; t <= tpot.input_tokens[i] && brute < 0; ++t) {
    const bool wins =
        hybrid_advantage(BreakevenMetric::tpot, evaluate_breakeven_metric(spec, BreakevenMetric::tpot, t)) > 0;
    if (wins == x.hybrid_wins_above) brute = t;
  }
  EXPECT_EQ(brute, x.input_tokens);
}

TEST(Breakeven, EveryMetricAndDeterministicOutput) {
  const BreakevenSpec spec = chat_spec();
  const BreakevenResult a = solve_breakeven(spec), b = solve_breakeven(spec);
  ASSERT_EQ(a.curves.size(), 4u);  // the file gives a price: the cost metric is in
  EXPECT_EQ(breakeven_csv(a), breakeven_csv(b));
  EXPECT_EQ(format_breakeven(a), format_breakeven(b));
  // The CSV's columns carry their units.
  const std::string csv = breakeven_csv(a);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "input_tokens,memory_per_request_gib_hybrid,memory_per_request_gib_all_mla,memory_per_request_hybrid_wins,"
            "tpot_ms_hybrid,tpot_ms_all_mla,tpot_hybrid_wins,throughput_at_budget_tok_per_s_hybrid,"
            "throughput_at_budget_tok_per_s_all_mla,throughput_at_budget_hybrid_wins,"
            "cost_per_million_tokens_usd_per_m_tokens_hybrid,cost_per_million_tokens_usd_per_m_tokens_all_mla,"
            "cost_per_million_tokens_hybrid_wins");
  // Short chat requests: the state dominates memory, so the hybrid loses on memory and what follows from it at 128
  // tokens; on TPOT it wins from the start: an MLA layer's decode kernels carry larger fixed floors (mla_attention
  // 20.4 us per kernel, measured on the H200) than a KDA layer's, whatever the length.
  for (const MetricCurve& c : a.curves) {
    EXPECT_EQ(c.hybrid_wins_at_min, c.metric == BreakevenMetric::tpot) << to_string(c.metric);
  }
  // At 1 M tokens neither model fits a request on these GPUs; at 256 K the hybrid still does.
  const MetricCurve& thr = curve_of(a, BreakevenMetric::throughput_at_budget);
  EXPECT_GT(thr.longest_comparable_tokens, 0);
  EXPECT_LT(thr.longest_comparable_tokens, spec.max_input_tokens);
}

// The JSON's curve rows have the CSV's columns and values, in its order; crossings and shares per metric.
TEST(Breakeven, JsonHasTheCsvRowsAndTheCrossings) {
  const BreakevenResult r = solve_breakeven(chat_spec());
  const nlohmann::ordered_json j = to_json(r, {0.25, 0.5, 0.75, 1.0});
  EXPECT_EQ(j["format"], "k3perf-breakeven");
  std::istringstream csv(breakeven_csv(r));
  std::string header, line;
  std::getline(csv, header);
  ASSERT_EQ(j["curve"].size(), r.curves.front().input_tokens.size());
  for (const nlohmann::ordered_json& row : j["curve"]) {
    ASSERT_TRUE(std::getline(csv, line));
    std::istringstream cells(line), names(header);
    std::string cell, name;
    auto item = row.items().begin();
    while (std::getline(cells, cell, ',') && std::getline(names, name, ',')) {
      ASSERT_NE(item, row.items().end());
      EXPECT_EQ(item.key(), name);
      if (item.value().is_null()) {
        EXPECT_EQ(cell, "inf") << name;  // the model does not fit
      } else {
        const double value =
            item.value().is_boolean() ? (item.value().get<bool>() ? 1.0 : 0.0) : item.value().get<double>();
        EXPECT_NEAR(value, std::stod(cell), 1e-5 * std::abs(value)) << name;  // the CSV has 6 digits
      }
      ++item;
    }
  }
  for (std::size_t m = 0; m < r.curves.size(); ++m) {
    const nlohmann::ordered_json& jm = j["metrics"][m];
    EXPECT_EQ(jm["metric"], to_string(r.curves[m].metric));
    EXPECT_EQ(jm["unit"], unit_of(r.curves[m].metric));
    ASSERT_EQ(jm["crossings"].size(), r.curves[m].crossings.size());
    for (std::size_t i = 0; i < r.curves[m].crossings.size(); ++i) {
      EXPECT_EQ(jm["crossings"][i]["input_tokens"], r.curves[m].crossings[i].input_tokens);
    }
    EXPECT_DOUBLE_EQ(jm["losing_share"].get<double>(), 0.25 * double(m + 1));
  }
  EXPECT_FALSE(to_json(r)["metrics"][0].contains("losing_share"));
}

TEST(Breakeven, LosingShareCountsBySide) {
  MetricCurve c{BreakevenMetric::tpot, {}, {}, {{1000, true}, {5000, false}}, false};
  // loses below 1000, wins 1000..4999, loses from 5000
  EXPECT_DOUBLE_EQ(losing_share(c, {10, 999, 1000, 4999, 5000, 9000}), 4.0 / 6);
  c.longest_comparable_tokens = 6000;  // 9000 fits neither model: left out
  EXPECT_DOUBLE_EQ(losing_share(c, {10, 999, 1000, 4999, 5000, 9000}), 3.0 / 5);
}

TEST(Breakeven, BadFileNamesTheKey) {
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_breakeven_test";
  std::filesystem::create_directories(dir);
  const auto file = dir / "bad.yaml";
  std::ofstream(file) << "scenario: " << test::scenario_path("k3-h200x16-decode-128k.yaml") << "\n"
                      << "workload: {output_tokens: 10, batch: 1}\ninput_tokens: {min: 100, max: 50}\n";
  test::expect_input_error([&] { load_breakeven_spec(file.string(), test::data()); }, {"bad.yaml", "max", "max > min"});
  std::ofstream(file)
      << "scenario: missing.yaml\nworkload: {output_tokens: 10, batch: 1}\ninput_tokens: {min: 1, max: 50}\n";
  test::expect_input_error([&] { load_breakeven_spec(file.string(), test::data()); }, {"scenario", "missing.yaml"});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace k3
