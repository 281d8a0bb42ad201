#include "engine/weights/tensor_layout.h"

#include "core/parameters.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace k3::weights {

std::string to_string(TensorRole role) {
  switch (role) {
    case TensorRole::embedding: return "embedding";
    case TensorRole::lm_head: return "lm_head";
    case TensorRole::norm: return "norm";
    case TensorRole::attnres_query: return "attnres_query";
    case TensorRole::attention: return "attention";
    case TensorRole::conv: return "conv";
    case TensorRole::a_log: return "a_log";
    case TensorRole::dt_bias: return "dt_bias";
    case TensorRole::dense_mlp: return "dense_mlp";
    case TensorRole::router: return "router";
    case TensorRole::router_bias: return "router_bias";
    case TensorRole::shared_expert: return "shared_expert";
    case TensorRole::latent: return "latent";
    case TensorRole::expert: return "expert";
    case TensorRole::expert_packed: return "expert_packed";
    case TensorRole::expert_scale: return "expert_scale";
  }
  return "?";
}

int64_t TensorSpec::parameters() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (role == TensorRole::expert_scale) return 0;
  if (role == TensorRole::expert_packed) return 2 * n;
  return n;
}

const TensorSpec* CheckpointLayout::find(const std::string& name) const {
  for (const TensorSpec& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int64_t CheckpointLayout::parameters() const {
  int64_t n = 0;
  for (const TensorSpec& t : tensors) n += t.parameters();
  return n;
}

namespace {

class LayoutBuilder {
 public:
  explicit LayoutBuilder(CheckpointLayout* out) : out_(out) {}

  void add(const std::string& name, TensorDtype dtype, std::vector<int64_t> shape, TensorRole role, int layer) {
    TensorSpec t{name, dtype, std::move(shape), role, 0, layer};
    if (t.shape.size() >= 2) t.fan_in = t.shape.back();
    out_->tensors.push_back(std::move(t));
  }
  // A [out, in] linear weight in bf16.
  void linear(const std::string& name, int64_t out, int64_t in, TensorRole role, int layer) {
    add(name, TensorDtype::bf16, {out, in}, role, layer);
  }
  // A routed expert matrix [out, in]: MXFP4 as two U8 tensors, or one float tensor.
  void expert(const std::string& base, int64_t out, int64_t in, StorageFormat format, int layer) {
    if (format == StorageFormat::mxfp4) {
      add(base + ".weight_packed", TensorDtype::u8, {out, in / 2}, TensorRole::expert_packed, layer);
      out_->tensors.back().fan_in = in;
      add(base + ".weight_scale", TensorDtype::u8, {out, in / 32}, TensorRole::expert_scale, layer);
      out_->tensors.back().fan_in = in;
    } else {
      linear(base + ".weight", out, in, TensorRole::expert, layer);
    }
  }

 private:
  CheckpointLayout* out_;
};

}  // namespace

CheckpointLayout checkpoint_layout(const ModelConfig& m) {
  CheckpointLayout layout;
  const bool k3 = m.residual == ResidualKind::block_attnres;  // the nested K3 layout
  layout.prefix = k3 ? "language_model.model." : "model.";
  const std::string head_prefix = k3 ? "language_model." : "";
  LayoutBuilder b(&layout);
  const int64_t h = m.hidden_size, V = m.vocab_size;
  const TensorDtype f32 = TensorDtype::f32;

  b.linear(layout.prefix + "embed_tokens.weight", V, h, TensorRole::embedding, -1);
  for (int l = 0; l < m.num_layers; ++l) {
    const std::string p = fmt::format("{}layers.{}.", layout.prefix, l);
    b.add(p + "input_layernorm.weight", TensorDtype::bf16, {h}, TensorRole::norm, l);
    b.add(p + "post_attention_layernorm.weight", TensorDtype::bf16, {h}, TensorRole::norm, l);
    if (k3) {
      b.add(p + "self_attention_res_norm.weight", TensorDtype::bf16, {h}, TensorRole::norm, l);
      b.add(p + "self_attention_res_proj.weight", TensorDtype::bf16, {1, h}, TensorRole::attnres_query, l);
      b.add(p + "mlp_res_norm.weight", TensorDtype::bf16, {h}, TensorRole::norm, l);
      b.add(p + "mlp_res_proj.weight", TensorDtype::bf16, {1, h}, TensorRole::attnres_query, l);
    }
    const std::string a = p + "self_attn.";
    if (m.layer_attention[l] == AttentionKind::kda) {
      const KdaSpec& k = *m.kda;
      const int64_t P = k.projection_dim(), H = k.num_heads, r = k.gate_rank, d = k.head_dim;
      for (const char* x : {"q", "k", "v"}) b.linear(a + x + "_proj.weight", P, h, TensorRole::attention, l);
      for (const char* x : {"q", "k", "v"}) {
        b.add(a + x + "_conv1d.weight", f32, {P, 1, k.conv_kernel}, TensorRole::conv, l);
        layout.tensors.back().fan_in = k.conv_kernel;
      }
      b.linear(a + "f_a_proj.weight", r, h, TensorRole::attention, l);
      b.linear(a + "f_b_proj.weight", P, r, TensorRole::attention, l);
      b.linear(a + "b_proj.weight", H, h, TensorRole::attention, l);
      if (k.full_rank_output_gate) {
        b.linear(a + "g_proj.weight", P, h, TensorRole::attention, l);
      } else {
        b.linear(a + "g_a_proj.weight", r, h, TensorRole::attention, l);
        b.linear(a + "g_b_proj.weight", P, r, TensorRole::attention, l);
      }
      if (k3) {
        b.add(a + "A_log", f32, {k.a_log_stored_values}, TensorRole::a_log, l);
      } else {
        b.add(a + "A_log", f32, {1, 1, H, 1}, TensorRole::a_log, l);
      }
      b.add(a + "dt_bias", f32, {P}, TensorRole::dt_bias, l);
      b.add(a + "o_norm.weight", f32, {d}, TensorRole::norm, l);
      b.linear(a + "o_proj.weight", h, P, TensorRole::attention, l);
    } else {
      const MlaSpec& s = m.mla;
      const int64_t H = s.num_heads;
      if (s.q_lora_rank > 0) {
        b.linear(a + "q_a_proj.weight", s.q_lora_rank, h, TensorRole::attention, l);
        b.add(a + "q_a_layernorm.weight", TensorDtype::bf16, {s.q_lora_rank}, TensorRole::norm, l);
        b.linear(a + "q_b_proj.weight", H * s.qk_head_dim(), s.q_lora_rank, TensorRole::attention, l);
      } else {
        b.linear(a + "q_proj.weight", H * s.qk_head_dim(), h, TensorRole::attention, l);
      }
      b.linear(a + "kv_a_proj_with_mqa.weight", s.cache_values_per_token(), h, TensorRole::attention, l);
      b.add(a + "kv_a_layernorm.weight", TensorDtype::bf16, {s.kv_lora_rank}, TensorRole::norm, l);
      b.linear(a + "kv_b_proj.weight", H * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank, TensorRole::attention,
               l);
      if (s.output_gate) b.linear(a + "g_proj.weight", H * s.v_head_dim, h, TensorRole::attention, l);
      b.linear(a + "o_proj.weight", h, H * s.v_head_dim, TensorRole::attention, l);
    }
    if (m.layer_mlp[l] == MlpKind::dense) {
      const int64_t I = m.dense_intermediate;
      b.linear(p + "mlp.gate_proj.weight", I, h, TensorRole::dense_mlp, l);
      b.linear(p + "mlp.up_proj.weight", I, h, TensorRole::dense_mlp, l);
      b.linear(p + "mlp.down_proj.weight", h, I, TensorRole::dense_mlp, l);
      continue;
    }
    const MoeSpec& e = *m.moe;
    const std::string q = p + "block_sparse_moe.";
    const int64_t z = e.expert_input_dim(m.hidden_size), I = e.expert_intermediate, E = e.num_experts;
    b.linear(q + "gate.weight", E, h, TensorRole::router, l);
    if (e.score_correction_bias) b.add(q + "gate.e_score_correction_bias", f32, {E}, TensorRole::router_bias, l);
    for (int64_t x = 0; x < E; ++x) {
      const std::string ex = fmt::format("{}experts.{}.", q, x);
      b.expert(ex + "w1", I, z, m.routed_expert_format, l);
      b.expert(ex + "w2", z, I, m.routed_expert_format, l);
      b.expert(ex + "w3", I, z, m.routed_expert_format, l);
    }
    if (e.latent_dim > 0) {
      b.linear(q + "routed_expert_down_proj.weight", z, h, TensorRole::latent, l);
      b.linear(q + "routed_expert_up_proj.weight", h, z, TensorRole::latent, l);
      if (e.latent_norm) b.add(q + "routed_expert_norm.weight", TensorDtype::bf16, {z}, TensorRole::norm, l);
    }
    if (e.shared_intermediate > 0) {
      const int64_t S = e.shared_intermediate;
      b.linear(q + "shared_experts.gate_proj.weight", S, h, TensorRole::shared_expert, l);
      b.linear(q + "shared_experts.up_proj.weight", S, h, TensorRole::shared_expert, l);
      b.linear(q + "shared_experts.down_proj.weight", h, S, TensorRole::shared_expert, l);
    }
  }
  b.add(layout.prefix + "norm.weight", TensorDtype::bf16, {h}, TensorRole::norm, -1);
  if (k3) {
    b.add(layout.prefix + "output_attn_res_norm.weight", TensorDtype::bf16, {h}, TensorRole::norm, -1);
    b.add(layout.prefix + "output_attn_res_proj.weight", TensorDtype::bf16, {1, h}, TensorRole::attnres_query, -1);
  }
  if (!m.tie_word_embeddings) b.linear(head_prefix + "lm_head.weight", V, h, TensorRole::lm_head, -1);
  return layout;
}

namespace {
bool is_float(TensorDtype d) { return d == TensorDtype::bf16 || d == TensorDtype::f16 || d == TensorDtype::f32; }

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }
}  // namespace

std::string LayoutProblems::describe() const {
  std::string out;
  for (const auto& n : missing) out += fmt::format("missing tensor {}\n", n);
  for (const auto& n : unexpected) out += fmt::format("unexpected tensor {}\n", n);
  for (const auto& n : misshaped) out += fmt::format("misshaped tensor {}\n", n);
  return out;
}

LayoutProblems check_layout(const CheckpointLayout& layout, const Checkpoint& checkpoint) {
  LayoutProblems p;
  std::set<std::string> expected;
  for (const TensorSpec& t : layout.tensors) {
    expected.insert(t.name);
    const TensorInfo* have = checkpoint.find(t.name);
    if (!have) {
      p.missing.push_back(t.name);
      continue;
    }
    const bool dtype_ok = have->dtype == t.dtype || (is_float(have->dtype) && is_float(t.dtype));
    if (have->shape != t.shape || !dtype_ok) {
      p.misshaped.push_back(fmt::format("{}: {} {}, expected {} {}", t.name, shape_text(have->shape),
                                        to_string(have->dtype), shape_text(t.shape), to_string(t.dtype)));
    }
  }
  for (const TensorInfo& have : checkpoint.tensors()) {
    if (!expected.count(have.name)) p.unexpected.push_back(have.name);
  }
  return p;
}

}  // namespace k3::weights
