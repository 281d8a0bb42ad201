// What the greedy sampling case (sampling_cases.cpp) shares with the plain sampling tests beside it
// (tests/kernels/sampling_gpu_test.cpp): the vocabulary and the CPU argmax both check against.
#pragma once

#include <cmath>
#include <cstdint>

namespace k3::gpu_test::sampling {

inline constexpr int kK3Vocab = 163840;

// Lowest id of the largest value, NaN as −∞.
inline int32_t cpu_argmax(const float* row, int vocab) {
  int32_t best = 0;
  float best_value = -INFINITY;
  for (int i = 0; i < vocab; ++i) {
    const float v = std::isnan(row[i]) ? -INFINITY : row[i];
    if (v > best_value) {
      best_value = v;
      best = i;
    }
  }
  return best;
}

}  // namespace k3::gpu_test::sampling
