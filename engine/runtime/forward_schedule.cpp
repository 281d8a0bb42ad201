#include "engine/runtime/forward_schedule.h"

#include "core/error.h"

namespace k3::runtime {

std::optional<Sublayer> sublayer_of(OpId id) {
  switch (id) {
    case OpId::kda_qkv_proj:
    case OpId::kda_gate_proj:
    case OpId::kda_out_gate_proj:
    case OpId::kda_preprocess:
    case OpId::kda_chunk:
    case OpId::kda_recurrent:
    case OpId::kda_out_norm:
    case OpId::kda_o_proj:
    case OpId::mla_qkv_a_proj:
    case OpId::mla_latent_norm:
    case OpId::mla_q_proj:
    case OpId::mla_kv_b_proj:
    case OpId::mla_attn_prefill:
    case OpId::mla_q_absorb:
    case OpId::mla_attn_decode:
    case OpId::mla_v_absorb:
    case OpId::mla_out_gate_proj:
    case OpId::mla_o_proj: return Sublayer::attention;
    case OpId::mlp_gate_up_proj:
    case OpId::mlp_act:
    case OpId::mlp_down_proj:
    case OpId::moe_router:
    case OpId::moe_latent_down:
    case OpId::moe_experts:
    case OpId::moe_latent_norm:
    case OpId::moe_weighted_sum:
    case OpId::moe_latent_up:
    case OpId::moe_shared:
    case OpId::moe_dispatch:  // a rank's MoE exchange runs inside its sublayer (moe_layer.h)
    case OpId::moe_combine: return Sublayer::mlp;
    default: return std::nullopt;
  }
}

bool folds_residual(const ModelConfig& c, int layer, Sublayer sublayer, bool tapped, bool tensor_parallel) {
  if (c.residual != ResidualKind::plain || tapped || tensor_parallel) return false;
  const bool bf16_sum_moe = sublayer == Sublayer::mlp && c.layer_mlp[layer] == MlpKind::moe && c.moe->latent_dim <= 0;
  return !bf16_sum_moe;
}

namespace {

void attention_ops(const ModelConfig& c, const ForwardPass& pass, const Parallelism& par, int l,
                   std::vector<OpRef>& out) {
  auto add = [&](OpId id) { out.push_back({l, id}); };
  if (c.layer_attention[l] == AttentionKind::kda) {
    for (OpId id : {OpId::kda_qkv_proj, OpId::kda_gate_proj, OpId::kda_out_gate_proj, OpId::kda_preprocess}) add(id);
    add(pass.decode ? OpId::kda_recurrent : OpId::kda_chunk);
    add(OpId::kda_out_norm);
    add(OpId::kda_o_proj);
    if (par.tp > 1) add(OpId::attn_all_reduce);
    return;
  }
  for (OpId id : {OpId::mla_qkv_a_proj, OpId::mla_latent_norm, OpId::mla_q_proj}) add(id);
  if (c.mla.output_gate) add(OpId::mla_out_gate_proj);  // sigmoid(W_g x) needs only x
  if (pass.decode) {
    for (OpId id : {OpId::mla_q_absorb, OpId::mla_attn_decode, OpId::mla_v_absorb}) add(id);
  } else {
    add(OpId::mla_kv_b_proj);
    add(OpId::mla_attn_prefill);
  }
  add(OpId::mla_o_proj);
  if (par.tp > 1) add(OpId::attn_all_reduce);
}

void mlp_ops(const ModelConfig& c, const Parallelism& par, int l, std::vector<OpRef>& out) {
  auto add = [&](OpId id) { out.push_back({l, id}); };
  if (c.layer_mlp[l] == MlpKind::dense) {
    for (OpId id : {OpId::mlp_gate_up_proj, OpId::mlp_act, OpId::mlp_down_proj}) add(id);
    if (par.tp > 1) add(OpId::mlp_all_reduce);
    return;
  }
  const MoeSpec& e = *c.moe;
  // The routed experts between the tokens' dispatch to their experts' ranks and the outputs' return.
  auto experts = [&] {
    if (par.ep > 1) add(OpId::moe_dispatch);
    add(OpId::moe_experts);
    if (par.ep > 1) add(OpId::moe_combine);
    // Each expert's intermediate split over moe_tp GPUs gives partial outputs; the weighted sum over a token's k
    // experts is linear, so the partial sums are reduced once per token (the op graph's R·z payload).
    if (par.moe_tp() > 1) add(OpId::moe_expert_all_reduce);
  };
  add(OpId::moe_router);
  if (e.latent_dim <= 0) {  // Kimi Linear: bf16 experts at hidden width, no latent projections
    experts();
    add(OpId::moe_weighted_sum);
  } else {
    add(OpId::moe_latent_down);
    experts();
    add(e.latent_norm ? OpId::moe_latent_norm : OpId::moe_weighted_sum);
    add(OpId::moe_latent_up);
  }
  if (e.shared_intermediate > 0) add(OpId::moe_shared);
  if (par.tp > 1) add(OpId::mlp_all_reduce);
}

}  // namespace

std::vector<OpRef> forward_schedule(const ModelConfig& c, const ForwardPass& pass, bool tapped,
                                    const Parallelism& par) {
  K3_CHECK(par.pp == 1 && !(par.sequence_parallel && par.tp > 1),
           "the engine's forward has no pipeline or sequence parallelism");
  const bool tp = par.tp > 1;
  std::vector<OpRef> out;
  out.reserve(static_cast<std::size_t>(c.num_layers) * 24 + 8);
  out.push_back({-1, OpId::embed_lookup});
  if (tp) out.push_back({-1, OpId::embed_all_reduce});  // vocabulary-parallel rows: each rank's lookups summed
  const bool attnres = c.residual == ResidualKind::block_attnres;
  for (int l = 0; l < c.num_layers; ++l) {
    // Block AttnRes: the mixer runs the RMSNorm after it in its own kernel (norm.attn_in, norm.mlp_in).
    out.push_back({l, attnres ? OpId::attnres_pre_attn : OpId::norm_attn_in});
    attention_ops(c, pass, par, l, out);
    if (!folds_residual(c, l, Sublayer::attention, tapped, tp)) out.push_back({l, OpId::attn_residual});
    out.push_back({l, attnres ? OpId::attnres_pre_mlp : OpId::norm_mlp_in});
    mlp_ops(c, par, l, out);
    if (!folds_residual(c, l, Sublayer::mlp, tapped, tp)) out.push_back({l, OpId::mlp_residual});
  }
  out.push_back({-1, attnres ? OpId::head_attnres : OpId::head_norm});
  if (pass.decode || pass.logits) {
    out.push_back({-1, OpId::head_lm_head});
    if (tp) out.push_back({-1, OpId::head_all_gather});  // every rank's vocabulary rows of the logits
    out.push_back({-1, OpId::head_sample});
  }
  if (pass.decode) out.push_back({-1, OpId::decode_advance});
  return out;
}

}  // namespace k3::runtime
