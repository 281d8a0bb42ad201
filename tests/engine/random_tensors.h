// Fresh random inputs for the reference tests: uniform in [-scale, scale), from a seeded engine.
#pragma once

#include "engine/reference/tensor.h"

#include <random>

namespace k3::ref::test {

inline Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = scale * dist(rng);
  return m;
}

}  // namespace k3::ref::test
