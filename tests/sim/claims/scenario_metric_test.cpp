// The generic claim evaluator (scenario_metric) on hand-made claims: a metric computed by hand on
// a tiny model, a baseline transform and a metric registered from this file alone, the search
// step that finds which alternative reproduces a claim (and the case where none does), and that
// an evaluator cannot see the reported figures.
#include "sim/claims/scenario_metric.h"
#include "core/error.h"
#include "sim/claims/claim.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <type_traits>

namespace k3 {
namespace {

// The evaluator API receives ClaimInputs, a type with no reported figures: nothing an evaluator
// is given leads to them.
static_assert(std::is_same_v<decltype(&ClaimEvaluator::evaluate),
                             Evaluation (ClaimEvaluator::*)(const ClaimInputs&, const DataPaths&) const>);
template <class T>
concept HasReported = requires(const T& t) {
  t.reported;
};
static_assert(HasReported<Claim> && !HasReported<ClaimInputs>);
static_assert(!std::is_base_of_v<ClaimInputs, Claim> && !std::is_base_of_v<Claim, ClaimInputs>);

// Test-only: the baseline is the subject with half its cached tokens.
class HalfContext : public BaselineTransform {
 public:
  Scenario apply(const Scenario& s, const DataPaths&) const override {
    Scenario b = s;
    b.phase.context_tokens /= 2;
    return b;
  }
  std::string describe() const override { return "half the context"; }
};
K3PERF_REGISTER_BASELINE_TRANSFORM(HalfContext, "test_half_context");

// Test-only: the cached tokens of the subject (or, with `of: baseline`, of the baseline).
class CachedTokens : public OneScenarioMetric {
 public:
  using OneScenarioMetric::OneScenarioMetric;
  double value(const MetricInputs& in) const override { return double(in.scenario(of()).phase.context_tokens); }
};
K3PERF_REGISTER_CLAIM_METRIC(CachedTokens, "test_cached_tokens");

class ScenarioMetric : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("k3perf_scenario_metric_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  ClaimResult check(const std::string& params, const std::string& reported) {
    const std::string file = (dir_ / "claim.yaml").string();
    std::ofstream(file) << "id: X1\nclaim: c\nsource: test\nevaluator: scenario_metric\nparams:\n"
                        << params << "reported:\n"
                        << reported;
    return check_claim(load_claim(file), test::data());
  }
  std::filesystem::path dir_;
};

// kimi-linear-twin: 5 layers, MLA in layers 4 and 5 (kv_lora 16 + rope 8 bf16 values = 48 B per
// token and layer), KDA in layers 1-3 with 4 heads of 16: per layer a 4 x 16 x 16 fp32 state
// (4096 B) and a short-conv cache of 3 x 64 channels x 3 taps in bf16 (1152 B).
TEST_F(ScenarioMetric, AHandMadeClaimOnATinyModelPredictsWhatIsComputedByHand) {
  const ClaimResult r = check(
      "  scenario: {model: kimi-linear-twin, context_tokens: 1023, kda_state: fp32}\n"
      "  baseline: all_mla\n"
      "  predict:\n"
      "    hybrid_bytes: kv_state_gib\n"
      "    all_mla_bytes: {metric: {name: kv_state_gib, of: baseline}}\n"
      "    reduction: kv_state_reduction_percent\n"
      "    layers: kv_layer_reduction_percent\n"
      "    amdahl: amdahl_bound\n",
      "  amdahl: {value: 2.5, relative_tolerance: 0}\n");
  const double gib = double(1ull << 30);
  const double hybrid = 2 * 48.0 * 1024 + 3 * (4096.0 + 1152.0), all_mla = 5 * 48.0 * 1024;
  EXPECT_DOUBLE_EQ(r.evaluation.predicted.at("hybrid_bytes") * gib, hybrid);
  EXPECT_DOUBLE_EQ(r.evaluation.predicted.at("all_mla_bytes") * gib, all_mla);
  EXPECT_DOUBLE_EQ(r.evaluation.predicted.at("reduction"), 100 * (1 - hybrid / all_mla));
  EXPECT_DOUBLE_EQ(r.evaluation.predicted.at("layers"), 60.0);
  EXPECT_EQ(r.verdict, Verdict::reproduced);
  EXPECT_FALSE(r.evaluation.breakdown.empty());
}

const char* kCachedTokens =
    "  scenario: {model: kimi-linear-twin, context_tokens: 1000}\n"
    "  baseline: test_half_context\n"
    "  predict:\n"
    "    cached: test_cached_tokens\n"
    "    baseline_cached: {metric: {name: test_cached_tokens, of: baseline}}\n"
    "  alternatives:\n"
    "    - [\"context_tokens=[100, 200, 1000, 300]\"]\n"
    "    - {assumption: the baseline at full context, baseline: none}\n";

TEST_F(ScenarioMetric, ATransformAndAMetricRegisteredFromATestFileAreUsedByName) {
  const ClaimResult r = check(kCachedTokens,
                              "  cached: {value: 1000, relative_tolerance: 0}\n"
                              "  baseline_cached: {value: 500, relative_tolerance: 0}\n");
  EXPECT_EQ(r.verdict, Verdict::reproduced);
  EXPECT_EQ(r.evaluation.predicted.at("baseline_cached"), 500);
  // context_tokens=1000 is the claim's own scenario: not an alternative.
  ASSERT_EQ(r.evaluation.alternatives.size(), 4u);
  EXPECT_EQ(r.evaluation.alternatives[1].assumption, "with context_tokens=200");
  EXPECT_EQ(r.evaluation.alternatives[1].predicted.at("baseline_cached"), 100);
  EXPECT_EQ(r.evaluation.alternatives[3].assumption, "the baseline at full context");
  EXPECT_EQ(r.evaluation.alternatives[3].predicted.at("baseline_cached"), 1000);
}

TEST_F(ScenarioMetric, TheSearchStepNamesTheAlternativeThatReproducesTheClaim) {
  const ClaimResult by_context = check(kCachedTokens,
                                       "  cached: {value: 200, relative_tolerance: 0.01}\n"
                                       "  baseline_cached: {value: 100, relative_tolerance: 0.01}\n");
  EXPECT_EQ(by_context.verdict, Verdict::explained);
  ASSERT_NE(by_context.explained_by(), nullptr);
  EXPECT_EQ(by_context.explained_by()->assumption, "with context_tokens=200");
  EXPECT_EQ(by_context.reproducing_alternatives(), 1);

  const ClaimResult by_baseline = check(kCachedTokens,
                                        "  cached: {value: 1000, relative_tolerance: 0.01}\n"
                                        "  baseline_cached: {min: 900}\n");
  EXPECT_EQ(by_baseline.verdict, Verdict::explained);
  EXPECT_EQ(by_baseline.explained_by()->assumption, "the baseline at full context");
}

TEST_F(ScenarioMetric, WhenNoAlternativeReproducesTheClaimTheClosestIsNamed) {
  const ClaimResult r = check(kCachedTokens,
                              "  cached: {value: 300, relative_tolerance: 0.01}\n"
                              "  baseline_cached: {value: 300, relative_tolerance: 0.01}\n");
  EXPECT_EQ(r.verdict, Verdict::contradicted);
  EXPECT_EQ(r.explained_by(), nullptr);
  ASSERT_EQ(r.matches.size(), 4u);
  EXPECT_EQ(r.reproducing_alternatives(), 0);
  ASSERT_NE(r.closest(), nullptr);
  EXPECT_EQ(r.closest()->index, 2);  // context_tokens=300: cached 300 is within, its baseline's 150 is not
  EXPECT_EQ(r.closest()->within, 1);
  EXPECT_EQ(r.closest()->of, 2);
}

TEST(ClaimSearch, ComparesEveryAlternativeWithTheReportedFigures) {
  ClaimResult r;
  r.claim.file = "hand-made";
  r.claim.evaluator = "test";
  ReportedValue a;
  a.key = "a";
  a.value = 10;
  a.relative_tolerance = 0.1;
  ReportedValue b;
  b.key = "b";
  b.max = 1;
  r.claim.reported = {a, b};
  r.evaluation.predicted = {{"a", 5}, {"b", 0}};
  r.evaluation.alternatives = {{"doubled a", {{"a", 10.5}}},            // a within, b kept from the main: both
                               {"doubled b", {{"a", 10.5}, {"b", 2}}},  // a within, b not
                               {"halved", {{"a", 2.5}}}};
  compare_with_reported(r);
  EXPECT_EQ(r.verdict, Verdict::explained);
  EXPECT_EQ(r.explained_by_index, 0);
  ASSERT_EQ(r.matches.size(), 3u);
  EXPECT_EQ(r.matches[1].within, 1);
  EXPECT_EQ(r.matches[2].within, 1);

  r.evaluation.alternatives.erase(r.evaluation.alternatives.begin());
  compare_with_reported(r);
  EXPECT_EQ(r.verdict, Verdict::contradicted);
  EXPECT_EQ(r.closest()->index, 0);  // first of the ties

  r.evaluation.predicted = {{"a", 9.5}, {"b", 1}};
  compare_with_reported(r);
  EXPECT_EQ(r.verdict, Verdict::reproduced);
  EXPECT_TRUE(r.matches.empty());
}

TEST_F(ScenarioMetric, BadSpecsNameTheFileAndKey) {
  auto expect_error = [&](const std::string& params, const std::string& needle) {
    try {
      check(params, "  x: {value: 1, relative_tolerance: 0}\n");
      ADD_FAILURE() << "no error for " << params;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("claim.yaml"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::string scenario = "  scenario: {model: kimi-linear-twin}\n";
  expect_error(scenario + "  predict: {x: no_such_metric}\n", "unknown claim metric 'no_such_metric'");
  expect_error(scenario + "  baseline: no_such\n  predict: {x: speedup}\n", "unknown baseline transform 'no_such'");
  expect_error(scenario + "  predict: {x: {metric: {name: kv_state_gib, of: both}}}\n", "of");
  expect_error(scenario + "  predict: {x: amdahl_bound}\n  alternatives: [[tpp=2]]\n", "unknown scenario key 'tpp'");
  expect_error(scenario + "  predict: {x: amdahl_bound}\n  alternatives: [[tp]]\n", "expected key.path=value");
  expect_error(scenario + "  predict: {x: amdahl_bound}\n  alternatives: [{read: {y: amdahl_bound}}]\n",
               "'y' is not a predicted key");
  expect_error("  scenario: {model: kimi-linear-twin, context: 5}\n  predict: {x: amdahl_bound}\n",
               "params.scenario.context");
  expect_error("  scenario: {model: kimi-linear-twin, kda_state: fp16}\n  predict: {x: amdahl_bound}\n",
               "params.scenario.kda_state");
  expect_error("  scenario: {model: kimi-linear-twin, context_tokens: -5}\n  predict: {x: amdahl_bound}\n",
               "params.scenario.context_tokens");
}

}  // namespace
}  // namespace k3
