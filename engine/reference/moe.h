// Sigmoid router and (Stable Latent) MoE of the K3 family. x is the MLP input after RMSNorm_post, [T, h].
//   router  s = sigmoid(W_r x) (fp64 logits, fp32 scores); experts = top-k of s + bias (ties: lower index);
//           w_e = s_e / (Σ_selected s + 1e-20) · routed_scaling_factor  (the bias only selects;
//           no renormalisation when top_k == 1, as in the HF KimiMoEGate)
//   routed  Kimi Linear:   Σ_e w_e · W2_e act(W1_e x, W3_e x)
//           K3 (latent):   z = W_down x;  W_up · RMSNorm_z(Σ_e w_e · W2_e act(W1_e z, W3_e z))   (eps rms_norm_eps)
//   shared  act-GLU MLP at full width on x (all shared experts fused, intermediate S);  MoE(x) = routed + shared
//   act     SiTU (K3, hidden_act "situ") or SiLU.
// Sources: K3-SPEC §5; docs/reference.md lists the public ports each fact was checked against.
#pragma once

#include "core/model_config.h"
#include "engine/reference/tensor.h"

#include <vector>

namespace k3::ref {

// Weights as stored in the checkpoint, [out, in]. z = latent_dim when the MoE is latent, else h.
struct MoeWeights {
  Matrix router;           // gate.weight [E, h]
  Vector correction_bias;  // e_score_correction_bias [E] (selection only); empty when the spec has none
  std::vector<Matrix> w1;  // per expert, gate [I, z]
  std::vector<Matrix> w3;  // per expert, up   [I, z]
  std::vector<Matrix> w2;  // per expert, down [z, I]
  Matrix latent_down;      // routed_expert_down_proj [z, h]  (latent_dim > 0, else empty)
  Matrix latent_up;        // routed_expert_up_proj   [h, z]
  Vector latent_norm;      // routed_expert_norm      [z]     (spec.latent_norm, else empty)
  Matrix shared_gate;      // shared_experts.gate_proj [S, h] (empty when S == 0)
  Matrix shared_up;        // shared_experts.up_proj   [S, h]
  Matrix shared_down;      // shared_experts.down_proj [h, S]
};

// Per token, the top-k experts in order of decreasing s + bias, and their weights.
struct Routing {
  std::vector<std::vector<int>> experts;
  std::vector<std::vector<float>> weights;
};

Routing route(const MoeSpec& spec, const MoeWeights& w, const Matrix& x);

// Routed (latent) experts plus the shared MLP; [T, h] -> [T, h]. Uses cfg.moe, cfg.activation
// (with the SiTU betas) and cfg.rms_norm_eps for the latent norm.
Matrix moe_forward(const ModelConfig& cfg, const MoeWeights& w, const Matrix& x);

}  // namespace k3::ref
