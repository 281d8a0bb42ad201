#include "engine/reference/basic_ops.h"

#include <cmath>

namespace k3::ref {

Matrix rmsnorm(const Matrix& x, const Vector& weight, double eps) {
  Matrix y(x.rows(), x.cols());
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    double sum_sq = 0;
    for (Eigen::Index i = 0; i < x.cols(); ++i) sum_sq += double(x(t, i)) * x(t, i);
    const double inv = 1.0 / std::sqrt(sum_sq / double(x.cols()) + eps);
    for (Eigen::Index i = 0; i < x.cols(); ++i) y(t, i) = float(x(t, i) * inv * weight(i));
  }
  return y;
}

float sigmoid(float a) { return float(1.0 / (1.0 + std::exp(-double(a)))); }
float silu(float a) { return a * sigmoid(a); }

float situ(float gate, float up, double beta, double linear_beta) {
  const double g = beta * std::tanh(gate / beta) * (1.0 / (1.0 + std::exp(-double(gate))));
  const double u = linear_beta * std::tanh(up / linear_beta);
  return float(g * u);
}

Matrix glu_mlp_silu(const Matrix& x, const Matrix& w_gate, const Matrix& w_up, const Matrix& w_down) {
  const Matrix a = linear(x, w_gate), u = linear(x, w_up);
  Matrix h(a.rows(), a.cols());
  for (Eigen::Index i = 0; i < a.size(); ++i) h.data()[i] = silu(a.data()[i]) * u.data()[i];
  return linear(h, w_down);
}

Matrix glu_mlp_situ(const Matrix& x, const Matrix& w_gate, const Matrix& w_up, const Matrix& w_down, double beta,
                    double linear_beta) {
  const Matrix a = linear(x, w_gate), u = linear(x, w_up);
  Matrix h(a.rows(), a.cols());
  for (Eigen::Index i = 0; i < a.size(); ++i) h.data()[i] = situ(a.data()[i], u.data()[i], beta, linear_beta);
  return linear(h, w_down);
}

Matrix l2_normalize_rows(const Matrix& x, double eps) {
  Matrix y(x.rows(), x.cols());
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    double sum_sq = 0;
    for (Eigen::Index i = 0; i < x.cols(); ++i) sum_sq += double(x(t, i)) * x(t, i);
    const double inv = 1.0 / std::sqrt(sum_sq + eps);
    for (Eigen::Index i = 0; i < x.cols(); ++i) y(t, i) = float(x(t, i) * inv);
  }
  return y;
}

}  // namespace k3::ref
