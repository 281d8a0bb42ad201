// `k3perf verify` as a library: every shipped claim loads and gets the verdict this issue requires.
#include "core/error.h"
#include "sim/claims/claim.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace k3 {
namespace {

std::map<std::string, ClaimResult> check_all() {
  std::map<std::string, ClaimResult> out;
  for (const Claim& c : load_claims(test::data().claims_dir)) out.emplace(c.id, check_claim(c, test::data()));
  return out;
}

TEST(Claims, EveryClaimOfClaimsMdIsPresentInOrder) {
  const std::vector<Claim> claims = load_claims(test::data().claims_dir);
  ASSERT_EQ(claims.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(claims[i].id, fmt::format("P{}", i + 1));
}

TEST(Claims, RequiredClaimsAreReproducedOrExplained) {
  const auto results = check_all();
  for (const char* id : {"P1", "P2", "P3", "P15", "P16"}) {
    EXPECT_EQ(results.at(id).verdict, Verdict::reproduced) << id;
  }
  for (const char* id : {"P5", "P18", "P19"}) {
    const ClaimResult& r = results.at(id);
    EXPECT_TRUE(r.verdict == Verdict::reproduced || r.verdict == Verdict::explained)
        << id << ": " << to_string(r.verdict);
    EXPECT_FALSE(r.evaluation.breakdown.empty()) << id;
    if (r.verdict == Verdict::explained) {
      ASSERT_NE(r.explained_by(), nullptr) << id;
      for (const ReportedValue& v : r.claim.reported) {
        const auto it = r.explained_by()->predicted.find(v.key);
        const double value = it != r.explained_by()->predicted.end() ? it->second : r.evaluation.predicted.at(v.key);
        EXPECT_TRUE(v.accepts(value)) << id << " " << v.key;
      }
    }
  }
  // P6: was explained only by a per-token term fitted to the reported figures; no named alternative
  // (another GPU) reproduces it, so it is contradicted.
  const ClaimResult& p6 = results.at("P6");
  EXPECT_EQ(p6.verdict, Verdict::contradicted);
  EXPECT_FALSE(p6.evaluation.alternatives.empty());
  for (const Alternative& alt : p6.evaluation.alternatives)
    EXPECT_NE(alt.assumption.find("hardware="), std::string::npos);
  // P7: 6.3x exceeds what bytes allow even with the hybrid's batch unlimited; the breakdown shows the terms.
  const ClaimResult& p7 = results.at("P7");
  EXPECT_NEAR(p7.evaluation.predicted.at("amdahl_bound"), 27.0 / 7, 1e-12);
  bool has_ceiling = false;
  for (const std::string& line : p7.evaluation.breakdown)
    has_ceiling |= line.find("weights fully amortised") != std::string::npos;
  EXPECT_TRUE(has_ceiling);
  // No pair of batches that fits the GPUs' memory reaches 6.3x.
  bool batch_pairs = false;
  for (const Alternative& alt : p7.evaluation.alternatives) {
    if (alt.assumption.find("another pair of batches") == std::string::npos) continue;
    batch_pairs = true;
    EXPECT_FALSE(p7.claim.reported[1].accepts(alt.predicted.at("speedup"))) << alt.assumption;
  }
  EXPECT_TRUE(batch_pairs);
  // Every claim is modelled: none is left "not modelled yet".
  for (const auto& [id, r] : results) EXPECT_NE(r.verdict, Verdict::not_modelled) << id;
  // P11, P12 from the prefix-cache model.
  for (const char* id : {"P11", "P12"}) EXPECT_EQ(results.at(id).verdict, Verdict::reproduced) << id;
  const ClaimResult& p12 = results.at("P12");
  EXPECT_EQ(p12.evaluation.predicted.at("reprefilled_tokens"), 400.0 * 1024);  // the whole history
  ASSERT_EQ(p12.evaluation.alternatives.size(), 1u);
  // Checkpoints every 6144 tokens: the last one inside the 409,600-token history is 66 x 6144 = 405,504,
  // so the miss re-prefills the 4,096 tokens after it.
  EXPECT_EQ(p12.evaluation.alternatives[0].predicted.at("reprefilled_tokens"), 409600.0 - 66 * 6144);
  const ClaimResult& p11 = results.at("P11");
  // Hits cost 0.30 $ and misses 3.00 $ per M tokens: the blended price follows from the hit rate.
  const double hit = p11.evaluation.predicted.at("hit_rate_percent") / 100;
  EXPECT_NEAR(p11.evaluation.predicted.at("usd_per_million_input_tokens"), 0.30 * hit + 3.00 * (1 - hit), 1e-9);
  EXPECT_LE(p11.evaluation.predicted.at("hit_rate_percent"), p11.evaluation.predicted.at("kv_hit_rate_percent"));
}

TEST(Claims, VerdictFollowsTolerance) {
  ReportedValue v;
  v.value = 2.0;
  v.relative_tolerance = 0.1;
  EXPECT_TRUE(v.accepts(2.19));
  EXPECT_FALSE(v.accepts(2.21));
  ReportedValue range;
  range.max = 2.0;
  EXPECT_TRUE(range.accepts(-1));
  EXPECT_FALSE(range.accepts(2.01));
}

TEST(Claims, MissWithoutExplanationIsContradicted) {
  // P1's claim names no alternative; a wrong reported count must be contradicted.
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_claims_test";
  std::filesystem::create_directories(dir);
  const auto file = dir / "wrong.yaml";
  std::ofstream(file) << "id: X1\nclaim: K3 has 3 T parameters\nsource: test\nevaluator: scenario_metric\n"
                         "params: {scenario: {model: kimi-k3}, predict: {total_params: total_params}}\n"
                         "reported:\n  total_params: {value: 3.0e12, relative_tolerance: 0.01}\n";
  const ClaimResult r = check_claim(load_claim(file.string()), test::data());
  EXPECT_EQ(r.verdict, Verdict::contradicted);
  std::filesystem::remove_all(dir);
}

TEST(Claims, SpeedupsOfInconsistentShapeAreContradictedOnEveryGpu) {
  // A hybrid faster by 1.1x at 512K but 3.5x at 1M: no shipped GPU gives that shape.
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_claims_shape";
  std::filesystem::create_directories(dir);
  const auto file = dir / "shape.yaml";
  std::ofstream(file) << "id: X2\nclaim: odd speedups\nsource: test\nevaluator: scenario_metric\n"
                         "params:\n  scenario: {model: kimi-linear-48b-a3b, hardware: h200-sxm}\n"
                         "  baseline: all_mla\n"
                         "  predict:\n"
                         "    speedup_at_524288: {metric: speedup, set: [context_tokens=524287]}\n"
                         "    speedup_at_1048576: {metric: speedup, set: [context_tokens=1048575]}\n"
                         "  alternatives: [[hardware=every]]\n"
                         "reported:\n  speedup_at_524288: {value: 1.1, relative_tolerance: 0.05}\n"
                         "  speedup_at_1048576: {value: 3.5, relative_tolerance: 0.05}\n";
  const ClaimResult r = check_claim(load_claim(file.string()), test::data());
  EXPECT_EQ(r.verdict, Verdict::contradicted);
  EXPECT_GT(r.evaluation.alternatives.size(), 1u);
  EXPECT_EQ(r.matches.size(), r.evaluation.alternatives.size());
  std::filesystem::remove_all(dir);
}

TEST(Claims, UnknownOrMalformedParamsNameTheKey) {
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_claims_params";
  std::filesystem::create_directories(dir);
  const auto file = dir / "params.yaml";
  auto check = [&](const std::string& params, const std::string& needle) {
    std::ofstream(file) << "id: X3\nclaim: c\nsource: s\nevaluator: drafter_cost\nparams: " << params
                        << "\nreported:\n  block_parallel_growth: {value: 1, relative_tolerance: 0.01}\n";
    try {
      check_claim(load_claim(file.string()), test::data());
      ADD_FAILURE() << "no error for " << params;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("params.yaml"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  check("{kda_state: fp16}", "params.kda_state");
  check("{context: 5}", "params.context");
  check("{context_tokens: -5}", "params.context_tokens");
  std::filesystem::remove_all(dir);
}

// A measured figure rides beside the prediction: it never changes the verdict, and it is judged against the
// reported figure on its own.
TEST(Claims, MeasuredFiguresSitBesideThePrediction) {
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_claims_measured";
  std::filesystem::create_directories(dir);
  const auto file = (dir / "m.yaml").string();
  std::ofstream(file) << "id: X\nclaim: c\nsource: s\nevaluator: none\nreported:\n"
                         "  a: {value: 2, relative_tolerance: 0.1}\n  b: {value: 3, relative_tolerance: 0.1}\n"
                         "measured:\n  a: {value: 1.5, hardware: 1x H200, source: bench/results/x, command: run, "
                         "date: 2026-12-02, commit: abc}\n";
  const ClaimResult r = check_claim(load_claim(file), test::data());
  ASSERT_EQ(r.values.size(), 2u);
  ASSERT_TRUE(r.values[0].measured.has_value());
  EXPECT_DOUBLE_EQ(r.values[0].measured->value, 1.5);
  EXPECT_FALSE(r.values[0].measured_within());  // 1.5 is outside 2 ±10 %
  EXPECT_EQ(r.values[0].measured->source, "bench/results/x");
  EXPECT_FALSE(r.values[1].measured.has_value());
  EXPECT_EQ(r.verdict, Verdict::not_modelled);
  std::filesystem::remove_all(dir);
}

// Every measured figure of a shipped claim names results that are in the repository.
TEST(Claims, ShippedMeasuredFiguresPointAtCommittedResults) {
  int measured = 0;
  for (const Claim& c : load_claims(test::data().claims_dir)) {
    for (const MeasuredValue& m : c.measured) {
      ++measured;
      EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(K3PERF_SOURCE_DIR) / m.source))
          << c.file << ": measured." << m.key << ".source " << m.source;
      EXPECT_FALSE(m.commit.empty() || m.date.empty() || m.command.empty()) << c.file << ": " << m.key;
    }
  }
  EXPECT_GE(measured, 1) << "P5/P6 carry the engine's measured speedups";
}

TEST(Claims, BadClaimFilesNameFileAndKey) {
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_claims_bad";
  std::filesystem::create_directories(dir);
  const auto file = (dir / "bad.yaml").string();
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    std::ofstream(file) << text;
    try {
      load_claim(file);
      ADD_FAILURE() << "no error for: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.yaml"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("id: X\nclaim: c\nsource: s\nevaluator: no_such\n", "evaluator");
  expect_error("id: X\nclaim: c\nsource: s\n", "evaluator");
  expect_error("id: X\nclaim: c\nsource: s\nevaluator: none\nreported:\n  a: {value: 1}\n", "relative_tolerance");
  expect_error("id: X\nclaim: c\nsource: s\nevaluator: none\nreported:\n  a: {unit: x}\n", "reported.a");
  expect_error("id: [1\n", "YAML");
  const std::string with_reported =
      "id: X\nclaim: c\nsource: s\nevaluator: none\nreported:\n  a: {value: 1, "
      "relative_tolerance: 0.1}\nmeasured:\n";
  const std::string provenance = "hardware: h, source: s, command: c, date: d, commit: e";
  expect_error(with_reported + "  b: {value: 1, " + provenance + "}\n", "measured.b");
  expect_error(with_reported + "  a: {value: 1, hardware: h}\n", "measured.a.source");
  expect_error(with_reported + "  a: {value: 1, gpu: x, " + provenance + "}\n", "measured.a.gpu");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace k3

namespace k3 {
namespace {

// Ids sort naturally (P2 before P10) whatever their length: a 24-digit id used to overflow std::stol.
TEST(Claims, IdsOfAnyLengthSortNaturally) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "k3perf_claims_ids";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream in(test::data().claims_dir + "/p01-parameter-counts.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::string> ids = {"P999999999999999999999999", "P10", "P0002", "P1000000000000000000000000"};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::ofstream(dir / fmt::format("c{}.yaml", i)) << "id: " << ids[i] << text.substr(text.find('\n'));
  }
  std::vector<std::string> got;
  for (const Claim& c : load_claims(dir.string())) got.push_back(c.id);
  fs::remove_all(dir);
  EXPECT_EQ(got, (std::vector<std::string>{"P0002", "P10", "P999999999999999999999999", "P1000000000000000000000000"}));
}

}  // namespace
}  // namespace k3
