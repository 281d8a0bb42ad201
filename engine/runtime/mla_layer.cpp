#include "engine/runtime/mla_layer.h"

#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/mla_absorb.h"
#include "kernels/mla_decode_paged.h"
#include "kernels/mla_latent_cache.h"
#include "kernels/mla_prefill.h"
#include "kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>

namespace k3::runtime {

namespace {
constexpr double kMlaLatentNormEps = 1e-6;  // as the reference (KimiRMSNorm default)
}  // namespace

void MlaWorkspace::lay_out(const ModelConfig& c, const ModelRunShape& s, int64_t T, DeviceArena& a) {
  const MlaSpec& m = c.mla;
  const int64_t B = s.max_batch, S = s.max_prefill_context;
  const int64_t H = m.num_heads, width = m.cache_values_per_token();
  qkv_a = a.take_n<bf16>(T * (m.q_lora_rank + width));
  q_a_normed = a.take_n<bf16>(T * m.q_lora_rank);
  q = a.take_n<bf16>(T * H * m.qk_head_dim());
  gate = a.take_n<bf16>(T * H * m.v_head_dim);
  q_abs = a.take_n<bf16>(B * H * width);
  attn = a.take_n<bf16>(T * H * m.v_head_dim);
  latent_out = a.take_n<float>(B * H * m.kv_lora_rank);
  // The decode kernel's split count depends on the batch: room for the largest over every batch size.
  const int max_pages = int((s.max_context_tokens + s.page_tokens - 1) / s.page_tokens);
  for (int batch = 1; batch <= B; ++batch) {
    const kernels::MlaDecodeShape shape{batch, int(H), s.page_tokens, max_pages, s.max_context_tokens};
    decode_ws_bytes = std::max(decode_ws_bytes, kernels::mla_decode_workspace_bytes(shape));
  }
  decode_ws = a.take(decode_ws_bytes);
  latents = a.take_n<bf16>(S * width);
  kv = a.take_n<bf16>(S * H * (m.qk_nope_head_dim + m.v_head_dim));
  keys = a.take_n<bf16>(S * H * m.qk_head_dim());
  values = a.take_n<bf16>(S * H * m.v_head_dim);
}

void MlaLayer::run(OpId id, const ForwardPass& pass, int l, const SublayerIo& io) const {
  const ModelConfig& c = ctx_.config;
  const MlaSpec& m = c.mla;
  const MlaDeviceWeights& W = ctx_.weights.layers[l].mla;
  const MlaWorkspace& w = w_;
  GpuCache& cache = ctx_.cache;
  const cudaStream_t stream = ctx_.stream;
  const bf16* x = io.x;
  const int64_t T = pass.tokens, h = c.hidden_size, H = m.num_heads, qk = m.qk_head_dim(), dv = m.v_head_dim;
  const int64_t r = m.kv_lora_rank, width = m.cache_values_per_token(), qa_width = m.q_lora_rank + width;
  const kernels::MlaDims dims{int(H), m.qk_nope_head_dim, m.qk_rope_head_dim, int(dv), int(r)};
  const float scale = float(1.0 / std::sqrt(double(qk)));
  const CacheShape& cs = cache.shape();
  const bf16* gate = m.output_gate ? w.gate : nullptr;  // written by mla.out_gate_proj, before the attention
  switch (id) {
    case OpId::mla_qkv_a_proj: ctx_.gemm(x, h, W.qkv_a, w.qkv_a, qa_width, T, qa_width, h); return;
    case OpId::mla_latent_norm: {
      if (m.q_lora_rank > 0) {
        check(kernels::rmsnorm_bf16(w.qkv_a, qa_width, W.q_a_norm, float(kMlaLatentNormEps), w.q_a_normed,
                                    m.q_lora_rank, T, m.q_lora_rank, stream),
              "MLA q_a norm");
      }
      const bf16* kv = w.qkv_a + m.q_lora_rank;
      const cudaError_t status =
          pass.decode ? kernels::mla_cache_append_bf16(kv, qa_width, W.kv_a_norm, float(kMlaLatentNormEps), int(r),
                                                       m.qk_rope_head_dim, int(T), cache.step_positions(), 0, iota_,
                                                       cache.page_table(), cache.max_pages_per_sequence(),
                                                       cs.page_tokens, cache.mla_pages(l), stream)
                      : kernels::mla_cache_append_bf16(
                            kv, qa_width, W.kv_a_norm, float(kMlaLatentNormEps), int(r), m.qk_rope_head_dim, int(T),
                            nullptr, pass.start, nullptr, cache.page_table_row(pass.sequence),
                            cache.max_pages_per_sequence(), cs.page_tokens, cache.mla_pages(l), stream);
      check(status, "MLA cache append");
      return;
    }
    case OpId::mla_q_proj:
      if (m.q_lora_rank > 0) {
        ctx_.gemm(w.q_a_normed, m.q_lora_rank, W.q_b, w.q, H * qk, T, H * qk, m.q_lora_rank);
      } else {
        ctx_.gemm(x, h, W.q_proj, w.q, H * qk, T, H * qk, h);
      }
      return;
    case OpId::mla_out_gate_proj: ctx_.gemm(x, h, W.g_proj, w.gate, H * dv, T, H * dv, h); return;
    case OpId::mla_q_absorb:
      check(kernels::mla_absorb_q_bf16(w.q, H * qk, W.kv_b, dims, int(T), w.q_abs, stream), "MLA q absorb");
      return;
    case OpId::mla_attn_decode: {
      const kernels::MlaDecodeShape shape{int(T), int(H), cs.page_tokens, cache.max_pages_per_sequence(),
                                          cs.max_context_tokens};
      check(kernels::mla_decode_paged_bf16(w.q_abs, cache.mla_pages(l), cache.page_table(), cache.step_positions() + T,
                                           scale, shape, w.latent_out, w.decode_ws, w.decode_ws_bytes, stream),
            "MLA decode attention");
      return;
    }
    case OpId::mla_v_absorb:
      check(kernels::mla_apply_v_bf16(w.latent_out, W.kv_b, gate, H * dv, dims, int(T), w.attn, stream),
            "MLA V absorb");
      return;
    case OpId::mla_kv_b_proj: {
      const int64_t S = pass.start + T;
      check(kernels::mla_cache_gather_bf16(cache.mla_pages(l), cache.page_table_row(pass.sequence), cs.page_tokens,
                                           int(width), S, w.latents, stream),
            "MLA cache gather");
      ctx_.gemm(w.latents, width, W.kv_b, w.kv, H * (m.qk_nope_head_dim + dv), S, H * (m.qk_nope_head_dim + dv), r);
      check(kernels::mla_assemble_kv_bf16(w.kv, w.latents, dims, S, w.keys, w.values, stream), "MLA assemble K/V");
      return;
    }
    case OpId::mla_attn_prefill: {
      const int64_t S = pass.start + T;
      check(kernels::mla_prefill_attention_bf16(w.q, w.keys, w.values, int(T), int(S), int(H), scale, w.attn, stream),
            "MLA prefill attention");
      if (gate) check(kernels::sigmoid_gate_bf16(w.attn, gate, H * dv, w.attn, T, H * dv, stream), "MLA output gate");
      return;
    }
    case OpId::mla_o_proj:
      ctx_.gemm(w.attn, H * dv, W.o_proj, io.out, h, T, h, H * dv, io.accumulate ? 1.0f : 0.0f);
      return;
    default: throw Error(fmt::format("layer {}: {} is not an MLA op", l + 1, op_name(id, l)));
  }
}

}  // namespace k3::runtime
