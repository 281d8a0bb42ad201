#include "engine/runtime/device_weights.h"

#include "core/error.h"
#include "engine/runtime/cuda_check.h"
#include "engine/weights/synthetic_checkpoint.h"
#include "engine/weights/tensor_decode.h"
#include "kernels/mxfp4_tiled.h"
#include "kernels/random_fill.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_map>

namespace k3::runtime {

using weights::TensorDtype;
using weights::TensorRole;
using weights::TensorSpec;

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

const char* kScaleSuffix = ".weight_scale";
const char* kPackedSuffix = ".weight_packed";

std::string scale_name_of(const std::string& packed_name) {
  return packed_name.substr(0, packed_name.size() - std::strlen(kPackedSuffix)) + kScaleSuffix;
}

}  // namespace

void DeviceWeights::check_supported(const ModelConfig& c) {
  const std::string what = fmt::format("{} ({})", c.name, c.source_file);
  if (!c.kda)
    throw InputError(
        fmt::format("{}: the GPU runtime runs the KDA/MLA hybrid family; this model has no KDA layers", what));
  if (c.moe) {
    const bool latent_mxfp4 = c.moe->latent_dim > 0 && c.routed_expert_format == StorageFormat::mxfp4;
    const bool hidden_bf16 = c.moe->latent_dim <= 0 && c.routed_expert_format == StorageFormat::bf16;
    if (!latent_mxfp4 && !hidden_bf16) {
      throw InputError(
          fmt::format("{}: the GPU runtime runs latent MoE layers with MXFP4 routed experts (K3) or MoE "
                      "layers at hidden width with bf16 experts (Kimi Linear); this model's experts are {} "
                      "{} a latent projection",
                      what, to_string(c.routed_expert_format), c.moe->latent_dim > 0 ? "with" : "without"));
    }
  }
  if (c.mla.rotary)
    throw InputError(fmt::format("{}: the GPU runtime runs NoPE MLA; this model rotates its rope dims", what));
  // The attention kernels are specialised to the family's per-head widths (kernels/kda_chunk_prefill.h,
  // mla_decode_paged.h, mla_prefill.h).
  const KdaSpec& k = *c.kda;
  if (k.head_dim != 128) {
    throw InputError(
        fmt::format("{}: the GPU runtime's KDA kernels need head_dim 128; this model has {}", what, k.head_dim));
  }
  const MlaSpec& m = c.mla;
  if (c.count_layers(AttentionKind::mla) > 0 &&
      (m.kv_lora_rank != 512 || m.qk_rope_head_dim != 64 || m.qk_nope_head_dim != 128 || m.v_head_dim != 128)) {
    throw InputError(
        fmt::format("{}: the GPU runtime's MLA kernels need kv_lora_rank 512, qk_rope_head_dim 64, "
                    "qk_nope_head_dim 128 and v_head_dim 128; this model has {}, {}, {} and {}",
                    what, m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim));
  }
}

uint64_t DeviceWeights::device_bytes(const ModelConfig& config) {
  return device_bytes(config, parallel::rank_shape(config, parallel::rank_layout(Parallelism{}, 0, config.num_layers)));
}

uint64_t DeviceWeights::device_bytes(const ModelConfig& model, const parallel::RankShape& rank) {
  check_supported(model);
  DeviceWeights measuring_only(model, rank, /*allocate=*/false);
  return measuring_only.bytes();
}

DeviceWeights::DeviceWeights(const ModelConfig& model, const parallel::RankShape& rank, bool allocate)
    : config_(rank.local),
      rank_(rank),
      layout_(weights::checkpoint_layout(model)),
      shards_(parallel::shard_checkpoint(model, layout_, rank.layout)),
      arena_(DeviceArena::measuring()) {
  check_supported(model);
  shard_of_.assign(layout_.tensors.size(), nullptr);
  for (const parallel::TensorShard& shard : shards_.shards) shard_of_[shard.tensor] = &shard;
  DeviceArena measure = DeviceArena::measuring();
  lay_out(measure);
  if (!allocate) {
    arena_ = std::move(measure);
    return;
  }
  const std::string who = rank.single_gpu() ? "" : fmt::format(" (rank {})", rank.layout.rank);
  arena_ = DeviceArena(measure.used_bytes(), fmt::format("the weights of {}{}", config_.name, who));
  slots_.clear();
  lay_out(arena_);
}

