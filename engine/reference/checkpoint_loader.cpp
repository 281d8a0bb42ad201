#include "engine/reference/checkpoint_loader.h"

#include "core/error.h"
#include "engine/weights/mx_format.h"
#include "engine/weights/tensor_layout.h"

#include <filesystem>

namespace k3::ref {

namespace {

using weights::Checkpoint;

class TensorReader {
 public:
  TensorReader(const Checkpoint& ckpt) : ckpt_(ckpt) {}

  Matrix matrix(const std::string& name, int64_t rows, int64_t cols) const {
    const std::vector<float> v = ckpt_.to_float(name);
    K3_CHECK(static_cast<int64_t>(v.size()) == rows * cols, "{}: {} values, expected {}x{}", name, v.size(), rows,
             cols);
    return Eigen::Map<const Matrix>(v.data(), rows, cols);
  }
  Vector vector(const std::string& name, int64_t n) const {
    const std::vector<float> v = ckpt_.to_float(name);
    K3_CHECK(static_cast<int64_t>(v.size()) >= n, "{}: {} values, expected at least {}", name, v.size(), n);
    return Eigen::Map<const Vector>(v.data(), n);  // A_log keeps its first n (the heads) of the padded values
  }
  // A routed expert matrix [out, in]: MXFP4 (weight_packed + weight_scale) or a float weight.
  Matrix expert(const std::string& base, int64_t out, int64_t in, StorageFormat format) const {
    if (format != StorageFormat::mxfp4) return matrix(base + ".weight", out, in);
    const auto packed = ckpt_.bytes(base + ".weight_packed");
    const auto scales = ckpt_.bytes(base + ".weight_scale");
    K3_CHECK(
        static_cast<int64_t>(packed.size()) == out * in / 2 && static_cast<int64_t>(scales.size()) == out * in / 32,
        "{}: MXFP4 sizes do not match [{}, {}]", base, out, in);
    Matrix m(out, in);
    weights::mxfp4_dequantize(packed.data(), scales.data(), out * in, m.data());
    return m;
  }

