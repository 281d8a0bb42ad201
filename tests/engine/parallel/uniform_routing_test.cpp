// The seeded uniform router of rank emulation: every assignment lands on exactly one rank, the load is uniform
// within the binomial spread, and the counts are reproducible.
#include "engine/parallel/uniform_routing.h"

#include "tests/expect_input_error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace k3::parallel {
namespace {

// K3's router: 896 experts, 16 per token, over an EP group of 16.
constexpr UniformRouting kK3{896, 16, 1234};

TEST(UniformRouting, EveryAssignmentLandsOnOneRank) {
  const int ep = 16;
  const int64_t tokens = 300;
  std::vector<int64_t> sent(ep, 0);
  for (int dest = 0; dest < ep; ++dest) {
    const std::vector<int64_t> rows = uniform_rows_to(kK3, ep, dest, 7, tokens);
    ASSERT_EQ(rows.size(), static_cast<std::size_t>(ep));
    for (int peer = 0; peer < ep; ++peer) sent[peer] += rows[peer];
  }
  for (int peer = 0; peer < ep; ++peer) EXPECT_EQ(sent[peer], tokens * kK3.top_k) << "peer " << peer;
}

TEST(UniformRouting, LoadIsUniformWithinTheBinomialSpread) {
  const int ep = 16;
  const int64_t tokens = 4096;
  const double mean = double(tokens) * kK3.top_k / ep;
  const double sigma = std::sqrt(mean * (1.0 - 1.0 / ep));
  for (int dest : {0, 5, 15}) {
    for (int64_t rows : uniform_rows_to(kK3, ep, dest, 0, tokens)) EXPECT_NEAR(double(rows), mean, 5 * sigma);
  }
}

TEST(UniformRouting, ReproducibleAndDifferentPerLayer) {
  EXPECT_EQ(uniform_rows_to(kK3, 16, 3, 10, 64), uniform_rows_to(kK3, 16, 3, 10, 64));
  EXPECT_NE(uniform_rows_to(kK3, 16, 3, 10, 64), uniform_rows_to(kK3, 16, 3, 11, 64));
  EXPECT_NE(uniform_rows_to(kK3, 16, 3, 10, 64), uniform_rows_to({896, 16, 99}, 16, 3, 10, 64));
}

TEST(UniformRouting, AWorldOfOneGetsEveryAssignment) {
  EXPECT_EQ(uniform_rows_to(kK3, 1, 0, 0, 10), (std::vector<int64_t>{160}));
}

TEST(UniformRouting, BadSizesAreInputErrors) {
  test::expect_input_error([] { uniform_rows_to(kK3, 5, 0, 0, 1); }, {"ep 5", "896 experts"});
  test::expect_input_error([] { uniform_rows_to({8, 9, 0}, 2, 0, 0, 1); }, {"top_k 9"});
  test::expect_input_error([] { uniform_rows_to(kK3, 16, 16, 0, 1); }, {"rank 16"});
}

}  // namespace
}  // namespace k3::parallel
