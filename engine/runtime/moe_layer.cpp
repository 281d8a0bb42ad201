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
// `experts`: how many the weights hold (the rank's under EP).
kernels::Mxfp4ExpertWeights mxfp4_experts(const MoeDeviceWeights& W, const MoeSpec& e, int experts, bool gate_up) {
  const int64_t I = e.expert_intermediate, z = e.latent_dim;
  return gate_up ? kernels::Mxfp4ExpertWeights{W.w13_packed, W.w13_scales, experts, 2 * I, z, W.expert_layout}
                 : kernels::Mxfp4ExpertWeights{W.w2_packed, W.w2_scales, experts, z, I, W.expert_layout};
}

bool expert_parallel(const parallel::RankShape& rank) { return rank.ep() > 1; }

// Whether the grouped kernels' wgmma GEMM runs `slots` routed rows over `experts` faster than dequantising (which the
// engine otherwise does from kMxfp4DequantizedMinAverageSlots on): up to kMxfp4GroupedWgmmaMaxAverageSlots per
// expert, where it runs.
bool wgmma_experts(const kernels::Mxfp4ExpertWeights& w, int64_t slots, int64_t experts) {
  return slots < int64_t(kernels::kMxfp4GroupedWgmmaMaxAverageSlots) * experts &&
         kernels::mxfp4_grouped_gemm_wgmma_supported(w);
}

// Rows that may arrive at a rank in one dispatch of T tokens: each token sends at most min(top_k, experts per rank)
// rows to one rank, and on average T · top_k / ep; the bound is the smaller of the worst case and 1.3× the mean
// plus 4 · top_k (the uniform router's spread is a few percent at prefill sizes; exchange() checks it).
int64_t recv_capacity_rows(const MoeSpec& e, const parallel::RankShape& rank, int64_t T) {
  const int64_t per_rank = e.num_experts / rank.ep();
  const int64_t worst = T * std::min<int64_t>(e.top_k, per_rank);
  const int64_t mean = (T * e.top_k + rank.ep() - 1) / rank.ep();
  return std::min(worst, mean + (mean * 3 + 9) / 10 + 4 * e.top_k);
}

}  // namespace

int64_t MoeWorkspace::expert_slots(const ModelConfig& c, const parallel::RankShape& rank, int64_t T) {
  return expert_parallel(rank) ? recv_capacity_rows(*c.moe, rank, T) : T * c.moe->top_k;
}

