// The op vocabulary of k3perf, defined once: every op the op graph predicts and every range the GPU engine
// opens has an OpId, and one table gives its name, its kind and what the engine does with it. The op graph
// (core/op_graph.cpp), the engine's NVTX ranges (engine/runtime/) and the profiler all take names from here,
// so a rename changes every side at once.
//
// Names: a layer op is "L<layer, 1-based, 3 digits>.<module>.<op>" (L004.mla.attn_decode); the others are
// "embed.<op>", "head.<op>" or "decode.<op>". docs/opgraph.md lists the table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace k3 {

enum class OpKind {
  embedding,
  rmsnorm,
  attnres_mix,      // Block AttnRes mixer over stored blocks + partial sum
  gemm,             // dense projection
  elementwise,      // activation, gates, latent norm, residual add, sampling, ...
  kda_preprocess,   // short conv + SiLU + L2 norm + forget gate + beta, fused
  kda_recurrent,    // KDA recurrent state update (decode, verify)
  kda_chunk,        // KDA chunked scan (prefill)
  kda_output_norm,  // gated RMSNorm on the KDA output
  mla_attention,    // MLA attention core (absorbed decode or prefill MHA form)
  router,           // MoE router scores + top-k
  moe_experts,      // routed experts: grouped GEMMs + activation
  collective,       // communication between GPUs
};
std::string to_string(OpKind k);
std::optional<OpKind> parse_op_kind(std::string_view name);

enum class OpId : std::uint8_t {
  embed_lookup,
  embed_all_reduce,
  embed_reduce_scatter,
  // One layer, in graph order: the attention sublayer's residual stream, KDA, MLA, ...
  attnres_pre_attn,
  norm_attn_in,
  attn_sequence_all_gather,
  kda_qkv_proj,
  kda_gate_proj,
  kda_out_gate_proj,
  kda_preprocess,
  kda_chunk,
  kda_recurrent,
  kda_out_norm,
  kda_o_proj,
  kda_rollback,  // speculative decoding's state rollback (sim/spec; not a graph op)
  mla_qkv_a_proj,
  mla_latent_norm,
  mla_q_proj,
  mla_kv_b_proj,
  mla_attn_prefill,
  mla_q_absorb,
  mla_attn_decode,
  mla_v_absorb,
  mla_out_gate_proj,
  mla_o_proj,
  attn_all_reduce,
  attn_reduce_scatter,
  attn_residual,
  // ... the MLP sublayer's residual stream, dense MLP, MoE
  attnres_pre_mlp,
  norm_mlp_in,
  mlp_sequence_all_gather,
  mlp_gate_up_proj,
  mlp_act,
  mlp_down_proj,
  moe_router,
  moe_latent_down,
  moe_dispatch,
  moe_experts,
  moe_expert_all_reduce,
  moe_combine,
  moe_latent_norm,
  moe_weighted_sum,
  moe_latent_up,
  moe_shared,
  mlp_all_reduce,
  mlp_reduce_scatter,
  mlp_residual,
  pp_send,
  head_attnres,
  head_norm,
  head_sequence_all_gather,
  head_lm_head,
  head_all_gather,
  head_sample,
  decode_advance,
};
inline constexpr int kOpIdCount = static_cast<int>(OpId::decode_advance) + 1;

enum class OpScope { layer, embed, head, decode };

struct OpInfo {
  OpId id;
  OpScope scope;
  const char* suffix;  // "<module>.<op>"; the name after "Lnnn." for a layer op, the whole name otherwise
  OpKind kind;
  // The op the engine runs this one inside (same kernel, same range) when the model has Block AttnRes:
  // the RMSNorm after a mixer is fused into the mixer's kernel. Empty: the op has its own range.
  std::optional<OpId> attnres_host;
  // A range the engine opens that the op graph does not predict (residual adds, sampling, the step's
  // position update); the graph lists those of each model and phase (OpGraph::engine_only).
  bool engine_only = false;
};

const OpInfo& op_info(OpId id);
// "L004.mla.attn_decode" (layer 0-based), "head.lm_head"; `layer` is ignored outside OpScope::layer.
std::string op_name(OpId id, int layer);
// The module: "mla" for L004.mla.attn_decode, "head" for head.lm_head.
std::string op_module(OpId id);

struct OpRef;
// The inverse of op_name: "L004.mla.attn_decode" -> {3, mla_attn_decode}; empty for a name not in the table.
std::optional<OpRef> parse_op_name(std::string_view name);

// One op at one place: a graph op's or an engine range's identity.
struct OpRef {
  int layer = -1;  // 0-based; -1 outside OpScope::layer
  OpId id = OpId::embed_lookup;
  std::string name() const { return op_name(id, layer); }
  // Written out (not `= default`): CUDA sources that include this header build as C++17.
  bool operator==(const OpRef& o) const { return layer == o.layer && id == o.id; }
  bool operator!=(const OpRef& o) const { return !(*this == o); }
};

}  // namespace k3
