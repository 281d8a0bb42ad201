// Non-negative least squares: x = argmin ||A x - b||₂ subject to x >= 0, by Lawson and Hanson's
// active-set method (Solving Least Squares Problems, 1974, ch. 23). Written here because Eigen 3.4
// has none; each passive-set subproblem is solved by column-pivoting QR. Used by calibrate.cpp.
#pragma once

#include "core/error.h"

#include <Eigen/Dense>

#include <algorithm>
#include <limits>

namespace k3::profiler {

inline Eigen::VectorXd nnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& b) {
  K3_CHECK(a.rows() == b.size(), "nnls: A has {} rows, b has {}", a.rows(), b.size());
  const Eigen::Index n = a.cols();
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  if (n == 0) return x;
  // Scipy's tolerance: relative to the size of A, so scaling a column does not change the answer.
  const double tol = 10 * std::numeric_limits<double>::epsilon() * a.cwiseAbs().colwise().sum().maxCoeff() *
                     static_cast<double>(std::max(a.rows(), n));
  std::vector<bool> passive(static_cast<std::size_t>(n), false);
  std::vector<bool> refused(static_cast<std::size_t>(n), false);  // entered with a non-positive value this round

  // Least squares on the passive columns; the others are 0.
  auto solve_passive = [&]() {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index j = 0; j < n; ++j)
      if (passive[static_cast<std::size_t>(j)]) cols.push_back(j);
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
    for (std::size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = a.col(cols[k]);
    const Eigen::VectorXd zs = sub.colPivHouseholderQr().solve(b);
    Eigen::VectorXd z = Eigen::VectorXd::Zero(n);
    for (std::size_t k = 0; k < cols.size(); ++k) z(cols[k]) = zs(static_cast<Eigen::Index>(k));
    return z;
  };

  const int max_iterations = 30 * static_cast<int>(n) + 30;
  int iterations = 0;
  for (;;) {
    const Eigen::VectorXd w = a.transpose() * (b - a * x);  // minus the gradient
    Eigen::Index enter = -1;
    for (Eigen::Index j = 0; j < n; ++j) {
      const auto sj = static_cast<std::size_t>(j);
      if (passive[sj] || refused[sj] || w(j) <= tol) continue;
      if (enter < 0 || w(j) > w(enter)) enter = j;
    }
    if (enter < 0) break;  // Kuhn-Tucker conditions hold
    passive[static_cast<std::size_t>(enter)] = true;
    for (bool first = true;; first = false) {
      K3_CHECK(++iterations <= max_iterations, "nnls did not converge in {} iterations ({} unknowns)", max_iterations,
               n);
      const Eigen::VectorXd z = solve_passive();
      if (first && z(enter) <= tol) {
        // Rounding let a column in whose optimum is not positive: leave it out until x changes.
        passive[static_cast<std::size_t>(enter)] = false;
        refused[static_cast<std::size_t>(enter)] = true;
        break;
      }
      bool feasible = true;
      double alpha = 1;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (!passive[static_cast<std::size_t>(j)] || z(j) > tol) continue;
        feasible = false;
        alpha = std::min(alpha, x(j) / (x(j) - z(j)));
      }
      if (feasible) {
        x = z;
        std::fill(refused.begin(), refused.end(), false);
        break;
      }
      x += alpha * (z - x);
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[static_cast<std::size_t>(j)] && x(j) <= tol) {
          passive[static_cast<std::size_t>(j)] = false;
          x(j) = 0;
        }
      }
    }
  }
  return x;
}

}  // namespace k3::profiler