void MoeWorkspace::lay_out(const ModelConfig& c, const parallel::RankShape& rank, int64_t T, DeviceArena& a) {
  const MoeSpec& e = *c.moe;
  const int64_t h = c.hidden_size;
  const int64_t E = e.num_experts, slots = T * e.top_k, z = e.expert_input_dim(c.hidden_size);
  const int64_t expert_rows = expert_slots(c, rank, T);
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
    gathered = a.take_n<bf16>(expert_rows * e.latent_dim);
    expert_bf16 = a.take_n<bf16>(2 * e.expert_intermediate * e.latent_dim);  // w13: 2I·z, w2: z·I
  }
  expert_out = a.take_n<float>(expert_rows * z);
  combined = a.take_n<float>(std::max(T, expert_rows) * z);
  combined_bf16 = a.take_n<bf16>(T * e.latent_dim);
  shared_gate_up = a.take_n<float>(T * 2 * std::max<int64_t>(e.shared_intermediate, 1));
  shared_act = a.take_n<bf16>(T * std::max<int64_t>(e.shared_intermediate, 1));
  if (expert_parallel(rank)) {
    const int64_t share = T - T / rank.tp() + 1;  // ≥ any rank's routed_count(T)
    recv_capacity = expert_rows;
    dispatch_send = a.take_n<bf16>(share * e.top_k * z);
    dispatch_recv = a.take_n<bf16>(recv_capacity * z);
    combine_send = a.take_n<bf16>(recv_capacity * z);
    combine_recv = a.take_n<bf16>(share * e.top_k * z);
    recv_ones = a.take_n<float>(recv_capacity);
    const int64_t local = rank.experts;
    recv_buckets.expert_offsets = a.take_n<int32_t>(local + 1);
    recv_buckets.slot_token = a.take_n<int32_t>(recv_capacity);
    recv_buckets.slot_weight = a.take_n<float>(recv_capacity);
    recv_buckets.slot_of = a.take_n<int32_t>(recv_capacity);
    recv_buckets.active_experts = a.take_n<int32_t>(local);
    recv_buckets.active_count = a.take_n<int32_t>(1);
    recv_bucket_ws_bytes = kernels::moe_bucket_workspace_bytes(int(recv_capacity), 1, int(local));
    recv_bucket_ws = a.take(recv_bucket_ws_bytes);
  }
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
  if (expert_parallel(ctx_.rank())) {
    const int64_t first = ctx_.rank().routed_first(T), count = ctx_.rank().routed_count(T);
    switch (id) {
      case OpId::moe_router: ep_router(pass, l, x); return;
      case OpId::moe_latent_down:  // the share's rows, then in expert (= destination rank) order for the dispatch
        if (count > 0) {
          ctx_.gemm(x + first * h, h, W.latent_down, w.z_in, z, count, z, h);
          check(kernels::gather_rows_bf16(w.z_in, z, count, w.buckets.slot_token, count * k, w.dispatch_send, z, z,
                                          stream),
                "MoE dispatch rows");
        }
        return;
      case OpId::moe_dispatch: ep_dispatch(pass, l); return;
      case OpId::moe_experts: ep_experts(pass, l); return;
      case OpId::moe_combine: ep_combine(pass, l); return;
      case OpId::moe_latent_norm:
      case OpId::moe_weighted_sum:
        if (count == 0) return;
        check(kernels::moe_combine_bf16(w.combine_recv, w.buckets.slot_of, w.route_weights + first * k, int(count),
                                        int(k), int(z), w.combined, stream),
              "MoE combine");
        if (id == OpId::moe_latent_norm) {
          check(kernels::rmsnorm_f32_to_bf16(w.combined, z, W.latent_norm, float(c.rms_norm_eps), w.combined_bf16, z,
                                             count, z, stream),
                "MoE latent norm");
        } else {
          check(kernels::convert_f32_to_bf16(w.combined, w.combined_bf16, count * z, stream), "MoE latent to bf16");
        }
        return;
      case OpId::moe_latent_up:  // the share's rows; the others are zero until the all-reduce sums the shares
        if (count < T) CUDA_CHECK(cudaMemsetAsync(io.out, 0, T * h * sizeof(bf16), stream));
        if (count > 0) ctx_.gemm(w.combined_bf16, z, W.latent_up, io.out + first * h, h, count, h, z);
        return;
      default: break;  // the shared expert, as on one GPU
    }
  }
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
      } else if (!pass.decode && dequantized_experts(c, T) &&
                 !wgmma_experts(mxfp4_experts(W, e, int(E), true), T * k, E)) {
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
  const kernels::Mxfp4ExpertWeights w13 = mxfp4_experts(W, e, int(E), true);
  check(kernels::mxfp4_grouped_bf16_to_f32(w13, by_token, w.z_in, z, T, glu_.gate_up, 2 * I, ctx_.stream),
        "MoE experts gate|up");
  ctx_.glu(glu_.gate_up, 2 * I, glu_.act, slots, I, "MoE expert GLU");
  // The down projection reads its own slot's row.
  const kernels::ExpertRouting by_slot{w.buckets.expert_offsets, iota_,      w.buckets.active_experts,
                                       w.buckets.active_count,   int(slots), max_active};
  const kernels::Mxfp4ExpertWeights w2 = mxfp4_experts(W, e, int(E), false);
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
  const kernels::Mxfp4ExpertWeights w13 = mxfp4_experts(W, e, int(e.num_experts), true);
  check(kernels::mxfp4_grouped_dequantized_bf16_to_f32(ctx_.gemm_runner, w13, offsets.data(), w.gathered, z,
                                                       glu_.gate_up, 2 * I, w.expert_bf16, scratch, stream),
        "MoE experts gate|up (dequantised)");
  ctx_.glu(glu_.gate_up, 2 * I, glu_.act, slots, I, "MoE expert GLU");
  const kernels::Mxfp4ExpertWeights w2 = mxfp4_experts(W, e, int(e.num_experts), false);
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

// ---- expert parallelism ----

const MoeLayer::Exchange& MoeLayer::exchange(int l, int64_t T) {
  const auto key = std::make_pair(l, T);
  if (const auto found = exchanges_.find(key); found != exchanges_.end()) return found->second;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(ctx_.stream, &capturing));
  K3_CHECK(capturing == cudaStreamCaptureStatusNone,
           "layer {}: the expert-parallel exchange of {} tokens is made by an eager call before a capture", l + 1, T);
  const parallel::RankShape& rank = ctx_.rank();
  const int ep = rank.ep();
  std::vector<int64_t> tokens_of_peer(static_cast<std::size_t>(ep));
  for (int p = 0; p < ep; ++p) tokens_of_peer[p] = T * (p + 1) / ep - T * p / ep;  // ep = tp: peer p's share
  Exchange x;
  x.rows = parallel::uniform_exchange(ctx_.comms.routing, ep, rank.layout.ep_rank, l, tokens_of_peer);
  for (int64_t r : x.rows.recv_rows) x.received += r;
  K3_CHECK(x.received <= w_.recv_capacity, "layer {}: {} routed rows arrive at {} tokens, the workspace holds {}",
           l + 1, x.received, T, w_.recv_capacity);
  x.expert_offsets.assign(static_cast<std::size_t>(rank.experts) + 1, 0);
  for (int32_t e : x.rows.recv_local_expert) ++x.expert_offsets[static_cast<std::size_t>(e) + 1];
  for (std::size_t e = 1; e < x.expert_offsets.size(); ++e) x.expert_offsets[e] += x.expert_offsets[e - 1];
  int32_t* ids = nullptr;
  CUDA_CHECK(cudaMalloc(&ids, std::max<int64_t>(x.received, 1) * sizeof(int32_t)));
  x.recv_local_expert = std::shared_ptr<int32_t>(ids, [](int32_t* p) { cudaFree(p); });
  CUDA_CHECK(cudaMemcpy(ids, x.rows.recv_local_expert.data(), x.received * sizeof(int32_t), cudaMemcpyHostToDevice));
  if (!ones_filled_) {
    const std::vector<float> ones(static_cast<std::size_t>(w_.recv_capacity), 1.0f);
    CUDA_CHECK(cudaMemcpy(w_.recv_ones, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice));
    ones_filled_ = true;
  }
  return exchanges_.emplace(key, std::move(x)).first->second;
}

