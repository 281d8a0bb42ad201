#include "sim/cache/prefill_time.h"

#include "core/error.h"
#include "sim/predict.h"

#include <cmath>

namespace k3::cache {

std::pair<int64_t, int64_t> prefill_grid_bracket(int64_t tokens) {
  K3_CHECK(tokens >= 0, "negative token count {}", tokens);
  if (tokens == 0) return {0, 0};
  if (tokens < 16) return {0, 16};
  // Points round(16 * 2^(k/4)), k = 0, 1, ...
  int64_t lo = 16;
  for (int k = 1;; ++k) {
    const int64_t p = std::llround(16.0 * std::pow(2.0, k / 4.0));
    if (p == tokens) return {p, p};
    if (p > tokens) return {lo == tokens ? tokens : lo, lo == tokens ? tokens : p};
    lo = p;
  }
}

PrefillTimeModel::PrefillTimeModel(Scenario s) : scenario_(std::move(s)) {}

double PrefillTimeModel::exact_ttft_ms(int64_t new_tokens, int64_t cached_tokens) const {
  if (new_tokens <= 0) return 0;
  Scenario s = scenario_;
  s.phase = Phase::prefill(1, new_tokens, cached_tokens, scenario_.phase.prefill_chunk_tokens);
  return predict(s).step_ms();
}

double PrefillTimeModel::at(int64_t new_tokens, int64_t cached_tokens) {
  auto [it, inserted] = memo_.try_emplace({new_tokens, cached_tokens}, 0.0);
  if (inserted) it->second = exact_ttft_ms(new_tokens, cached_tokens);
  return it->second;
}

double PrefillTimeModel::ttft_ms(int64_t new_tokens, int64_t cached_tokens) {
  if (new_tokens <= 0) return 0;
  const auto [n0, n1] = prefill_grid_bracket(new_tokens);
  const auto [c0, c1] = prefill_grid_bracket(cached_tokens);
  const double wn = n1 == n0 ? 0 : double(new_tokens - n0) / double(n1 - n0);
  const double wc = c1 == c0 ? 0 : double(cached_tokens - c0) / double(c1 - c0);
  auto row = [&, n0 = n0, n1 = n1](int64_t c) {  // Clang 14 captures no structured bindings
    const double a = at(n0, c);
    return wn == 0 ? a : a + wn * (at(n1, c) - a);
  };
  const double r0 = row(c0);
  return wc == 0 ? r0 : r0 + wc * (row(c1) - r0);
}

}  // namespace k3::cache