 private:
  const Checkpoint& ckpt_;
};

KdaWeights load_kda(const ModelConfig& m, const TensorReader& r, const std::string& a) {
  const KdaSpec& k = *m.kda;
  const int64_t h = m.hidden_size, P = k.projection_dim(), H = k.num_heads, rk = k.gate_rank;
  KdaWeights w;
  w.q_proj = r.matrix(a + "q_proj.weight", P, h);
  w.k_proj = r.matrix(a + "k_proj.weight", P, h);
  w.v_proj = r.matrix(a + "v_proj.weight", P, h);
  w.q_conv = r.matrix(a + "q_conv1d.weight", P, k.conv_kernel);
  w.k_conv = r.matrix(a + "k_conv1d.weight", P, k.conv_kernel);
  w.v_conv = r.matrix(a + "v_conv1d.weight", P, k.conv_kernel);
  w.f_a = r.matrix(a + "f_a_proj.weight", rk, h);
  w.f_b = r.matrix(a + "f_b_proj.weight", P, rk);
  w.b_proj = r.matrix(a + "b_proj.weight", H, h);
  if (k.full_rank_output_gate) {
    w.g_proj = r.matrix(a + "g_proj.weight", P, h);
  } else {
    w.g_a = r.matrix(a + "g_a_proj.weight", rk, h);
    w.g_b = r.matrix(a + "g_b_proj.weight", P, rk);
  }
  w.a_log = r.vector(a + "A_log", H);
  w.dt_bias = r.vector(a + "dt_bias", P);
  w.o_norm = r.vector(a + "o_norm.weight", k.head_dim);
  w.o_proj = r.matrix(a + "o_proj.weight", h, P);
  return w;
}

MlaWeights load_mla(const ModelConfig& m, const TensorReader& r, const std::string& a) {
  const MlaSpec& s = m.mla;
  const int64_t h = m.hidden_size, H = s.num_heads;
  MlaWeights w;
  if (s.q_lora_rank > 0) {
    w.q_a = r.matrix(a + "q_a_proj.weight", s.q_lora_rank, h);
    w.q_a_norm = r.vector(a + "q_a_layernorm.weight", s.q_lora_rank);
    w.q_b = r.matrix(a + "q_b_proj.weight", H * s.qk_head_dim(), s.q_lora_rank);
  } else {
    w.q_proj = r.matrix(a + "q_proj.weight", H * s.qk_head_dim(), h);
  }
  w.kv_a = r.matrix(a + "kv_a_proj_with_mqa.weight", s.cache_values_per_token(), h);
  w.kv_a_norm = r.vector(a + "kv_a_layernorm.weight", s.kv_lora_rank);
  w.kv_b = r.matrix(a + "kv_b_proj.weight", H * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank);
  if (s.output_gate) w.g_proj = r.matrix(a + "g_proj.weight", H * s.v_head_dim, h);
  w.o_proj = r.matrix(a + "o_proj.weight", h, H * s.v_head_dim);
  return w;
}

MoeWeights load_moe(const ModelConfig& m, const TensorReader& r, const std::string& q) {
  const MoeSpec& e = *m.moe;
  const int64_t h = m.hidden_size, z = e.expert_input_dim(m.hidden_size), I = e.expert_intermediate;
  MoeWeights w;
  w.router = r.matrix(q + "gate.weight", e.num_experts, h);
  if (e.score_correction_bias) w.correction_bias = r.vector(q + "gate.e_score_correction_bias", e.num_experts);
  for (int x = 0; x < e.num_experts; ++x) {
    const std::string ex = fmt::format("{}experts.{}.", q, x);
    w.w1.push_back(r.expert(ex + "w1", I, z, m.routed_expert_format));
    w.w2.push_back(r.expert(ex + "w2", z, I, m.routed_expert_format));
    w.w3.push_back(r.expert(ex + "w3", I, z, m.routed_expert_format));
  }
  if (e.latent_dim > 0) {
    w.latent_down = r.matrix(q + "routed_expert_down_proj.weight", z, h);
    w.latent_up = r.matrix(q + "routed_expert_up_proj.weight", h, z);
    if (e.latent_norm) w.latent_norm = r.vector(q + "routed_expert_norm.weight", z);
  }
  if (e.shared_intermediate > 0) {
    const int64_t S = e.shared_intermediate;
    w.shared_gate = r.matrix(q + "shared_experts.gate_proj.weight", S, h);
    w.shared_up = r.matrix(q + "shared_experts.up_proj.weight", S, h);
    w.shared_down = r.matrix(q + "shared_experts.down_proj.weight", h, S);
  }
  return w;
}

AttnResMixer load_mixer(const TensorReader& r, const std::string& base, int64_t h) {
  return AttnResMixer{r.vector(base + "_proj.weight", h), r.vector(base + "_norm.weight", h)};
}

}  // namespace

ModelWeights load_model_weights(const ModelConfig& m, const Checkpoint& ckpt) {
  const weights::CheckpointLayout layout = weights::checkpoint_layout(m);
  const weights::LayoutProblems problems = weights::check_layout(layout, ckpt);
  if (!problems.ok()) {
    throw InputError(fmt::format("{}: the checkpoint does not match {} ({} missing, {} unexpected, {} misshaped):\n{}",
                                 ckpt.source(), m.source_file, problems.missing.size(), problems.unexpected.size(),
                                 problems.misshaped.size(), problems.describe()));
  }
  const TensorReader r(ckpt);
  const int64_t h = m.hidden_size, V = m.vocab_size;
  const bool attnres = m.residual == ResidualKind::block_attnres;
  const std::string& p = layout.prefix;
  ModelWeights w;
  w.embed = r.matrix(p + "embed_tokens.weight", V, h);
  w.lm_head = m.tie_word_embeddings
                  ? w.embed
                  : r.matrix((attnres ? "language_model." : "") + std::string("lm_head.weight"), V, h);
  w.final_norm = r.vector(p + "norm.weight", h);
  if (attnres) w.final_res = load_mixer(r, p + "output_attn_res", h);
  for (int l = 0; l < m.num_layers; ++l) {
    const std::string lp = fmt::format("{}layers.{}.", p, l);
    LayerWeights lw;
    lw.input_norm = r.vector(lp + "input_layernorm.weight", h);
    lw.post_norm = r.vector(lp + "post_attention_layernorm.weight", h);
    if (attnres) {
      lw.attn_res = load_mixer(r, lp + "self_attention_res", h);
      lw.mlp_res = load_mixer(r, lp + "mlp_res", h);
    }
    if (m.layer_attention[l] == AttentionKind::kda) {
      lw.kda = load_kda(m, r, lp + "self_attn.");
    } else {
      lw.mla = load_mla(m, r, lp + "self_attn.");
    }
    if (m.layer_mlp[l] == MlpKind::dense) {
      lw.dense = DenseMlpWeights{r.matrix(lp + "mlp.gate_proj.weight", m.dense_intermediate, h),
                                 r.matrix(lp + "mlp.up_proj.weight", m.dense_intermediate, h),
                                 r.matrix(lp + "mlp.down_proj.weight", h, m.dense_intermediate)};
    } else {
      lw.moe = load_moe(m, r, lp + "block_sparse_moe.");
    }
    w.layers.push_back(std::move(lw));
  }
  return w;
}

LoadedModel load_reference_model(const std::string& checkpoint_dir) {
  const std::string config_path = (std::filesystem::path(checkpoint_dir) / "config.json").string();
  ModelConfig config = load_model_config(config_path);
  const weights::Checkpoint ckpt = weights::Checkpoint::open(checkpoint_dir);
  ModelWeights w = load_model_weights(config, ckpt);
  return LoadedModel{config, ReferenceModel(config, std::move(w))};
}

}  // namespace k3::ref