void MoeLayer::ep_router(const ForwardPass& pass, int l, const bf16* x) {
  const ModelConfig& c = ctx_.config;
  const MoeSpec& e = *c.moe;
  const MoeDeviceWeights& W = ctx_.weights.layers[l].moe;
  const MoeWorkspace& w = w_;
  const int64_t T = pass.tokens, h = c.hidden_size, E = e.num_experts, k = e.top_k;
  const int64_t first = ctx_.rank().routed_first(T), count = ctx_.rank().routed_count(T);
  ctx_.gemm_f32(x, h, W.router, w.router_logits, E, T, E, h);
  check(kernels::moe_route_topk_sigmoid(w.router_logits, W.correction_bias, int(T), int(E), int(k),
                                        float(e.routed_scaling_factor), w.expert_ids, w.route_weights, ctx_.stream),
        "MoE routing");
  if (count == 0) return;
  // The share's slots in expert order, which is destination-rank order (a rank holds consecutive experts).
  check(kernels::moe_bucket_by_expert(w.expert_ids + first * k, w.route_weights + first * k, int(count), int(k), int(E),
                                      w.buckets, w.bucket_ws, w.bucket_ws_bytes, ctx_.stream),
        "MoE bucketing");
}

void MoeLayer::ep_dispatch(const ForwardPass& pass, int l) {
  const MoeSpec& e = *ctx_.config.moe;
  const MoeWorkspace& w = w_;
  const int64_t z = e.latent_dim;
  const Exchange& x = exchange(l, pass.tokens);
  ctx_.comms.ep->all_to_all({l, OpId::moe_dispatch}, w.dispatch_send, x.rows.send_rows, w.dispatch_recv,
                            x.rows.recv_rows, z * int64_t(sizeof(bf16)), ctx_.stream);
}

