// Block Attention Residuals (K3-SPEC §2) and the plain residual, behind one stack interface.
//   mix(V_1..V_n) = Σ_n softmax(s)_n · V_n,   s_n = Σ_i (V_n,i / rms(V_n)) · γ_i · w_i,
//   rms(v) = sqrt(mean(v²) + eps), per token; logit scale 1; the sum is over the raw V (fp64 inside).
// Sources: K3-SPEC §2; docs/reference.md lists the public ports each fact was checked against.
#pragma once

#include "core/model_config.h"
#include "engine/reference/tensor.h"

#include <optional>
#include <vector>

namespace k3::ref {

// One mixer: the pseudo-query w (*_res_proj, stored [1, h]) and the key-norm weight γ (*_res_norm).
struct AttnResMixer {
  Vector query;     // [h]
  Vector key_norm;  // [h]
};

// candidates: n ≥ 1 matrices [T, h] (the stored blocks, then the partial sum). Returns [T, h].
Matrix attnres_mix(const std::vector<const Matrix*>& candidates, const AttnResMixer& mixer, double eps = 1e-5);

// The residual stream of a whole decoder stack. Per layer ℓ the model assembly calls, in order:
//   h = attention_input(ℓ, mixer);  add_attention_output(ℓ, Attn_ℓ(RMSNorm_in(h)));
//   h = mlp_input(ℓ, mixer);        add_mlp_output(MLP_ℓ(RMSNorm_post(h)));
// and after the last layer final_input(mixer) feeds RMSNorm_final. Any other order throws.
// Block AttnRes: p starts as the embedding; attention_input mixes blocks + [p] (p alone before layer 0),
// then at ℓ % block_layers == 0 closes the block (ℓ = 0 stores the embedding). There is no x + f(x).
// Plain residual (Kimi Linear): the inputs are x itself and each output is added, x ← x + f(x);
// mixers are ignored.
class AttnResStack {
 public:
  AttnResStack(ResidualKind kind, int block_layers, double eps);
  // Kind and block size from the config; eps = rms_norm_eps (the *_res_norm epsilon).
  explicit AttnResStack(const ModelConfig& cfg);

  void begin(const Matrix& embedding);  // [T, h]; starts layer 0
  Matrix attention_input(int layer, const AttnResMixer& mixer);
  void add_attention_output(int layer, const Matrix& attention_output);
  Matrix mlp_input(int layer, const AttnResMixer& mixer);
  void add_mlp_output(const Matrix& mlp_output);
  Matrix final_input(const AttnResMixer& mixer);

  // Candidates mixed by the most recent *_input call; 0 when it passed the stream through unmixed
  // (layer 0's attention input, and always for the plain residual).
  int candidates() const { return candidates_; }
  int stored_blocks() const { return int(blocks_.size()); }

 private:
  enum class Phase { not_started, attention_input, attention_output, mlp_input, mlp_output };
  void expect(Phase phase, int layer, const char* call) const;
  Matrix mix(const AttnResMixer& mixer);  // blocks + [p]; records candidates_
  void accumulate(const Matrix& output);

  ResidualKind kind_;
  int block_layers_;
  double eps_;
  Phase phase_ = Phase::not_started;
  int layer_ = 0;
  std::vector<Matrix> blocks_;     // closed blocks (block AttnRes)
  std::optional<Matrix> partial_;  // p, or x for the plain residual; empty right after a block closes
  int candidates_ = 0;
};

}  // namespace k3::ref