DeviceWeights::DeviceWeights(const ModelConfig& config)
    : DeviceWeights(config, parallel::rank_shape(config, parallel::rank_layout(Parallelism{}, 0, config.num_layers)),
                    true) {}

DeviceWeights::DeviceWeights(const ModelConfig& model, const parallel::RankShape& rank)
    : DeviceWeights(model, rank, true) {}

void DeviceWeights::lay_out(DeviceArena& arena) {
  const ModelConfig& c = config_;
  const int64_t h = c.hidden_size;
  // One lookup per tensor: a whole K3 has half a million (its experts').
  std::unordered_map<std::string_view, std::size_t> index_of;
  index_of.reserve(layout_.tensors.size());
  for (std::size_t i = 0; i < layout_.tensors.size(); ++i) index_of.emplace(layout_.tensors[i].name, i);
  auto place = [&](const std::string& name, void* ptr, TensorDtype dtype, int64_t elements) {
    const auto found = index_of.find(name);
    K3_CHECK(found != index_of.end(), "the checkpoint layout of {} has no tensor {}", config_.name, name);
    const TensorSpec& spec = layout_.tensors[found->second];
    const parallel::TensorShard* shard = shard_of_[found->second];
    K3_CHECK(shard != nullptr, "{}: rank {} holds no piece of {}", config_.name, rank_.layout.rank, name);
    kernels::RandomWindow window{elements, elements, 0};
    if (shard->dim >= 0) {
      int64_t inner = 1;
      for (std::size_t d = std::size_t(shard->dim) + 1; d < spec.shape.size(); ++d) inner *= spec.shape[d];
      window = {shard->length * inner, spec.shape[std::size_t(shard->dim)] * inner, shard->offset * inner};
    }
    int64_t stored = 1;
    for (int64_t d : spec.shape) stored *= d;
    const bool packed = dtype == TensorDtype::u8;  // MXFP4 bytes: whole experts only (moe_tp 1)
    K3_CHECK(
        packed ? shard->length == shard->extent || shard->dim < 0 : stored / window.stride * window.block == elements,
        "{}: the device holds {} elements of the rank's piece (dim {}, {} of {})", name, elements, shard->dim,
        shard->length, shard->extent);
    slots_.push_back({&spec, ptr, dtype, elements, window});
  };
  auto bf = [&](const std::string& name, int64_t n) {
    bf16* p = arena.take_n<bf16>(n);
    place(name, p, TensorDtype::bf16, n);
    return p;
  };
  auto f32 = [&](const std::string& name, int64_t n) {
    float* p = arena.take_n<float>(n);
    place(name, p, TensorDtype::f32, n);
    return p;
  };
  // Matrices stacked row-wise in one buffer: each part `rows[i]` × `cols`.
  auto stacked = [&](const std::vector<std::string>& names, const std::vector<int64_t>& rows, int64_t cols) {
    int64_t total = 0;
    for (int64_t r : rows) total += r;
    bf16* base = arena.take_n<bf16>(total * cols);
    int64_t offset = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      place(names[i], base ? base + offset * cols : nullptr, TensorDtype::bf16, rows[i] * cols);
      offset += rows[i];
    }
    return base;
  };
  auto attnres = [&](const std::string& norm, const std::string& proj) {
    AttnResDeviceWeights w;
    w.key_norm = bf(norm, h);
    w.query = bf(proj, h);
    return w;
  };

  const std::string& p0 = layout_.prefix;
  const int64_t V = rank_.vocab_rows;  // the rank's vocabulary rows
  embed = bf(p0 + "embed_tokens.weight", V * h);
  layers.assign(c.num_layers, {});
  for (int l = 0; l < c.num_layers; ++l) {
    LayerDeviceWeights& L = layers[l];
    const std::string p = fmt::format("{}layers.{}.", p0, l);
    L.input_norm = bf(p + "input_layernorm.weight", h);
    L.post_norm = bf(p + "post_attention_layernorm.weight", h);
    if (c.residual == ResidualKind::block_attnres) {
      L.attn_res = attnres(p + "self_attention_res_norm.weight", p + "self_attention_res_proj.weight");
      L.mlp_res = attnres(p + "mlp_res_norm.weight", p + "mlp_res_proj.weight");
    }
    const std::string a = p + "self_attn.";
    if (c.layer_attention[l] == AttentionKind::kda) {
      const KdaSpec& k = *c.kda;
      const int64_t P = k.projection_dim(), H = k.num_heads, K = k.conv_kernel, r = k.gate_rank;
      KdaDeviceWeights& w = L.kda;
      w.qkv_proj = stacked({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}, {P, P, P}, h);
      if (k.full_rank_output_gate) {
        w.g_proj = bf(a + "g_proj.weight", P * h);
      } else {
        w.g_a = bf(a + "g_a_proj.weight", r * h);
        w.g_b = bf(a + "g_b_proj.weight", P * r);
      }
      w.f_a = bf(a + "f_a_proj.weight", r * h);
      w.f_b = bf(a + "f_b_proj.weight", P * r);
      w.b_proj = bf(a + "b_proj.weight", H * h);
      w.conv = arena.take_n<float>(3 * P * K);
      for (int i = 0; i < 3; ++i) {
        const char* x = i == 0 ? "q" : i == 1 ? "k" : "v";
        place(a + x + "_conv1d.weight", w.conv ? w.conv + i * P * K : nullptr, TensorDtype::f32, P * K);
      }
      w.a_log = f32(a + "A_log", H);  // K3 stores 128 values for 96 heads: the window keeps the heads
      w.dt_bias = f32(a + "dt_bias", P);
      w.o_norm = f32(a + "o_norm.weight", k.head_dim);
      w.o_proj = bf(a + "o_proj.weight", h * P);
    } else {
      const MlaSpec& s = c.mla;
      const int64_t H = s.num_heads, qk = s.qk_head_dim(), r = s.kv_lora_rank;
      MlaDeviceWeights& w = L.mla;
      if (s.q_lora_rank > 0) {
        w.qkv_a = stacked({a + "q_a_proj.weight", a + "kv_a_proj_with_mqa.weight"},
                          {s.q_lora_rank, s.cache_values_per_token()}, h);
        w.q_a_norm = bf(a + "q_a_layernorm.weight", s.q_lora_rank);
        w.q_b = bf(a + "q_b_proj.weight", H * qk * s.q_lora_rank);
      } else {
        w.q_proj = bf(a + "q_proj.weight", H * qk * h);
        w.qkv_a = bf(a + "kv_a_proj_with_mqa.weight", s.cache_values_per_token() * h);
      }
      w.kv_a_norm = bf(a + "kv_a_layernorm.weight", r);
      w.kv_b = bf(a + "kv_b_proj.weight", H * (s.qk_nope_head_dim + s.v_head_dim) * r);
      if (s.output_gate) w.g_proj = bf(a + "g_proj.weight", H * s.v_head_dim * h);
      w.o_proj = bf(a + "o_proj.weight", h * H * s.v_head_dim);
    }
    if (c.layer_mlp[l] == MlpKind::dense) {
      const int64_t I = c.dense_intermediate;
      L.dense.gate_up = stacked({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, {I, I}, h);
      L.dense.down = bf(p + "mlp.down_proj.weight", h * I);
    } else {
      const MoeSpec& e = *c.moe;
      // The router scores all E experts; the rank holds experts [x0, x0 + E_held).
      const int64_t E = e.num_experts, I = e.expert_intermediate, z = e.expert_input_dim(c.hidden_size);
      const int64_t S = e.shared_intermediate, x0 = rank_.first_expert, E_held = rank_.experts;
      MoeDeviceWeights& w = L.moe;
      const std::string q = p + "block_sparse_moe.";
      w.router = bf(q + "gate.weight", E * h);
      if (e.score_correction_bias) w.correction_bias = f32(q + "gate.e_score_correction_bias", E);
      if (c.routed_expert_format == StorageFormat::mxfp4) {
        // w1 | w3 of each expert as one [2I, z] matrix; w2 [z, I]; packed bytes and block scales alike.
        w.w13_packed = arena.take_n<uint8_t>(E_held * 2 * I * z / 2);
        w.w13_scales = arena.take_n<uint8_t>(E_held * 2 * I * z / 32);
        w.w2_packed = arena.take_n<uint8_t>(E_held * z * I / 2);
        w.w2_scales = arena.take_n<uint8_t>(E_held * z * I / 32);
        auto at = [](uint8_t* base, int64_t offset) { return base ? base + offset : nullptr; };
        for (int64_t x = 0; x < E_held; ++x) {
          const std::string ex = fmt::format("{}experts.{}.", q, x0 + x);
          for (int part = 0; part < 2; ++part) {
            const std::string name = ex + (part == 0 ? "w1" : "w3");
            place(name + kPackedSuffix, at(w.w13_packed, (x * 2 + part) * I * z / 2), TensorDtype::u8, I * z / 2);
            place(name + kScaleSuffix, at(w.w13_scales, (x * 2 + part) * I * z / 32), TensorDtype::u8, I * z / 32);
          }
          place(ex + "w2" + kPackedSuffix, at(w.w2_packed, x * z * I / 2), TensorDtype::u8, z * I / 2);
          place(ex + "w2" + kScaleSuffix, at(w.w2_scales, x * z * I / 32), TensorDtype::u8, z * I / 32);
        }
      } else {
        // bf16 experts at hidden width: w1 | w3 of each expert as one [2I, z] matrix, w2 [z, I].
        w.w13 = arena.take_n<bf16>(E_held * 2 * I * z);
        w.w2 = arena.take_n<bf16>(E_held * z * I);
        auto at = [](bf16* base, int64_t offset) { return base ? base + offset : nullptr; };
        for (int64_t x = 0; x < E_held; ++x) {
          const std::string ex = fmt::format("{}experts.{}.", q, x0 + x);
          place(ex + "w1.weight", at(w.w13, (x * 2 + 0) * I * z), TensorDtype::bf16, I * z);
          place(ex + "w3.weight", at(w.w13, (x * 2 + 1) * I * z), TensorDtype::bf16, I * z);
          place(ex + "w2.weight", at(w.w2, x * z * I), TensorDtype::bf16, z * I);
        }
      }
      if (e.latent_dim > 0) {
        w.latent_down = bf(q + "routed_expert_down_proj.weight", z * h);
        w.latent_up = bf(q + "routed_expert_up_proj.weight", h * z);
        if (e.latent_norm) w.latent_norm = bf(q + "routed_expert_norm.weight", z);
      }
      if (S > 0) {
        w.shared.gate_up =
            stacked({q + "shared_experts.gate_proj.weight", q + "shared_experts.up_proj.weight"}, {S, S}, h);
        w.shared.down = bf(q + "shared_experts.down_proj.weight", h * S);
      }
    }
  }
  final_norm = bf(p0 + "norm.weight", h);
  if (c.residual == ResidualKind::block_attnres) {
    final_res = attnres(p0 + "output_attn_res_norm.weight", p0 + "output_attn_res_proj.weight");
  }
  if (c.tie_word_embeddings) {
    lm_head = embed;
  } else {
    const std::string head_prefix = p0.substr(0, p0.size() - std::strlen("model."));
    lm_head = bf(head_prefix + "lm_head.weight", V * h);
  }
  K3_CHECK(slots_.size() == shards_.shards.size(), "{}: {} of the rank's {} tensors have a place on the GPU", c.name,
           slots_.size(), shards_.shards.size());
}