void MoeLayer::ep_experts(const ForwardPass& pass, int l) {
  const MoeSpec& e = *ctx_.config.moe;
  const MoeDeviceWeights& W = ctx_.weights.layers[l].moe;
  const MoeWorkspace& w = w_;
  const Exchange& x = exchange(l, pass.tokens);
  const int64_t I = e.expert_intermediate, z = e.latent_dim, R = x.received;
  const int local = int(ctx_.rank().experts);
  if (R == 0) return;
  check(kernels::moe_bucket_by_expert(x.recv_local_expert.get(), w.recv_ones, int(R), 1, local, w.recv_buckets,
                                      w.recv_bucket_ws, w.recv_bucket_ws_bytes, ctx_.stream),
        "MoE arrived rows by expert");
  const kernels::Mxfp4ExpertWeights w13 = mxfp4_experts(W, e, local, true), w2 = mxfp4_experts(W, e, local, false);
  if (!pass.decode && w.gathered != nullptr && R >= int64_t(kernels::kMxfp4DequantizedMinAverageSlots) * local &&
      !wgmma_experts(w13, R, local)) {
    // Long prefill where the wgmma GEMM is slower or does not run: each active expert dequantised to bf16, one GEMM
    // per expert (offsets known on the host).
    check(kernels::gather_rows_bf16(w.dispatch_recv, z, R, w.recv_buckets.slot_token, R, w.gathered, z, z, ctx_.stream),
          "MoE gather");
    const int64_t scratch = 2 * I * z;
    check(kernels::mxfp4_grouped_dequantized_bf16_to_f32(ctx_.gemm_runner, w13, x.expert_offsets.data(), w.gathered, z,
                                                         glu_.gate_up, 2 * I, w.expert_bf16, scratch, ctx_.stream),
          "MoE experts gate|up (dequantised)");
    ctx_.glu(glu_.gate_up, 2 * I, glu_.act, R, I, "MoE expert GLU");
    check(kernels::mxfp4_grouped_dequantized_bf16_to_f32(ctx_.gemm_runner, w2, x.expert_offsets.data(), glu_.act, I,
                                                         w.expert_out, z, w.expert_bf16, scratch, ctx_.stream),
          "MoE experts down (dequantised)");
  } else {
    const int max_active = int(std::min<int64_t>(local, R));
    const kernels::ExpertRouting by_row{w.recv_buckets.expert_offsets,
                                        w.recv_buckets.slot_token,
                                        w.recv_buckets.active_experts,
                                        w.recv_buckets.active_count,
                                        int(R),
                                        max_active};
    check(kernels::mxfp4_grouped_bf16_to_f32(w13, by_row, w.dispatch_recv, z, R, glu_.gate_up, 2 * I, ctx_.stream),
          "MoE experts gate|up");
    ctx_.glu(glu_.gate_up, 2 * I, glu_.act, R, I, "MoE expert GLU");
    const kernels::ExpertRouting by_slot{w.recv_buckets.expert_offsets, iota_,  w.recv_buckets.active_experts,
                                         w.recv_buckets.active_count,   int(R), max_active};
    check(kernels::mxfp4_grouped_bf16_to_f32(w2, by_slot, glu_.act, I, R, w.expert_out, z, ctx_.stream),
          "MoE experts down");
  }
  // The outputs back in arrival order, bf16 for the combine.
  check(kernels::moe_combine_f32(w.expert_out, w.recv_buckets.slot_of, w.recv_ones, int(R), 1, int(z), w.combined,
                                 ctx_.stream),
        "MoE outputs in arrival order");
  check(kernels::convert_f32_to_bf16(w.combined, w.combine_send, R * z, ctx_.stream), "MoE outputs to bf16");
}

void MoeLayer::ep_combine(const ForwardPass& pass, int l) {
  const MoeSpec& e = *ctx_.config.moe;
  const MoeWorkspace& w = w_;
  const Exchange& x = exchange(l, pass.tokens);
  const int64_t z = e.latent_dim;
  ctx_.comms.ep->all_to_all({l, OpId::moe_combine}, w.combine_send, x.rows.recv_rows, w.combine_recv, x.rows.send_rows,
                            z * int64_t(sizeof(bf16)), ctx_.stream);
}

}  // namespace k3::runtime
