#include "engine/runtime/kda_layer.h"

#include "core/error.h"
#include "kernels/kda_chunk_prefill.h"
#include "kernels/kda_decode.h"
#include "kernels/kda_gate_proj.h"
#include "kernels/kda_output_gate.h"
#include "kernels/kda_preprocess.h"

namespace k3::runtime {

void KdaWorkspace::lay_out(const ModelConfig& c, const ModelRunShape& s, int64_t T, DeviceArena& a) {
  const KdaSpec& kda = *c.kda;
  const int64_t P = kda.projection_dim(), H = kda.num_heads;
  qkv = a.take_n<bf16>(T * 3 * P);
  gate = a.take_n<bf16>(T * P);
  fa = a.take_n<bf16>(T * kda.gate_rank);
  o_gated = a.take_n<bf16>(T * P);
  f = a.take_n<float>(T * P);
  b = a.take_n<float>(T * H);
  q = a.take_n<float>(T * P);
  k = a.take_n<float>(T * P);
  v = a.take_n<float>(T * P);
  g = a.take_n<float>(T * P);
  beta = a.take_n<float>(T * H);
  o = a.take_n<float>(T * P);
  chunk_ws_bytes = kernels::kda_chunk_prefill_workspace_bytes(int(s.max_chunk_tokens), int(H), kda.head_dim);
  chunk_ws = a.take(chunk_ws_bytes);
}

void KdaLayer::run(OpId id, const ForwardPass& pass, int l, const SublayerIo& io) const {
  const ModelConfig& c = ctx_.config;
  const KdaSpec& k = *c.kda;
  const KdaDeviceWeights& W = ctx_.weights.layers[l].kda;
  const KdaWorkspace& w = w_;
  const cudaStream_t stream = ctx_.stream;
  const bf16* x = io.x;
  const int64_t T = pass.tokens, h = c.hidden_size, P = k.projection_dim(), H = k.num_heads, r = k.gate_rank;
  const bool bounded = k.gate_form == KdaGateForm::bounded_sigmoid;
  const float lower_bound = bounded ? float(k.gate_lower_bound) : 0.0f;
  switch (id) {
    case OpId::kda_qkv_proj: ctx_.gemm(x, h, W.qkv_proj, w.qkv, 3 * P, T, 3 * P, h); return;
    case OpId::kda_gate_proj:
      // Up to 8 tokens: two weight-streaming launches with the GEMMs' numerics (bf16 rank-r intermediate, fp32 out).
      if (T <= kernels::kKdaGateProjMaxTokens &&
          kernels::kda_gate_proj_supported(x, h, W.f_a, W.f_b, W.b_proj, int(T), int(h), int(r), int(P), int(H))) {
        check(kernels::kda_gate_proj_bf16(x, h, W.f_a, W.f_b, W.b_proj, int(T), int(h), int(r), int(P), int(H), w.fa,
                                          w.f, w.b, stream),
              "KDA gate projections");
      } else {
        ctx_.gemm(x, h, W.f_a, w.fa, r, T, r, h);
        ctx_.gemm_f32(w.fa, r, W.f_b, w.f, P, T, P, r);
        ctx_.gemm_f32(x, h, W.b_proj, w.b, H, T, H, h);
      }
      return;
    case OpId::kda_out_gate_proj:
      if (W.g_proj) {
        ctx_.gemm(x, h, W.g_proj, w.gate, P, T, P, h);
      } else {  // low rank: g_b · (g_a · x), through the forget gate's rank-r buffer (f_b has read it)
        ctx_.gemm(x, h, W.g_a, w.fa, r, T, r, h);
        ctx_.gemm(w.fa, r, W.g_b, w.gate, P, T, P, r);
      }
      return;
    case OpId::kda_preprocess: {
      float* conv = ctx_.cache.conv_state(l, pass.decode ? 0 : pass.sequence);
      cudaError_t status;
      if (pass.decode) {
        status = bounded ? kernels::kda_preprocess_bounded_sigmoid_gate_decode_batch(
                               w.qkv, w.f, w.b, W.conv, conv, W.a_log, W.dt_bias, lower_bound, w.q, w.k, w.v, w.g,
                               w.beta, int(T), int(H), k.head_dim, k.conv_kernel, stream)
                         : kernels::kda_preprocess_softplus_gate_decode_batch(
                               w.qkv, w.f, w.b, W.conv, conv, W.a_log, W.dt_bias, w.q, w.k, w.v, w.g, w.beta, int(T),
                               int(H), k.head_dim, k.conv_kernel, stream);
      } else {
        status = bounded ? kernels::kda_preprocess_bounded_sigmoid_gate(
                               w.qkv, w.f, w.b, W.conv, conv, W.a_log, W.dt_bias, lower_bound, w.q, w.k, w.v, w.g,
                               w.beta, int(T), int(H), k.head_dim, k.conv_kernel, stream)
                         : kernels::kda_preprocess_softplus_gate(w.qkv, w.f, w.b, W.conv, conv, W.a_log, W.dt_bias, w.q,
                                                                 w.k, w.v, w.g, w.beta, int(T), int(H), k.head_dim,
                                                                 k.conv_kernel, stream);
      }
      check(status, "KDA preprocess");
      return;
    }
    case OpId::kda_recurrent:
      check(kernels::kda_decode_step_f32state(w.q, w.k, w.v, w.g, w.beta, ctx_.cache.kda_state(l, 0), w.o, int(T),
                                              int(H), k.head_dim, stream),
            "KDA decode step");
      return;
    case OpId::kda_chunk:
      check(kernels::kda_chunk_prefill_f32state(w.q, w.k, w.v, w.g, w.beta, ctx_.cache.kda_state(l, pass.sequence), w.o,
                                                int(T), int(H), k.head_dim, lower_bound, w.chunk_ws, w.chunk_ws_bytes,
                                                stream),
            "KDA chunked prefill");
      return;
    case OpId::kda_out_norm:
      check(kernels::kda_output_gate_bf16(w.o, W.o_norm, w.gate, P, float(c.rms_norm_eps), w.o_gated, int(T), int(H),
                                          k.head_dim, stream),
            "KDA output gate");
      return;
    case OpId::kda_o_proj: ctx_.gemm(w.o_gated, P, W.o_proj, io.out, h, T, h, P, io.accumulate ? 1.0f : 0.0f); return;
    default: throw Error(fmt::format("layer {}: {} is not a KDA op", l + 1, op_name(id, l)));
  }
}

}  // namespace k3::runtime
