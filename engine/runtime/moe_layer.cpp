#include "engine/runtime/moe_layer.h"

#include "core/error.h"
#include "engine/runtime/cuda_check.h"
#include "kernels/elementwise.h"
#include "kernels/gather_rows.h"
#include "kernels/moe_router.h"
#include "kernels/mxfp4_grouped.h"
#include "kernels/mxfp4_grouped_dequantized.h"
#include "kernels/rmsnorm.h"

#include <algorithm>

namespace k3::runtime {

namespace {

// A MoE layer's MXFP4 experts as the grouped kernels take them: w1|w3 [2I, z] (gate_up) or w2 [z, I], in the layout
// the weights hold.
kernels::Mxfp4ExpertWeights mxfp4_experts(const MoeDeviceWeights& W, const MoeSpec& e, bool gate_up) {
  const int64_t I = e.expert_intermediate, z = e.latent_dim;
  return gate_up
             ? kernels::Mxfp4ExpertWeights{W.w13_packed, W.w13_scales, int(e.num_experts), 2 * I, z, W.expert_layout}
             : kernels::Mxfp4ExpertWeights{W.w2_packed, W.w2_scales, int(e.num_experts), z, I, W.expert_layout};
}

}  // namespace

void MoeWorkspace::lay_out(const ModelConfig& c, int64_t T, DeviceArena& a) {
  const MoeSpec& e = *c.moe;
  const int64_t h = c.hidden_size;
  const int64_t E = e.num_experts, slots = T * e.top_k, z = e.expert_input_dim(c.hidden_size);
  router_logits = a.take_n<float>(T * E);
  expert_ids = a.take_n<int32_t>(slots);
  route_weights = a.take_n<float>(slots);
  buckets.expert_offsets = a.take_n<int32_t>(E + 1);
  buckets.slot_token = a.take_n<int32_t>(slots);
  buckets.slot_weight = a.take_n<float>(slots);
  buckets.slot_of = a.take_n<int32_t>(slots);
  buckets.active_experts = a.take_n<int32_t>(E);
  buckets.active_count = a.take_n<int32_t>(1);
  bucket_ws_bytes = kernels::moe_bucket_workspace_bytes(int(T), e.top_k, int(E));
  bucket_ws = a.take(bucket_ws_bytes);
  z_in = a.take_n<bf16>(T * e.latent_dim);
  if (e.latent_dim <= 0) gathered = a.take_n<bf16>(slots * h);
  if (MoeLayer::dequantized_experts(c, T)) {
    gathered = a.take_n<bf16>(slots * e.latent_dim);
    expert_bf16 = a.take_n<bf16>(2 * e.expert_intermediate * e.latent_dim);  // w13: 2I·z, w2: z·I
  }
  expert_out = a.take_n<float>(slots * z);
  combined = a.take_n<float>(T * z);
  combined_bf16 = a.take_n<bf16>(T * e.latent_dim);
  shared_gate_up = a.take_n<float>(T * 2 * std::max<int64_t>(e.shared_intermediate, 1));
  shared_act = a.take_n<bf16>(T * std::max<int64_t>(e.shared_intermediate, 1));
}

bool MoeLayer::dequantized_experts(const ModelConfig& config, int64_t tokens) {
  if (!config.moe || config.moe->latent_dim <= 0 || config.routed_expert_format != StorageFormat::mxfp4) return false;
  return tokens * config.moe->top_k >= int64_t(kernels::kMxfp4DequantizedMinAverageSlots) * config.moe->num_experts;
}

void MoeLayer::run(OpId id, const ForwardPass& pass, int l, const SublayerIo& io) {
  const ModelConfig& c = ctx_.config;
  const MoeSpec& e = *c.moe;
  const MoeDeviceWeights& W = ctx_.weights.layers[l].moe;
  const MoeWorkspace& w = w_;
  const cudaStream_t stream = ctx_.stream;
  const bf16* x = io.x;
  const int64_t T = pass.tokens, h = c.hidden_size, E = e.num_experts, k = e.top_k, z = e.latent_dim;
  switch (id) {
    case OpId::moe_router:
      ctx_.gemm_f32(x, h, W.router, w.router_logits, E, T, E, h);
      check(kernels::moe_route_topk_sigmoid(w.router_logits, W.correction_bias, int(T), int(E), int(k),
                                            float(e.routed_scaling_factor), w.expert_ids, w.route_weights, stream),
            "MoE routing");
      check(kernels::moe_bucket_by_expert(w.expert_ids, w.route_weights, int(T), int(k), int(E), w.buckets, w.bucket_ws,
                                          w.bucket_ws_bytes, stream),
            "MoE bucketing");
      return;
    case OpId::moe_latent_down: ctx_.gemm(x, h, W.latent_down, w.z_in, z, T, z, h); return;
    case OpId::moe_experts:
      if (e.latent_dim <= 0) {  // Kimi Linear: bf16 experts at hidden width, no latent projections
        bf16_experts(pass, l, x);
      } else if (!pass.decode && dequantized_experts(c, T)) {
        mxfp4_experts_dequantized(pass, l);
      } else {
        mxfp4_experts_grouped(pass, l);
      }
      return;
    case OpId::moe_weighted_sum:
      if (e.latent_dim <= 0) {  // the sum at hidden width is the sublayer's output
        check(kernels::moe_combine_f32(w.expert_out, w.buckets.slot_of, w.route_weights, int(T), int(k), int(h),
                                       w.combined, stream),
              "MoE combine");
        check(kernels::convert_f32_to_bf16(w.combined, io.out, T * h, stream), "MoE output to bf16");
        return;
      }
      check(kernels::moe_combine_f32(w.expert_out, w.buckets.slot_of, w.route_weights, int(T), int(k), int(z),
                                     w.combined, stream),
            "MoE combine");
      check(kernels::convert_f32_to_bf16(w.combined, w.combined_bf16, T * z, stream), "MoE latent to bf16");
      return;
    case OpId::moe_latent_norm:  // the norm writes the bf16 input of the up projection itself
      check(kernels::moe_combine_f32(w.expert_out, w.buckets.slot_of, w.route_weights, int(T), int(k), int(z),
                                     w.combined, stream),
            "MoE combine");
      check(kernels::rmsnorm_f32_to_bf16(w.combined, z, W.latent_norm, float(c.rms_norm_eps), w.combined_bf16, z, T, z,
                                         stream),
            "MoE latent norm");
      return;
    case OpId::moe_latent_up:
      ctx_.gemm(w.combined_bf16, z, W.latent_up, io.out, h, T, h, z, io.accumulate ? 1.0f : 0.0f);
      return;
    case OpId::moe_shared: {
      const int64_t S = e.shared_intermediate;
      ctx_.gemm_f32(x, h, W.shared.gate_up, w.shared_gate_up, 2 * S, T, 2 * S, h);
      ctx_.glu(w.shared_gate_up, 2 * S, w.shared_act, T, S, "shared expert GLU");
      ctx_.gemm(w.shared_act, S, W.shared.down, io.out, h, T, h, S, /*beta=*/1.0f);
      return;
    }
    default: throw Error(fmt::format("layer {}: {} is not a MoE op", l + 1, op_name(id, l)));
  }
}

void MoeLayer::mxfp4_experts_grouped(const ForwardPass& pass, int l) {
  const MoeSpec& e = *ctx_.config.moe;
  const MoeDeviceWeights& W = ctx_.weights.layers[l].moe;
  const MoeWorkspace& w = w_;
  const int64_t T = pass.tokens, E = e.num_experts, I = e.expert_intermediate, z = e.latent_dim;
  const int64_t slots = T * e.top_k;
  const int max_active = int(std::min<int64_t>(E, slots));
  const kernels::ExpertRouting by_token{w.buckets.expert_offsets, w.buckets.slot_token, w.buckets.active_experts,
                                        w.buckets.active_count,   int(slots),           max_active};
  const kernels::Mxfp4ExpertWeights w13 = mxfp4_experts(W, e, true);
  check(kernels::mxfp4_grouped_bf16_to_f32(w13, by_token, w.z_in, z, T, glu_.gate_up, 2 * I, ctx_.stream),
        "MoE experts gate|up");
  ctx_.glu(glu_.gate_up, 2 * I, glu_.act, slots, I, "MoE expert GLU");
  // The down projection reads its own slot's row.
  const kernels::ExpertRouting by_slot{w.buckets.expert_offsets, iota_,      w.buckets.active_experts,
                                       w.buckets.active_count,   int(slots), max_active};
  const kernels::Mxfp4ExpertWeights w2 = mxfp4_experts(W, e, false);
  check(kernels::mxfp4_grouped_bf16_to_f32(w2, by_slot, glu_.act, I, slots, w.expert_out, z, ctx_.stream),
        "MoE experts down");
}

const std::vector<int32_t>& MoeLayer::expert_offsets_on_host(int l, int64_t slots) {
  const int64_t E = ctx_.config.moe->num_experts;
  // The routing stays on the device up to here; per-expert GEMM shapes need its offsets on the host.
  host_expert_offsets_.resize(E + 1);
  CUDA_CHECK(cudaMemcpyAsync(host_expert_offsets_.data(), w_.buckets.expert_offsets, (E + 1) * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  const std::vector<int32_t>& offsets = host_expert_offsets_;
  K3_CHECK(offsets[0] == 0 && offsets[E] == slots, "layer {}: the router filled slots [{}, {}) of {}", l + 1,
           offsets[0], offsets[E], slots);
  return offsets;
}

void MoeLayer::mxfp4_experts_dequantized(const ForwardPass& pass, int l) {
  const MoeSpec& e = *ctx_.config.moe;
  const MoeDeviceWeights& W = ctx_.weights.layers[l].moe;
  const MoeWorkspace& w = w_;
  const cudaStream_t stream = ctx_.stream;
  const int64_t T = pass.tokens, I = e.expert_intermediate, z = e.latent_dim, slots = T * e.top_k;
  const std::vector<int32_t>& offsets = expert_offsets_on_host(l, slots);
  check(kernels::gather_rows_bf16(w.z_in, z, T, w.buckets.slot_token, slots, w.gathered, z, z, stream), "MoE gather");
  const int64_t scratch = 2 * I * z;  // w13 [2I, z]; w2 [z, I] is half of it
  const kernels::Mxfp4ExpertWeights w13 = mxfp4_experts(W, e, true);
  check(kernels::mxfp4_grouped_dequantized_bf16_to_f32(ctx_.gemm_runner, w13, offsets.data(), w.gathered, z,
                                                       glu_.gate_up, 2 * I, w.expert_bf16, scratch, stream),
        "MoE experts gate|up (dequantised)");
  ctx_.glu(glu_.gate_up, 2 * I, glu_.act, slots, I, "MoE expert GLU");
  const kernels::Mxfp4ExpertWeights w2 = mxfp4_experts(W, e, false);
  check(kernels::mxfp4_grouped_dequantized_bf16_to_f32(ctx_.gemm_runner, w2, offsets.data(), glu_.act, I, w.expert_out,
                                                       z, w.expert_bf16, scratch, stream),
        "MoE experts down (dequantised)");
}

void MoeLayer::bf16_experts(const ForwardPass& pass, int l, const bf16* x) {
  const ModelConfig& c = ctx_.config;
  const MoeSpec& e = *c.moe;
  const MoeDeviceWeights& W = ctx_.weights.layers[l].moe;
  const MoeWorkspace& w = w_;
  const int64_t T = pass.tokens, h = c.hidden_size, E = e.num_experts, I = e.expert_intermediate;
  const int64_t slots = T * e.top_k;
  const std::vector<int32_t>& offsets = expert_offsets_on_host(l, slots);
  check(kernels::gather_rows_bf16(x, h, T, w.buckets.slot_token, slots, w.gathered, h, h, ctx_.stream), "MoE gather");
  // gate|up of every slot: one GEMM per active expert over its contiguous rows.
  for (int64_t x_id = 0; x_id < E; ++x_id) {
    const int64_t first = offsets[x_id], rows = offsets[x_id + 1] - first;
    K3_CHECK(rows >= 0 && first + rows <= slots, "layer {}: expert {} owns slots [{}, {})", l + 1, x_id, first,
             first + rows);
    if (rows == 0) continue;
    ctx_.gemm_f32(w.gathered + first * h, h, W.w13 + x_id * 2 * I * h, glu_.gate_up + first * 2 * I, 2 * I, rows, 2 * I,
                  h);
  }
  ctx_.glu(glu_.gate_up, 2 * I, glu_.act, slots, I, "MoE expert GLU");
  for (int64_t x_id = 0; x_id < E; ++x_id) {
    const int64_t first = offsets[x_id], rows = offsets[x_id + 1] - first;
    if (rows == 0) continue;
    ctx_.gemm_f32(glu_.act + first * I, I, W.w2 + x_id * h * I, w.expert_out + first * h, h, rows, h, I);
  }
}

}  // namespace k3::runtime
