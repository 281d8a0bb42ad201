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

// What rank a sends b in the exchange is what b receives from a, each token sends top_k rows, and every received
// row names one of the receiver's experts, in expert order within each peer's rows.
TEST(UniformRouting, ExchangesAgreeAcrossTheGroup) {
  const int ep = 16;
  std::vector<int64_t> tokens(ep);
  for (int p = 0; p < ep; ++p) tokens[p] = (p * 7) % 5;  // uneven, some peers route nothing (a decode step's split)
  std::vector<UniformExchange> x;
  for (int r = 0; r < ep; ++r) x.push_back(uniform_exchange(kK3, ep, r, 3, tokens));
  for (int a = 0; a < ep; ++a) {
    int64_t sent = 0;
    for (int b = 0; b < ep; ++b) {
      EXPECT_EQ(x[a].send_rows[b], x[b].recv_rows[a]) << a << " -> " << b;
      sent += x[a].send_rows[b];
    }
    EXPECT_EQ(sent, tokens[a] * kK3.top_k) << "rank " << a;
    std::size_t at = 0;
    for (int p = 0; p < ep; ++p) {
      for (int64_t i = 0; i < x[a].recv_rows[p]; ++i, ++at) {
        ASSERT_LT(at, x[a].recv_local_expert.size());
        const int32_t e = x[a].recv_local_expert[at];
        EXPECT_TRUE(e >= 0 && e < 896 / ep) << e;
        if (i > 0) {
          EXPECT_LE(x[a].recv_local_expert[at - 1], e) << "rows of peer " << p << " by expert";
        }
      }
    }
    EXPECT_EQ(at, x[a].recv_local_expert.size());
  }
  // With equal counts the exchange's receive side is uniform_rows_to's.
  EXPECT_EQ(uniform_exchange(kK3, ep, 3, 3, std::vector<int64_t>(ep, 4)).recv_rows, uniform_rows_to(kK3, ep, 3, 3, 4));
}

TEST(UniformRouting, BadSizesAreInputErrors) {
  test::expect_input_error([] { uniform_rows_to(kK3, 5, 0, 0, 1); }, {"ep 5", "896 experts"});
  test::expect_input_error([] { uniform_rows_to({8, 9, 0}, 2, 0, 0, 1); }, {"top_k 9"});
  test::expect_input_error([] { uniform_rows_to(kK3, 16, 16, 0, 1); }, {"rank 16"});
  test::expect_input_error([] { uniform_exchange(kK3, 16, 0, 0, {1, 2}); }, {"2 token counts", "group of 16"});
}

}  // namespace
}  // namespace k3::parallel
