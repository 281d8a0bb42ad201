// The interpolated prefill time against exact roofline predictions off the grid, and on it.
#include "sim/cache/prefill_time.h"
#include "core/scenario.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace k3::cache {
namespace {

TEST(PrefillTime, InterpolationStaysWithinTwoPercentOfTheRoofline) {
  const DataPaths data = DataPaths::resolve(std::string(K3PERF_SOURCE_DIR) + "/scenarios");
  PrefillTimeModel m(load_scenario(std::string(K3PERF_SOURCE_DIR) + "/scenarios/k3-h200x16-decode-128k.yaml", data));
  EXPECT_EQ(m.ttft_ms(0, 5000), 0);
  EXPECT_DOUBLE_EQ(m.ttft_ms(16, 0), m.exact_ttft_ms(16, 0));  // a grid point
  double worst = 0;
  for (int64_t n : {37, 700, 5003, 23000, 100001}) {
    for (int64_t c : {0, 300, 9000, 77777}) {
      const double exact = m.exact_ttft_ms(n, c), approx = m.ttft_ms(n, c);
      EXPECT_GT(exact, 0);
      worst = std::max(worst, std::fabs(approx / exact - 1));
    }
  }
  std::printf("largest interpolation error: %.3f%%\n", 100 * worst);
  EXPECT_LT(worst, 0.02);
  EXPECT_EQ(prefill_grid_bracket(17), (std::pair<int64_t, int64_t>{16, 19}));
  EXPECT_EQ(prefill_grid_bracket(32), (std::pair<int64_t, int64_t>{32, 32}));
}

}  // namespace
}  // namespace k3::cache
