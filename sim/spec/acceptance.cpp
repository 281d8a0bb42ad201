#include "sim/spec/acceptance.h"

#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numeric>

namespace k3 {

AcceptanceModel AcceptanceModel::iid(double alpha, int draft_tokens) {
  if (!(alpha >= 0 && alpha <= 1)) throw InputError(fmt::format("acceptance rate {} is outside [0, 1]", alpha));
  if (draft_tokens < 1) throw InputError(fmt::format("draft length {} must be at least 1", draft_tokens));
  AcceptanceModel m;
  double s = 1;
  for (int i = 0; i < draft_tokens; ++i) m.survival_.push_back(s *= alpha);
  m.description_ = fmt::format("i.i.d. alpha={:.4g}, gamma={}", alpha, draft_tokens);
  return m;
}

AcceptanceModel AcceptanceModel::per_position(const std::vector<double>& rates) {
  if (rates.empty()) throw InputError("per-position acceptance needs at least one rate");
  AcceptanceModel m;
  double s = 1;
  for (std::size_t i = 0; i < rates.size(); ++i) {
    if (!(rates[i] >= 0 && rates[i] <= 1)) {
      throw InputError(fmt::format("per-position acceptance rate p_{} = {} is outside [0, 1]", i + 1, rates[i]));
    }
    m.survival_.push_back(s *= rates[i]);
  }
  m.description_ = fmt::format("per-position p=[{:.3g}]", fmt::join(rates, ", "));
  return m;
}

AcceptanceModel AcceptanceModel::empirical(const std::vector<double>& weights) {
  if (weights.size() < 2)
    throw InputError("an empirical acceptance distribution needs weights for 1..gamma+1 tokens, gamma >= 1");
  double total = 0;
  for (std::size_t k = 0; k < weights.size(); ++k) {
    if (!(weights[k] >= 0) || !std::isfinite(weights[k])) {
      throw InputError(
          fmt::format("empirical acceptance weight for {} tokens per step is {}; expected >= 0", k + 1, weights[k]));
    }
    total += weights[k];
  }
  if (total <= 0) throw InputError("empirical acceptance weights sum to zero");
  AcceptanceModel m;
  // s_i = P(A >= i) = Σ_{a >= i} w_a / Σ w, summed from the top so the tail has no cancellation.
  m.survival_.assign(weights.size() - 1, 0.0);
  double tail = 0;
  for (std::size_t a = weights.size() - 1; a >= 1; --a) {
    tail += weights[a];
    m.survival_[a - 1] = tail / total;
  }
  m.description_ = fmt::format("empirical tokens-per-step weights [{:.3g}]", fmt::join(weights, ", "));
  return m;
}

double AcceptanceModel::probability_of_accepted(int a) const {
  const int g = draft_tokens();
  K3_CHECK(a >= 0 && a <= g, "accepted count {} outside 0..{}", a, g);
  const double at_least = a == 0 ? 1.0 : survival_[a - 1];
  const double more = a == g ? 0.0 : survival_[a];
  return at_least - more;
}

double AcceptanceModel::expected_tokens_per_step() const {
  return 1.0 + std::accumulate(survival_.begin(), survival_.end(), 0.0);
}

double AcceptanceModel::variance_tokens_per_step() const {
  double mean_a = 0, second = 0;
  for (std::size_t i = 0; i < survival_.size(); ++i) {
    mean_a += survival_[i];
    second += (2.0 * double(i + 1) - 1.0) * survival_[i];
  }
  return std::max(0.0, second - mean_a * mean_a);
}

double AcceptanceModel::draft_acceptance_rate() const { return (expected_tokens_per_step() - 1.0) / draft_tokens(); }

AcceptanceModel AcceptanceModel::truncated(int draft_tokens) const {
  if (draft_tokens < 1 || draft_tokens > this->draft_tokens()) {
    throw InputError(fmt::format("cannot evaluate a {}-token draft with an acceptance model of {} ({} positions known)",
                                 draft_tokens, description_, this->draft_tokens()));
  }
  AcceptanceModel m = *this;
  m.survival_.resize(draft_tokens);
  m.description_ = fmt::format("{} (first {} positions)", description_, draft_tokens);
  return m;
}

std::string AcceptanceModel::describe() const { return description_; }

double iid_expected_tokens_per_step(double alpha, int g) {
  // Σ_{i=0..γ} α^i: the closed form (1 − α^{γ+1}) / (1 − α) cancels badly near α = 1.
  double sum = 0, term = 1;
  for (int i = 0; i <= g; ++i, term *= alpha) sum += term;
  return sum;
}

double iid_alpha_for_tokens_per_step(double tokens, int g) {
  if (g < 1) throw InputError(fmt::format("draft length {} must be at least 1", g));
  if (!(tokens >= 1 && tokens <= g + 1.0)) {
    throw InputError(
        fmt::format("{} tokens per step is impossible with a {}-token draft (range [1, {}])", tokens, g, g + 1));
  }
  double lo = 0, hi = 1;
  for (int it = 0; it < 200 && hi - lo > 1e-15; ++it) {
    const double mid = 0.5 * (lo + hi);
    (iid_expected_tokens_per_step(mid, g) < tokens ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace k3
