// Prefill time (TTFT of one sequence) from the roofline (sim/predict.h), for a prompt of `new`
// tokens after `cached` tokens reused from the cache. One roofline prediction takes about a
// millisecond, so the model evaluates it on a grid — 0 and powers of 2^(1/4) from 16 tokens, in
// both new and cached tokens — lazily, once per grid point, and interpolates bilinearly between
// them (docs/cache.md#prefill-time gives the interpolation error against exact predictions).
#pragma once

#include "core/scenario.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace k3::cache {

class PrefillTimeModel {
 public:
  // The deployment (model, hardware, parallelism, precision, runtime) of `s`; its phase is ignored.
  explicit PrefillTimeModel(Scenario s);
  double ttft_ms(int64_t new_tokens, int64_t cached_tokens);              // interpolated on the grid
  double exact_ttft_ms(int64_t new_tokens, int64_t cached_tokens) const;  // one roofline prediction
  const Scenario& scenario() const { return scenario_; }
  std::size_t evaluations() const { return memo_.size(); }

 private:
  double at(int64_t new_tokens, int64_t cached_tokens);  // memoised exact value on a grid point
  Scenario scenario_;
  std::map<std::pair<int64_t, int64_t>, double> memo_;
};

// The grid points bracketing `tokens`: lo <= tokens <= hi (lo == hi on a point).
std::pair<int64_t, int64_t> prefill_grid_bracket(int64_t tokens);

}  // namespace k3::cache
