// Dense fp32 tensors of the CPU reference (Eigen). Activations are [tokens, width] row-major;
// a weight W of a linear layer y = x Wᵀ is stored [out, in] as in the checkpoint.
#pragma once

#include <Eigen/Dense>

namespace k3::ref {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;
using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// y[T, out] = x[T, in] · W[out, in]ᵀ
inline Matrix linear(const Matrix& x, const Matrix& w) { return x * w.transpose(); }

}  // namespace k3::ref
