// Shape checks of the reference ops' weights and inputs, one wording for their errors (kda.cpp, mla.cpp, moe.cpp).
#pragma once

#include "engine/reference/tensor.h"

#include <string>

namespace k3::ref {

std::string shape_of(const Matrix& m);  // "[rows, cols]"
// K3_CHECK that `m` is [rows, cols]: "<what> is [r, c], expected [rows, cols]" ("MLA q_a is ...").
void check_matrix(const Matrix& m, Eigen::Index rows, Eigen::Index cols, const std::string& what);

}  // namespace k3::ref
