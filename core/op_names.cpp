#include "core/op_names.h"

#include <fmt/format.h>

#include <array>

namespace k3 {

namespace {

using enum OpId;
constexpr OpScope L = OpScope::layer;

// In OpId order (checked below).
constexpr std::array<OpInfo, kOpIdCount> kOps = {{
    {embed_lookup, OpScope::embed, "embed.lookup", OpKind::embedding, {}},
    {embed_all_reduce, OpScope::embed, "embed.all_reduce", OpKind::collective, {}},
    {embed_reduce_scatter, OpScope::embed, "embed.reduce_scatter", OpKind::collective, {}},
    {attnres_pre_attn, L, "attnres.pre_attn", OpKind::attnres_mix, {}},
    {norm_attn_in, L, "norm.attn_in", OpKind::rmsnorm, attnres_pre_attn},
    {attn_sequence_all_gather, L, "attn.sequence_all_gather", OpKind::collective, {}},
    {kda_qkv_proj, L, "kda.qkv_proj", OpKind::gemm, {}},
    {kda_gate_proj, L, "kda.gate_proj", OpKind::gemm, {}},
    {kda_out_gate_proj, L, "kda.out_gate_proj", OpKind::gemm, {}},
    {kda_preprocess, L, "kda.preprocess", OpKind::kda_preprocess, {}},
    {kda_chunk, L, "kda.chunk", OpKind::kda_chunk, {}},
    {kda_recurrent, L, "kda.recurrent", OpKind::kda_recurrent, {}},
    {kda_out_norm, L, "kda.out_norm", OpKind::kda_output_norm, {}},
    {kda_o_proj, L, "kda.o_proj", OpKind::gemm, {}},
    {kda_rollback, L, "kda.rollback", OpKind::kda_recurrent, {}},
    {mla_qkv_a_proj, L, "mla.qkv_a_proj", OpKind::gemm, {}},
    {mla_latent_norm, L, "mla.latent_norm", OpKind::rmsnorm, {}},
    {mla_q_proj, L, "mla.q_proj", OpKind::gemm, {}},
    {mla_kv_b_proj, L, "mla.kv_b_proj", OpKind::gemm, {}},
    {mla_attn_prefill, L, "mla.attn_prefill", OpKind::mla_attention, {}},
    {mla_q_absorb, L, "mla.q_absorb", OpKind::gemm, {}},
    {mla_attn_decode, L, "mla.attn_decode", OpKind::mla_attention, {}},
    {mla_v_absorb, L, "mla.v_absorb", OpKind::gemm, {}},
    {mla_out_gate_proj, L, "mla.out_gate_proj", OpKind::gemm, {}},
    {mla_o_proj, L, "mla.o_proj", OpKind::gemm, {}},
    {attn_all_reduce, L, "attn.all_reduce", OpKind::collective, {}},
    {attn_reduce_scatter, L, "attn.reduce_scatter", OpKind::collective, {}},
    {attn_residual, L, "attn.residual", OpKind::elementwise, {}, true},
    {attnres_pre_mlp, L, "attnres.pre_mlp", OpKind::attnres_mix, {}},
    {norm_mlp_in, L, "norm.mlp_in", OpKind::rmsnorm, attnres_pre_mlp},
    {mlp_sequence_all_gather, L, "mlp.sequence_all_gather", OpKind::collective, {}},
    {mlp_gate_up_proj, L, "mlp.gate_up_proj", OpKind::gemm, {}},
    {mlp_act, L, "mlp.act", OpKind::elementwise, {}},
    {mlp_down_proj, L, "mlp.down_proj", OpKind::gemm, {}},
    {moe_router, L, "moe.router", OpKind::router, {}},
    {moe_latent_down, L, "moe.latent_down", OpKind::gemm, {}},
    {moe_dispatch, L, "moe.dispatch", OpKind::collective, {}},
    {moe_experts, L, "moe.experts", OpKind::moe_experts, {}},
    {moe_expert_all_reduce, L, "moe.expert_all_reduce", OpKind::collective, {}},
    {moe_combine, L, "moe.combine", OpKind::collective, {}},
    {moe_latent_norm, L, "moe.latent_norm", OpKind::elementwise, {}},
    {moe_weighted_sum, L, "moe.weighted_sum", OpKind::elementwise, {}},
    {moe_latent_up, L, "moe.latent_up", OpKind::gemm, {}},
    {moe_shared, L, "moe.shared", OpKind::gemm, {}},
    {mlp_all_reduce, L, "mlp.all_reduce", OpKind::collective, {}},
    {mlp_reduce_scatter, L, "mlp.reduce_scatter", OpKind::collective, {}},
    {mlp_residual, L, "mlp.residual", OpKind::elementwise, {}, true},
    {pp_send, L, "pp.send", OpKind::collective, {}},
    {head_attnres, OpScope::head, "head.attnres", OpKind::attnres_mix, {}},
    {head_norm, OpScope::head, "head.norm", OpKind::rmsnorm, head_attnres},
    {head_sequence_all_gather, OpScope::head, "head.sequence_all_gather", OpKind::collective, {}},
    {head_lm_head, OpScope::head, "head.lm_head", OpKind::gemm, {}},
    {head_all_gather, OpScope::head, "head.all_gather", OpKind::collective, {}},
    {head_sample, OpScope::head, "head.sample", OpKind::elementwise, {}, true},
    {decode_advance, OpScope::decode, "decode.advance", OpKind::elementwise, {}, true},
}};

constexpr bool in_id_order() {
  for (int i = 0; i < kOpIdCount; ++i) {
    if (static_cast<int>(kOps[i].id) != i) return false;
  }
  return true;
}
static_assert(in_id_order(), "kOps must list every OpId once, in enum order");

}  // namespace

std::string to_string(OpKind k) {
  switch (k) {
    case OpKind::embedding: return "embedding";
    case OpKind::rmsnorm: return "rmsnorm";
    case OpKind::attnres_mix: return "attnres_mix";
    case OpKind::gemm: return "gemm";
    case OpKind::elementwise: return "elementwise";
    case OpKind::kda_preprocess: return "kda_preprocess";
    case OpKind::kda_recurrent: return "kda_recurrent";
    case OpKind::kda_chunk: return "kda_chunk";
    case OpKind::kda_output_norm: return "kda_output_norm";
    case OpKind::mla_attention: return "mla_attention";
    case OpKind::router: return "router";
    case OpKind::moe_experts: return "moe_experts";
    case OpKind::collective: return "collective";
  }
  return "?";
}

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (int k = 0; k <= static_cast<int>(OpKind::collective); ++k) {
    if (to_string(static_cast<OpKind>(k)) == name) return static_cast<OpKind>(k);
  }
  return std::nullopt;
}

const OpInfo& op_info(OpId id) { return kOps[static_cast<std::size_t>(id)]; }

std::string op_name(OpId id, int layer) {
  const OpInfo& info = op_info(id);
  if (info.scope == OpScope::layer) return fmt::format("L{:03d}.{}", layer + 1, info.suffix);
  return info.suffix;
}

std::string op_module(OpId id) {
  const std::string_view suffix = op_info(id).suffix;
  return std::string(suffix.substr(0, suffix.find('.')));
}

std::optional<OpRef> parse_op_name(std::string_view name) {
  int layer = -1;
  std::string_view suffix = name;
  if (name.size() > 5 && name[0] == 'L' && name[4] == '.') {
    layer = 0;
    for (const char ch : name.substr(1, 3)) {
      if (ch < '0' || ch > '9') return std::nullopt;
      layer = layer * 10 + (ch - '0');
    }
    if (layer == 0) return std::nullopt;
    --layer;
    suffix = name.substr(5);
  }
  for (const OpInfo& info : kOps) {
    if ((info.scope == OpScope::layer) == (layer >= 0) && suffix == info.suffix) return OpRef{layer, info.id};
  }
  return std::nullopt;
}

}  // namespace k3
