// Capacity planning: the Pareto front against a brute-force dominance check.
#include "sim/plan/plan.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace k3::plan {
namespace {

TEST(PlanPareto, KeepsExactlyTheUndominatedPoints) {
  std::vector<std::pair<double, double>> pts;
  uint64_t x = 12345;
  for (int i = 0; i < 300; ++i) {  // a seeded LCG: no clock, no unseeded randomness
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const double a = double(x >> 40 & 1023), b = double(x >> 20 & 1023);
    pts.emplace_back(a, 1023 - a * a / 1023 + b / 8);
  }
  std::vector<std::size_t> want;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    bool dominated = false;
    for (std::size_t j = 0; j < pts.size() && !dominated; ++j) {
      dominated = j != i && pts[j].first >= pts[i].first && pts[j].second >= pts[i].second && pts[j] != pts[i];
    }
    if (!dominated) want.push_back(i);
  }
  std::vector<std::size_t> got = pareto_front(pts);
  // Duplicates of a front point count once; compare the points themselves.
  std::vector<std::pair<double, double>> got_pts, want_pts;
  for (std::size_t i : got) got_pts.push_back(pts[i]);
  for (std::size_t i : want) want_pts.push_back(pts[i]);
  std::sort(want_pts.begin(), want_pts.end());
  want_pts.erase(std::unique(want_pts.begin(), want_pts.end()), want_pts.end());
  EXPECT_EQ(got_pts, want_pts);  // sorted by x, as promised
}

}  // namespace
}  // namespace k3::plan