void DeviceWeights::fill_random(uint64_t seed) {
  const ModelConfig& c = config_;
  std::unordered_map<std::string, const Slot*> by_name;
  for (const Slot& s : slots_) by_name[s.spec->name] = &s;
  for (const Slot& s : slots_) {
    const TensorSpec& t = *s.spec;
    const uint64_t key = seed ^ fnv1a(t.name);
    const float inv_sqrt_fan_in = float(1.0 / std::sqrt(double(t.fan_in > 0 ? t.fan_in : t.shape.back())));
    // A rank's piece of a tensor: the whole tensor's values at its indices (kernels/random_fill.h).
    const bool whole = s.window.base == 0 && s.window.block == s.elements;
    auto normal = [&](float mean, float stddev) {
      if (s.device_dtype == TensorDtype::bf16) {
        auto* out = static_cast<bf16*>(s.ptr);
        CUDA_CHECK(whole ? kernels::fill_normal_bf16(out, s.elements, mean, stddev, key, nullptr)
                         : kernels::fill_normal_bf16_window(out, s.elements, s.window, mean, stddev, key, nullptr));
      } else {
        auto* out = static_cast<float*>(s.ptr);
        CUDA_CHECK(whole ? kernels::fill_normal_f32(out, s.elements, mean, stddev, key, nullptr)
                         : kernels::fill_normal_f32_window(out, s.elements, s.window, mean, stddev, key, nullptr));
      }
    };
    switch (t.role) {
      case TensorRole::expert_scale: break;  // written with its packed tensor
      case TensorRole::expert_packed: {
        const auto scale_slot = by_name.find(scale_name_of(t.name));
        K3_CHECK(scale_slot != by_name.end(), "{} has no scale tensor", t.name);
        const Slot* scales = scale_slot->second;
        CUDA_CHECK(kernels::mxfp4_fill_normal(static_cast<uint8_t*>(s.ptr), static_cast<uint8_t*>(scales->ptr),
                                              t.shape[0], t.fan_in, inv_sqrt_fan_in, key, nullptr));
        break;
      }
      case TensorRole::a_log: {
        std::vector<float> values(s.elements);
        for (int64_t i = 0; i < s.elements; ++i) {
          values[i] = std::log(1.0f + 15.0f * kernels::random_uniform(key, s.window.index(i)));
        }
        CUDA_CHECK(cudaMemcpy(s.ptr, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice));
        break;
      }
      case TensorRole::dt_bias: {
        auto* out = static_cast<float*>(s.ptr);
        CUDA_CHECK(whole ? kernels::fill_uniform_f32(out, s.elements, -1.0f, 1.0f, key, nullptr)
                         : kernels::fill_uniform_f32_window(out, s.elements, s.window, -1.0f, 1.0f, key, nullptr));
        break;
      }
      case TensorRole::embedding: normal(0.0f, 1.0f); break;
      case TensorRole::norm: normal(1.0f, 0.1f); break;
      case TensorRole::attnres_query: normal(0.0f, float(1.0 / std::sqrt(double(c.hidden_size)))); break;
      case TensorRole::router_bias: normal(0.0f, 0.01f); break;
      default: normal(0.0f, inv_sqrt_fan_in); break;
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
}

void DeviceWeights::load(const weights::Checkpoint& checkpoint,
                         const std::function<void(const std::string&)>& progress) {
  const weights::LayoutProblems problems = weights::check_layout(layout_, checkpoint);
  if (!problems.ok()) {
    throw InputError(
        fmt::format("{} does not match the layout of {}:\n{}", checkpoint.source(), config_.name, problems.describe()));
  }
  // Each slot's piece is `elements / block` runs of `block` stored elements, `stride` apart from `base` (the whole
  // tensor on one GPU: one run). Only those runs are read from the mapped shards: a rank never touches the other
  // ranks' bytes (beyond the pages its runs share with them).
  uint64_t copied = 0, next_report = 1ull << 30;
  for (const Slot& s : slots_) {
    const std::string& name = s.spec->name;
    const weights::TensorInfo& info = *checkpoint.find(name);
    const auto raw = checkpoint.bytes(name);
    const kernels::RandomWindow& w = s.window;
    const int64_t runs = s.elements / w.block;
    const int64_t stored_size = int64_t(weights::element_size_bytes(info.dtype));
    K3_CHECK(
        runs * w.block == s.elements && (runs - 1) * w.stride + w.base + w.block <= int64_t(raw.size()) / stored_size,
        "{}: the rank's piece ({} runs of {} from {}, stride {}) lies outside its {} stored bytes", name, runs, w.block,
        w.base, w.stride, raw.size());
    uint64_t bytes = 0;
    if (s.device_dtype == TensorDtype::u8 || s.device_dtype == info.dtype) {
      const int64_t run_bytes = w.block * stored_size;
      bytes = uint64_t(runs * run_bytes);
      CUDA_CHECK(cudaMemcpy2D(s.ptr, size_t(run_bytes), raw.data() + w.base * stored_size,
                              size_t(w.stride * stored_size), size_t(run_bytes), size_t(runs), cudaMemcpyHostToDevice));
    } else {
      std::vector<float> values;
      values.reserve(size_t(s.elements));
      for (int64_t r = 0; r < runs; ++r) {
        const auto run = raw.subspan(size_t((r * w.stride + w.base) * stored_size), size_t(w.block * stored_size));
        const std::vector<float> decoded = weights::decode_to_float(info.dtype, run);
        values.insert(values.end(), decoded.begin(), decoded.end());
      }
      if (s.device_dtype == TensorDtype::f32) {
        bytes = values.size() * sizeof(float);
        CUDA_CHECK(cudaMemcpy(s.ptr, values.data(), bytes, cudaMemcpyHostToDevice));
      } else {
        std::vector<uint16_t> converted(values.size());
        for (size_t i = 0; i < values.size(); ++i) converted[i] = weights::float_to_bf16(values[i]);
        bytes = converted.size() * 2;
        CUDA_CHECK(cudaMemcpy(s.ptr, converted.data(), bytes, cudaMemcpyHostToDevice));
      }
    }
    copied += bytes;
    if (progress && copied >= next_report) {
      progress(
          fmt::format("loaded {:.1f} GiB of {:.1f} GiB", copied / 1073741824.0, arena_.used_bytes() / 1073741824.0));
      next_report += 1ull << 30;
    }
  }
}

int DeviceWeights::tile_experts() {
  const ModelConfig& c = config_;
  if (!c.moe || c.routed_expert_format != StorageFormat::mxfp4) return 0;
  const MoeSpec& e = *c.moe;
  const int64_t E = rank_.experts, I = e.expert_intermediate, z = e.expert_input_dim(c.hidden_size);
  if (!kernels::mxfp4_tiled_supported(2 * I, z) || !kernels::mxfp4_tiled_supported(z, I)) return 0;
  // One expert's matrix at a time through a scratch of w13's size (w2's is half of it), copied back in place.
  const int64_t packed_bytes = 2 * I * z / 2, scale_bytes = 2 * I * z / 32;
  uint8_t *packed_scratch = nullptr, *scale_scratch = nullptr;
  CUDA_CHECK(cudaMalloc(&packed_scratch, packed_bytes));
  CUDA_CHECK(cudaMalloc(&scale_scratch, scale_bytes));
  const auto tile = [&](uint8_t* packed, uint8_t* scales, int64_t out, int64_t in) {
    for (int64_t x = 0; x < E; ++x) {
      uint8_t* expert_packed = packed + x * out * in / 2;
      uint8_t* expert_scales = scales + x * out * in / 32;
      CUDA_CHECK(kernels::mxfp4_tiled_repack(expert_packed, expert_scales, 1, out, in, packed_scratch, scale_scratch,
                                             nullptr));
      CUDA_CHECK(cudaMemcpyAsync(expert_packed, packed_scratch, out * in / 2, cudaMemcpyDeviceToDevice, nullptr));
      CUDA_CHECK(cudaMemcpyAsync(expert_scales, scale_scratch, out * in / 32, cudaMemcpyDeviceToDevice, nullptr));
    }
  };
  int tiled = 0;
  for (LayerDeviceWeights& layer : layers) {
    MoeDeviceWeights& w = layer.moe;
    if (w.w13_packed == nullptr || w.expert_layout == kernels::Mxfp4Layout::tiled16) continue;
    tile(w.w13_packed, w.w13_scales, 2 * I, z);
    tile(w.w2_packed, w.w2_scales, z, I);
    w.expert_layout = kernels::Mxfp4Layout::tiled16;
    ++tiled;
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaFree(packed_scratch));
  CUDA_CHECK(cudaFree(scale_scratch));
  return tiled;
}

}  // namespace k3::runtime
