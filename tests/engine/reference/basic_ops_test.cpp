// Small reference ops against values computed by hand.
#include "engine/reference/basic_ops.h"

#include <gtest/gtest.h>

#include <cmath>

namespace k3::ref {
namespace {

TEST(BasicOps, RmsNormByHand) {
  Matrix x(1, 4);
  x << 1, -2, 3, -4;  // mean square 7.5
  Vector w(4);
  w << 1, 2, 0.5, 1;
  const Matrix y = rmsnorm(x, w, 1e-5);
  const double inv = 1.0 / std::sqrt(7.5 + 1e-5);
  EXPECT_NEAR(y(0, 0), 1 * inv * 1, 1e-6);
  EXPECT_NEAR(y(0, 1), -2 * inv * 2, 1e-6);
  EXPECT_NEAR(y(0, 2), 3 * inv * 0.5, 1e-6);
  EXPECT_NEAR(y(0, 3), -4 * inv, 1e-6);
}

TEST(BasicOps, SituIsBoundedAndMatchesItsFormula) {
  EXPECT_NEAR(situ(1.0f, 2.0f, 4, 25), 4 * std::tanh(0.25) / (1 + std::exp(-1.0)) * 25 * std::tanh(2.0 / 25), 1e-6);
  // Both factors are bounded: |SiTU| < β · β_lin.
  EXPECT_LT(std::fabs(situ(1e4f, -1e4f, 4, 25)), 4 * 25 + 1e-3);
  EXPECT_NEAR(silu(2.0f), 2.0 / (1 + std::exp(-2.0)), 1e-6);
}

TEST(BasicOps, GluMlpMatchesElementwiseDefinition) {
  Matrix x(2, 3), wg(2, 3), wu(2, 3), wd(3, 2);
  x << 0.5, -1, 2, 1, 0, -0.5;
  wg << 1, 0, 0, 0, 1, 1;
  wu << 0, 1, 0, 1, 1, 0;
  wd << 1, 0, 0, 1, 1, 1;
  const Matrix y = glu_mlp_situ(x, wg, wu, wd, 4, 25);
  const float h00 = situ(0.5f, -1.0f, 4, 25), h01 = situ(1.0f, -0.5f, 4, 25);
  EXPECT_NEAR(y(0, 0), h00, 1e-6);
  EXPECT_NEAR(y(0, 1), h01, 1e-6);
  EXPECT_NEAR(y(0, 2), h00 + h01, 1e-6);
}

TEST(BasicOps, L2NormalizeRows) {
  Matrix x(1, 2);
  x << 3, 4;
  const Matrix y = l2_normalize_rows(x, 1e-6);
  EXPECT_NEAR(y(0, 0), 3 / std::sqrt(25 + 1e-6), 1e-7);
  EXPECT_NEAR(y(0, 1), 4 / std::sqrt(25 + 1e-6), 1e-7);
}

}  // namespace
}  // namespace k3::ref
