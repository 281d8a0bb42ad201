// Gated NoPE MLA (multi-head latent attention) of the K3 family, in two equivalent forms.
// Shapes (H heads, dn = qk_nope, dr = qk_rope, dv = v_head, r = kv_lora_rank, T new tokens):
//   q   = W_qb · RMSNorm_q(W_qa x)   (or W_q x without q_lora)     [T, H·(dn+dr)], per head [q_nope | q_r]
//   [c | k_r] = W_kva x;  c = RMSNorm_kv(c)                         [T, r + dr], k_r shared by all heads
//   [k_nope | v]_h = W_kvb_h c                                      per head dn | dv
//   score(i, j) = (q_nope·k_nope + q_r·k_r) / sqrt(dn+dr), causal softmax (fp64)
//   y = W_o (attn ⊙ sigmoid(W_g x))   (the gate only when MlaSpec::output_gate)
// The rope dims are never rotated (NoPE); a rotary spec (DeepSeek-V3 / K2) is refused.
// Sources: K3-SPEC §4; docs/reference.md lists the public ports each fact was checked against.
#pragma once

#include "core/model_config.h"
#include "engine/reference/tensor.h"

namespace k3::ref {

// Weights as stored in the checkpoint, [out, in].
struct MlaWeights {
  Matrix q_a;        // [q_lora, h]              (q_lora_rank > 0)
  Vector q_a_norm;   // [q_lora]
  Matrix q_b;        // [H·(dn+dr), q_lora]
  Matrix q_proj;     // [H·(dn+dr), h]           (q_lora_rank == 0)
  Matrix kv_a;       // kv_a_proj_with_mqa [r + dr, h]
  Vector kv_a_norm;  // [r]
  Matrix kv_b;       // [H·(dn+dv), r]; per head, rows k_nope (dn) then v (dv)
  Matrix g_proj;     // [H·dv, h] when spec.output_gate, else empty
  Matrix o_proj;     // [h, H·dv]
};

// Per-sequence decode cache of one MLA layer: one row per token, the normalised latent c then k_r
// (never rotated). This is what the absorbed form reads; 576 values per token for K3.
struct MlaCache {
  Matrix latent;  // [tokens, r + dr]
};

// x: the layer input after RMSNorm_in, [T, h]. Appends the T tokens' [c | k_r] to the cache; token i
// attends to every cached token and to new tokens 0..i. latent_eps is the q_a/kv_a norm epsilon
// (the K3 HF reference uses 1e-6). Returns [T, h].
Matrix mla_naive(const MlaSpec& spec, double latent_eps, const MlaWeights& w, const Matrix& x, MlaCache& cache);

// Same result through the absorbed ("MQA") form used at decode: W_kvb's key half is folded into q
// (q_lat_h = W_uk_hᵀ q_nope_h, scored against c) and its value half is applied after attention.
Matrix mla_absorbed(const MlaSpec& spec, double latent_eps, const MlaWeights& w, const Matrix& x, MlaCache& cache);

}  // namespace k3::ref
