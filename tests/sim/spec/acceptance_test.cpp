// Acceptance models against hand-computed cases and a Monte Carlo simulation of the acceptance
// process (each drafted token accepted with its rate until the first rejection).
#include "sim/spec/acceptance.h"
#include "core/error.h"
#include "expect_input_error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace k3 {
namespace {

TEST(Acceptance, IidHandComputed) {
  // α = 0.5, γ = 3: P(A = 0..3) = 0.5, 0.25, 0.125, 0.125.
  const AcceptanceModel m = AcceptanceModel::iid(0.5, 3);
  EXPECT_DOUBLE_EQ(m.expected_tokens_per_step(), 1.875);
  EXPECT_DOUBLE_EQ(m.probability_of_accepted(0), 0.5);
  EXPECT_DOUBLE_EQ(m.probability_of_accepted(3), 0.125);
  // E[A] = 0.875, E[A²] = 0.25 + 0.5 + 1.125 = 1.875.
  EXPECT_DOUBLE_EQ(m.variance_tokens_per_step(), 1.875 - 0.875 * 0.875);
  EXPECT_DOUBLE_EQ(m.draft_acceptance_rate(), 0.875 / 3);
  EXPECT_DOUBLE_EQ(iid_expected_tokens_per_step(0.5, 3), 1.875);
  EXPECT_DOUBLE_EQ(iid_expected_tokens_per_step(1.0, 7), 8.0);
  EXPECT_DOUBLE_EQ(AcceptanceModel::iid(0.0, 4).expected_tokens_per_step(), 1.0);
}

TEST(Acceptance, PerPositionHandComputed) {
  const AcceptanceModel m = AcceptanceModel::per_position({0.9, 0.8, 0.5});
  // s = 0.9, 0.72, 0.36
  EXPECT_NEAR(m.expected_tokens_per_step(), 2.98, 1e-12);
  EXPECT_NEAR(m.probability_of_accepted(1), 0.9 - 0.72, 1e-12);
  const double mean_a = 1.98, second = 0.9 + 3 * 0.72 + 5 * 0.36;
  EXPECT_NEAR(m.variance_tokens_per_step(), second - mean_a * mean_a, 1e-12);
  EXPECT_NEAR(m.truncated(2).expected_tokens_per_step(), 2.62, 1e-12);
}

TEST(Acceptance, EmpiricalHandComputed) {
  // 1, 2, 3 tokens per step with weights 1, 1, 2 (γ = 2).
  const AcceptanceModel m = AcceptanceModel::empirical({1, 1, 2});
  EXPECT_EQ(m.draft_tokens(), 2);
  EXPECT_DOUBLE_EQ(m.expected_tokens_per_step(), 2.25);
  EXPECT_DOUBLE_EQ(m.variance_tokens_per_step(), 2.25 - 1.25 * 1.25);
  EXPECT_DOUBLE_EQ(m.probability_of_accepted(2), 0.5);
}

// The acceptance process itself, simulated: mean and variance of tokens per step.
void expect_matches_simulation(const AcceptanceModel& m, const std::vector<double>& rates, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int steps = 200000;
  double sum = 0, sum_sq = 0;
  for (int s = 0; s < steps; ++s) {
    int accepted = 0;
    while (accepted < static_cast<int>(rates.size()) && u(rng) < rates[accepted]) ++accepted;
    sum += accepted + 1;
    sum_sq += double(accepted + 1) * (accepted + 1);
  }
  const double mean = sum / steps, var = sum_sq / steps - mean * mean;
  const double sigma = std::sqrt(m.variance_tokens_per_step() / steps);
  EXPECT_NEAR(mean, m.expected_tokens_per_step(), 5 * sigma + 1e-12) << m.describe();
  EXPECT_NEAR(var, m.variance_tokens_per_step(), 0.02 * m.variance_tokens_per_step() + 1e-9) << m.describe();
}

TEST(Acceptance, MatchesMonteCarlo) {
  expect_matches_simulation(AcceptanceModel::iid(0.8, 7), std::vector<double>(7, 0.8), 1);
  expect_matches_simulation(AcceptanceModel::iid(0.37, 4), std::vector<double>(4, 0.37), 2);
  const std::vector<double> p = {0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5};
  expect_matches_simulation(AcceptanceModel::per_position(p), p, 3);
}

TEST(Acceptance, EmpiricalMatchesItsOwnSamples) {
  // Draw accepted lengths from a per-position process, histogram them, and compare the empirical model.
  const std::vector<double> p = {0.9, 0.7, 0.6};
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> hist(4, 0);
  for (int s = 0; s < 100000; ++s) {
    int a = 0;
    while (a < 3 && u(rng) < p[a]) ++a;
    hist[a] += 1;
  }
  const AcceptanceModel emp = AcceptanceModel::empirical(hist), exact = AcceptanceModel::per_position(p);
  EXPECT_NEAR(emp.expected_tokens_per_step(), exact.expected_tokens_per_step(), 0.01);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(emp.survival()[i], exact.survival()[i], 0.005);
}

TEST(Acceptance, InversionRoundTrips) {
  for (int g : {1, 3, 7, 12}) {
    for (double alpha : {0.0, 0.1, 0.5, 0.8, 0.95, 1.0}) {
      const double e = iid_expected_tokens_per_step(alpha, g);
      EXPECT_NEAR(iid_alpha_for_tokens_per_step(e, g), alpha, 1e-8) << g << " " << alpha;
    }
  }
  // 4.73 tokens per step with a 7-token block: E(0.84) = (1 − 0.84^8)/0.16 = 4.70, E(0.85) = 4.85.
  const double a = iid_alpha_for_tokens_per_step(4.73, 7);
  EXPECT_GT(a, 0.84);
  EXPECT_LT(a, 0.85);
  test::expect_input_error([] { iid_alpha_for_tokens_per_step(8.5, 7); }, {"8.5 tokens per step", "[1, 8]"});
  test::expect_input_error([] { AcceptanceModel::iid(1.2, 3); }, {"outside [0, 1]"});
  test::expect_input_error([] { AcceptanceModel::per_position({0.5, -0.1}); }, {"p_2"});
  test::expect_input_error([] { AcceptanceModel::empirical({0, 0}); }, {"sum to zero"});
  test::expect_input_error([] { AcceptanceModel::iid(0.5, 3).truncated(4); }, {"4-token draft"});
}

}  // namespace
}  // namespace k3
