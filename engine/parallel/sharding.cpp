#include "engine/parallel/sharding.h"

#include "core/error.h"
#include "engine/weights/tensor_dtype.h"

#include <fmt/format.h>

#include <string_view>

namespace k3::parallel {

using weights::TensorRole;
using weights::TensorSpec;

std::string to_string(Placement p) {
  switch (p) {
    case Placement::replicated: return "replicated";
    case Placement::tensor_parallel: return "tensor_parallel";
    case Placement::expert_parallel: return "expert_parallel";
  }
  return "?";
}

int copies(Placement p, const Parallelism& par) {
  switch (p) {
    case Placement::replicated: return par.stage_gpus();
    case Placement::tensor_parallel: return par.attention_dp;
    case Placement::expert_parallel: return 1;
  }
  return 0;
}

std::string to_string(ShardUnit u) {
  switch (u) {
    case ShardUnit::whole: return "whole";
    case ShardUnit::heads: return "heads";
    case ShardUnit::vocab_rows: return "vocab_rows";
    case ShardUnit::intermediate: return "intermediate";
  }
  return "?";
}

int64_t RankShards::bytes() const {
  int64_t n = 0;
  for (const TensorShard& s : shards) n += s.bytes;
  return n;
}

std::map<TensorRole, int64_t> RankShards::bytes_by_role() const {
  std::map<TensorRole, int64_t> out;
  for (const TensorShard& s : shards) out[s.role] += s.bytes;
  return out;
}

namespace {

// How a tensor is shared out: `units` (heads, rows, columns) along `dim`, of which `extent` stored indices are
// distributed.
struct Rule {
  Placement placement = Placement::replicated;
  int dim = -1;
  ShardUnit unit = ShardUnit::whole;
  int64_t units = 0;
  int64_t extent = 0;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The name inside its layer ("self_attn.q_proj.weight"), or the whole name for the embedding and head tensors.
std::string_view local_name(const TensorSpec& t) {
  std::string_view name = t.name;
  if (t.layer < 0) return name;
  std::size_t at = name.find("layers.");
  K3_CHECK(at != std::string_view::npos, "tensor {} of layer {} lacks 'layers.'", t.name, t.layer);
  at += 7;
  while (at < name.size() && name[at] >= '0' && name[at] <= '9') ++at;
  return name.substr(at + 1);  // past the layer number's '.'
}

// The routed expert a tensor belongs to: "block_sparse_moe.experts.17.w1.weight" -> 17.
int64_t expert_index(std::string_view local) {
  const std::string_view marker = "experts.";
  const std::size_t at = local.find(marker);
  K3_CHECK(at != std::string_view::npos, "expert tensor {} has no expert index", local);
  int64_t x = 0;
  for (std::size_t i = at + marker.size(); i < local.size() && local[i] >= '0' && local[i] <= '9'; ++i) {
    x = x * 10 + (local[i] - '0');
  }
  return x;
}

Rule split(Placement p, int dim, ShardUnit unit, int64_t units, const TensorSpec& t) {
  return Rule{p, dim, unit, units, t.shape.at(static_cast<std::size_t>(dim))};
}

Rule attention_rule(const ModelConfig& m, const TensorSpec& t, std::string_view local) {
  const bool kda = m.layer_attention[static_cast<std::size_t>(t.layer)] == AttentionKind::kda;
  const int64_t heads = kda ? m.kda->num_heads : m.mla.num_heads;
  // Low-rank inputs shared by every head: f_a/g_a (KDA), q_a and kv_a (MLA).
  for (std::string_view replicated :
       {"f_a_proj.weight", "g_a_proj.weight", "q_a_proj.weight", "kv_a_proj_with_mqa.weight"}) {
    if (ends_with(local, replicated)) return Rule{};
  }
  if (ends_with(local, "o_proj.weight")) return split(Placement::tensor_parallel, 1, ShardUnit::heads, heads, t);
  return split(Placement::tensor_parallel, 0, ShardUnit::heads, heads, t);
}

// gate/up [I, h] by row, down [h, I] by column; whole on every rank under sequence parallelism.
Rule mlp_rule(const Parallelism& par, const TensorSpec& t, std::string_view local, int64_t intermediate) {
  if (par.sequence_parallel && par.tp > 1) return Rule{};
  const int dim = ends_with(local, "down_proj.weight") ? 1 : 0;
  return split(Placement::tensor_parallel, dim, ShardUnit::intermediate, intermediate, t);
}

Rule rule_for(const ModelConfig& m, const Parallelism& par, const TensorSpec& t) {
  const std::string_view local = local_name(t);
  switch (t.role) {
    case TensorRole::embedding:
    case TensorRole::lm_head: return split(Placement::tensor_parallel, 0, ShardUnit::vocab_rows, m.vocab_size, t);
    case TensorRole::norm:
    case TensorRole::attnres_query:
    case TensorRole::router:
    case TensorRole::router_bias:
    case TensorRole::latent: return Rule{};
    case TensorRole::attention: return attention_rule(m, t, local);
    case TensorRole::conv:
    case TensorRole::dt_bias: return split(Placement::tensor_parallel, 0, ShardUnit::heads, m.kda->num_heads, t);
    case TensorRole::a_log: {
      // K3 stores [128] (96 heads, then zero pads that no rank keeps); Kimi Linear [1, 1, H, 1].
      const int dim = t.shape.size() == 1 ? 0 : 2;
      return Rule{Placement::tensor_parallel, dim, ShardUnit::heads, m.kda->num_heads, m.kda->num_heads};
    }
    case TensorRole::dense_mlp: return mlp_rule(par, t, local, m.dense_intermediate);
    case TensorRole::shared_expert: return mlp_rule(par, t, local, m.moe->shared_intermediate);
    case TensorRole::expert:
    case TensorRole::expert_packed:
    case TensorRole::expert_scale: {
      const int dim = local.find(".w2.") != std::string_view::npos ? 1 : 0;
      return split(Placement::expert_parallel, dim, ShardUnit::intermediate, m.moe->expert_intermediate, t);
    }
  }
  K3_CHECK(false, "tensor {} has no sharding rule", t.name);
  return Rule{};
}

void validate(const ModelConfig& m, const Parallelism& par) {
  auto fail = [&](const std::string& what) { throw InputError(fmt::format("{}: {}", m.source_file, what)); };
  auto need = [&](const char* key, int by, int64_t size, const char* what) {
    if (size % by != 0) fail(fmt::format("parallelism.{} {} does not divide the {} {}", key, by, size, what));
  };
  const Parallelism& p = par;
  if (m.count_layers(AttentionKind::kda) > 0) need("tp", p.tp, m.kda->num_heads, "KDA heads");
  if (m.count_layers(AttentionKind::mla) > 0) need("tp", p.tp, m.mla.num_heads, "MLA heads");
  need("tp", p.tp, m.vocab_size, "vocabulary rows");
  const bool split_mlp = !(p.sequence_parallel && p.tp > 1);
  if (split_mlp && m.count_layers(MlpKind::dense) > 0) need("tp", p.tp, m.dense_intermediate, "dense MLP columns");
  if (!m.moe) {
    if (p.ep != 1) fail(fmt::format("parallelism.ep {} needs a model with routed experts", p.ep));
    return;
  }
  const MoeSpec& e = *m.moe;
  if (p.attention_dp > 1 && p.ep == 1) {
    fail(
        fmt::format("parallelism.attention_dp {} needs ep > 1: the attention groups reach the experts only through "
                    "the expert-parallel all-to-all",
                    p.attention_dp));
  }
  if (split_mlp && e.shared_intermediate > 0) need("tp", p.tp, e.shared_intermediate, "shared expert columns");
  need("ep", p.ep, e.num_experts, "routed experts");
  if (e.expert_intermediate % p.moe_tp() != 0) {
    fail(
        fmt::format("experts split over moe_tp = tp x attention_dp / ep = {} GPUs, which does not divide their "
                    "intermediate size {}",
                    p.moe_tp(), e.expert_intermediate));
  }
  if (m.routed_expert_format == StorageFormat::mxfp4 && (e.expert_intermediate / 32) % p.moe_tp() != 0) {
    fail(fmt::format("moe_tp {} does not divide the {} MXFP4 scale blocks of an expert's intermediate dimension",
                     p.moe_tp(), e.expert_intermediate / 32));
  }
}

bool on_stage(const ModelConfig& m, const TensorSpec& t, const RankLayout& r) {
  if (t.layer >= 0) return r.holds_layer(t.layer);
  if (t.role == TensorRole::embedding) return r.first_stage() || (m.tie_word_embeddings && r.last_stage());
  return r.last_stage();  // final norms, the output mixer, lm_head
}

int64_t stored_bytes(const TensorSpec& t) {
  const auto bytes = weights::tensor_size_bytes(t.dtype, t.shape);
  K3_CHECK(bytes.has_value(), "tensor {} has no byte size", t.name);
  return *bytes;
}

}  // namespace

RankShards shard_checkpoint(const ModelConfig& m, const weights::CheckpointLayout& layout, const RankLayout& r) {
  const Parallelism& par = r.parallelism;
  validate(m, par);
  RankShards out;
  out.layout = r;
  if (m.kda) {
    out.kda_heads = m.kda->num_heads / par.tp;
    out.kda_first_head = r.tp_rank * out.kda_heads;
  }
  out.mla_heads = m.mla.num_heads / par.tp;
  out.mla_first_head = r.tp_rank * out.mla_heads;
  const int64_t experts_per_rank = m.moe ? m.moe->num_experts / par.ep : 0;
  if (m.moe) {
    out.experts = experts_per_rank;
    out.first_expert = r.ep_rank * experts_per_rank;
  }

  for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
    const TensorSpec& t = layout.tensors[i];
    if (!on_stage(m, t, r)) continue;
    const Rule rule = rule_for(m, par, t);
    int parts = 1, part = 0;
    TensorShard s;
    s.tensor = i;
    s.role = t.role;
    s.placement = rule.placement;
    switch (rule.placement) {
      case Placement::replicated: s.replica = r.stage_rank; break;
      case Placement::tensor_parallel:
        parts = par.tp, part = r.tp_rank;
        s.replica = r.attention_dp_rank;
        break;
      case Placement::expert_parallel:
        if (expert_index(local_name(t)) / experts_per_rank != r.ep_rank) continue;  // another ep rank's expert
        parts = par.moe_tp(), part = r.moe_tp_rank;
        break;
    }
    const int64_t whole = stored_bytes(t);
    if (rule.dim < 0 || parts == 1) {
      s.dim = rule.dim;
      s.extent = rule.dim < 0 ? 0 : rule.extent;
      s.length = s.extent;
      s.unit = rule.unit;
      s.unit_count = rule.units;
      s.bytes = rule.dim < 0 ? whole : whole / t.shape[static_cast<std::size_t>(rule.dim)] * rule.extent;
      out.shards.push_back(s);
      continue;
    }
    K3_CHECK(rule.extent % parts == 0 && rule.units % parts == 0, "{}: {} indices ({} {}) do not split {} ways", t.name,
             rule.extent, rule.units, to_string(rule.unit), parts);
    s.dim = rule.dim;
    s.extent = rule.extent;
    s.length = rule.extent / parts;
    s.offset = s.length * part;
    s.unit = rule.unit;
    s.unit_count = rule.units / parts;
    s.unit_first = s.unit_count * part;
    s.bytes = whole / t.shape[static_cast<std::size_t>(rule.dim)] * s.length;
    out.shards.push_back(s);
  }
  return out;
}

RankState rank_state(const ModelConfig& m, const Precision& precision, const RankLayout& r) {
  RankState st;
  int kda_layers = 0, mla_layers = 0;
  for (int l = r.first_layer; l < r.last_layer; ++l) {
    (m.layer_attention[static_cast<std::size_t>(l)] == AttentionKind::kda ? kda_layers : mla_layers) += 1;
  }
  if (m.kda) {
    const double heads = double(m.kda->num_heads) / r.parallelism.tp, d = m.kda->head_dim;
    st.kda_state_bytes_per_sequence = kda_layers * heads * d * d * bytes_per_element(precision.kda_state);
    st.kda_conv_bytes_per_sequence =
        kda_layers * 3.0 * heads * d * (m.kda->conv_kernel - 1) * bytes_per_element(precision.kda_conv_state);
  }
  st.mla_cache_bytes_per_token = mla_layers * (m.mla.cache_values_per_token() * precision.kv_bytes_per_value() +
                                               precision.kv_scale_bytes_per_token());
  return st;
}

}  // namespace k3::parallel
