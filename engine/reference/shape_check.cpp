#include "engine/reference/shape_check.h"

#include "core/error.h"

#include <fmt/format.h>

namespace k3::ref {

std::string shape_of(const Matrix& m) { return fmt::format("[{}, {}]", m.rows(), m.cols()); }

void check_matrix(const Matrix& m, Eigen::Index rows, Eigen::Index cols, const std::string& what) {
  K3_CHECK(m.rows() == rows && m.cols() == cols, "{} is {}, expected [{}, {}]", what, shape_of(m), rows, cols);
}

}  // namespace k3::ref
