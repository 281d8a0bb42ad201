// Speculative-decoding acceptance (docs/spec.md). A target step verifies a draft of γ tokens and
// keeps the longest accepted prefix plus one token of its own, so it emits A + 1 tokens with A, the
// accepted drafts, in 0..γ. Every model here is reduced to its survival function
//   s_i = P(A ≥ i), i = 1..γ,
// from which E[A + 1] = 1 + Σ s_i and E[A²] = Σ (2i − 1)·s_i. Three ways to give it:
//   i.i.d.        one rate α per drafted token:            s_i = α^i   (Leviathan et al. 2023)
//   per position  p_1..p_γ, p_i = P(draft i accepted | all before it accepted):  s_i = Π_{j≤i} p_j
//   empirical     weights of the observed tokens per step 1..γ+1 (e.g. one histogram per task)
#pragma once

#include <string>
#include <vector>

namespace k3 {

class AcceptanceModel {
 public:
  static AcceptanceModel iid(double alpha, int draft_tokens);                    // α in [0, 1]
  static AcceptanceModel per_position(const std::vector<double>& accept_rates);  // γ = size()
  // weights[k] is the frequency of k + 1 tokens per step (k = 0..γ); any non-negative scale.
  static AcceptanceModel empirical(const std::vector<double>& weights);

  int draft_tokens() const { return static_cast<int>(survival_.size()); }  // γ
  const std::vector<double>& survival() const { return survival_; }        // s_1..s_γ
  double probability_of_accepted(int a) const;                             // P(A = a), a in 0..γ

  double expected_tokens_per_step() const;  // E[A + 1], in [1, γ + 1]
  double variance_tokens_per_step() const;  // Var(A + 1)
  double draft_acceptance_rate() const;     // E[A] / γ: accepted over drafted
  // The same drafter asked for fewer tokens: s_1..s_γ' of this model (γ' ≤ γ).
  AcceptanceModel truncated(int draft_tokens) const;
  std::string describe() const;  // "i.i.d. α=0.80, γ=7" / "per-position [..]" / "empirical [..]"

 private:
  std::vector<double> survival_;
  std::string description_;
};

// Expected tokens per target step of the i.i.d. model: (1 − α^{γ+1}) / (1 − α), γ + 1 at α = 1.
double iid_expected_tokens_per_step(double alpha, int draft_tokens);
// Claim inversion: the i.i.d. rate α that gives `tokens_per_step` tokens per step with γ drafts
// (bisection; E is increasing in α). Throws InputError unless 1 ≤ tokens_per_step ≤ γ + 1.
double iid_alpha_for_tokens_per_step(double tokens_per_step, int draft_tokens);

}  // namespace k3
