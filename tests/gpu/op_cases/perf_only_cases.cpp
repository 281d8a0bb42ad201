// Perf rows of ops whose tests are still plain TESTs (tests/gpu/moe_router_gpu_test.cpp, attnres_gpu_test.cpp,
// kda_gpu_test.cpp's pre-processing): the MoE router selection and bucketing, the Block AttnRes mixer with its
// RMSNorm and the KDA pre-processing, at K3's sizes.
#include "kernels/attnres_mix.h"
#include "kernels/kda_preprocess.h"
#include "kernels/moe_bucket.h"
#include "kernels/moe_router.h"
#include "tests/gpu/op_cases/cases.h"

namespace k3::gpu_test {
namespace {

constexpr int kExperts = 896, kTopK = 16;  // K3's routing: top 16 of 896

std::vector<Shape> routing_perf_shapes() {
  std::vector<Shape> out;
  for (const int tokens : {1, 8, 64}) out.push_back(shape({{"tokens", tokens}, {"experts", kExperts}, {"top_k", kTopK}}));
  return out;
}

// Logits of varied scores (a deterministic pattern in [-2, 2)), as kernel_bench has always timed them.
Shared<float> varied_logits(int tokens, int experts) {
  std::vector<float> host(size_t(tokens) * experts);
  for (size_t i = 0; i < host.size(); ++i) host[i] = float((i * 7919) % 1000) / 250.0f - 2.0f;
  return std::make_shared<DeviceBuffer<float>>(host);
}

// Sigmoid, bias, selection and renormalisation; latency-bound (its logits are the router GEMM's L2-resident output).
OpCase moe_route_case() {
  OpCase c{"moe_route_topk_sigmoid", OpKind::router};
  c.perf_shapes = routing_perf_shapes();
  c.perf_variants = {variant(kernels::MoeRouterAlgorithm::block_per_token, "block_per_token")};
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("moe_route_{} T={} top {} of {}", v.name, s["tokens"], s["top_k"], s["experts"]);
  };
  // The logits and bias read, an id and a weight written per choice; 5 FLOPs a logit.
  c.cost = [](const Shape& s) {
    Cost cost;
    cost.bytes = s["tokens"] * s["experts"] * 4.0 + s["experts"] * 4.0 + s["tokens"] * s["top_k"] * 8.0;
    cost.flops = 5.0 * s["tokens"] * s["experts"];
    cost.timing = Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int) -> Launch {
    const int tokens = int(s["tokens"]), experts = int(s["experts"]), top_k = int(s["top_k"]);
    auto logits = varied_logits(tokens, experts);
    auto bias = device_bytes<float>(size_t(experts), 0);
    auto ids = device_bytes<int32_t>(size_t(tokens) * top_k, 0);
    auto weights = device_bytes<float>(size_t(tokens) * top_k, 0);
    const auto algorithm = algorithm_of<kernels::MoeRouterAlgorithm>(v);
    return [=](int, cudaStream_t stream) {
      CUDA_CHECK(kernels::moe_route_topk_sigmoid(logits->get(), bias->get(), tokens, experts, top_k, 1.0f, ids->get(),
                                                 weights->get(), stream, algorithm));
    };
  };
  return c;
}

// The token→expert bucketing of that routing (warp_chunks: three launches; single_block: one, up to
// kMoeBucketSingleBlockPairs pairs).
OpCase moe_bucket_case(kernels::MoeBucketAlgorithm algorithm, const char* name) {
  OpCase c{fmt::format("moe_bucket_by_expert_{}", name), OpKind::moe_experts};
  for (const Shape& s : routing_perf_shapes()) {
    if (algorithm != kernels::MoeBucketAlgorithm::single_block ||
        s["tokens"] * s["top_k"] <= kernels::kMoeBucketSingleBlockPairs) {
      c.perf_shapes.push_back(s);
    }
  }
  c.perf_variants = {variant(algorithm, name)};
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("moe_bucket_by_expert_{} T={} top {} of {}", v.name, s["tokens"], s["top_k"], s["experts"]);
  };
  // Ids and weights read (8 bytes a pair), offsets, slot token/weight/of (12 bytes a pair), the active list and count.
  c.cost = [](const Shape& s) {
    const double slots = double(s["tokens"]) * s["top_k"];
    Cost cost;
    cost.bytes = slots * 8.0 + (s["experts"] + 1) * 4.0 + slots * 12.0 + s["experts"] * 4.0 + 4.0;
    cost.timing = Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int) -> Launch {
    const int tokens = int(s["tokens"]), experts = int(s["experts"]), top_k = int(s["top_k"]);
    const size_t slots = size_t(tokens) * top_k;
    auto logits = varied_logits(tokens, experts);
    auto bias = device_bytes<float>(size_t(experts), 0);
    auto ids = device_bytes<int32_t>(slots, 0);
    auto weights = device_bytes<float>(slots, 0);
    CUDA_CHECK(kernels::moe_route_topk_sigmoid(logits->get(), bias->get(), tokens, experts, top_k, 1.0f, ids->get(),
                                               weights->get(), nullptr));
    auto offsets = device_bytes<int32_t>(size_t(experts) + 1, 0), slot_token = device_bytes<int32_t>(slots, 0);
    auto slot_weight = device_bytes<float>(slots, 0);
    auto slot_of = device_bytes<int32_t>(slots, 0), active = device_bytes<int32_t>(size_t(experts), 0);
    auto active_count = device_bytes<int32_t>(1, 0);
    const size_t workspace_bytes = kernels::moe_bucket_workspace_bytes(tokens, top_k, experts);
    auto workspace = device_bytes<uint8_t>(workspace_bytes, 0);
    const auto algorithm = algorithm_of<kernels::MoeBucketAlgorithm>(v);
    return [=](int, cudaStream_t stream) {
      const kernels::MoeBuckets buckets{offsets->get(), slot_token->get(), slot_weight->get(),
                                        slot_of->get(), active->get(),     active_count->get()};
      CUDA_CHECK(kernels::moe_bucket_by_expert(ids->get(), weights->get(), tokens, top_k, experts, buckets,
                                               workspace->get(), workspace_bytes, stream, algorithm));
    };
  };
  return c;
}

// The mixer with its RMSNorm at K3's width (7168) over 3 and 9 candidates (the first layers' and the deepest's).
OpCase attnres_case() {
  OpCase c{"attnres_mix_rmsnorm_bf16", OpKind::attnres_mix};
  for (const int tokens : {1, 8, 64}) {
    for (const int n : {3, kernels::kAttnResMaxCandidates}) {
      c.perf_shapes.push_back(shape({{"tokens", tokens}, {"candidates", n}, {"width", 7168}}));
    }
  }
  using kernels::AttnResAlgorithm;
  c.perf_variants = {variant(AttnResAlgorithm::vec8_block_per_token, "vec8_block_per_token"),
                     variant(AttnResAlgorithm::vec8_cluster_per_token, "vec8_cluster_per_token")};
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("attnres_mix_rmsnorm_{} {} candidates {}x{}", v.name, s["candidates"], s["tokens"],
                       s["width"]);
  };
  // The candidates read, the mix and its norm written (bf16), three weight vectors; 4 FLOPs an element per
  // candidate (score and mix) and 4 for the norm.
  c.cost = [](const Shape& s) {
    const double n = double(s["candidates"]), elems = double(s["tokens"]) * s["width"];
    Cost cost;
    cost.bytes = (n + 2) * elems * 2.0 + 3 * s["width"] * 2.0;
    cost.flops = (4.0 * n + 4) * elems;
    cost.timing = Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int) -> Launch {
    const int64_t tokens = s["tokens"], width = s["width"];
    const int n = int(s["candidates"]);
    auto rows = rotated(n, [&](int) { return device_bytes<__nv_bfloat16>(size_t(tokens * width), 0x3C); });
    auto weights = device_bytes<__nv_bfloat16>(size_t(3 * width), 0x3C);  // query, key norm, norm weight
    auto out = device_bytes<__nv_bfloat16>(size_t(2 * tokens * width), 0);  // mix, normed
    kernels::AttnResCandidates candidates;
    candidates.count = n;
    for (int i = 0; i < n; ++i) candidates.rows[i] = rows[size_t(i)]->get(), candidates.row_stride[i] = width;
    const auto algorithm = algorithm_of<AttnResAlgorithm>(v);
    return [=](int, cudaStream_t stream) {
      const __nv_bfloat16* w = weights->get();
      CUDA_CHECK(kernels::attnres_mix_rmsnorm_bf16(candidates, w, w + width, 1e-6f, w + 2 * width, 1e-6f, out->get(),
                                                   width, out->get() + tokens * width, width, tokens, width, stream,
                                                   algorithm));
      (void)rows;  // the closure owns the candidates' buffers
    };
  };
  return c;
}

// Short conv + SiLU, L2 norms, bounded gate and β at K3's width (96 heads × 128, conv kernel 4): a 32K-token prefill
// chunk (timed alone) and a decode step of 1 and 64 sequences, one conv-state slot each (latency-bound).
OpCase kda_preprocess_case() {
  OpCase c{"kda_preprocess_bounded_sigmoid_gate", OpKind::kda_preprocess};
  for (const int tokens : {1, 64, 32768}) {
    c.perf_shapes.push_back(shape({{"tokens", tokens}, {"heads", 96}, {"d", 128}, {"conv", 4}}));
  }
  c.perf_variants = single_variant();
  c.perf_name = [](const Shape& s, const Variant&) {
    return fmt::format("kda_preprocess {} {}, heads {} d {}", s["tokens"] > 64 ? "prefill" : "decode batch",
                       s["tokens"], s["heads"], s["d"]);
  };
  // Per token: qkv (bf16), f, b read, q, k, v, g, β written (fp32); the conv weights and the conv states read and
  // written (one state per sequence at decode), a_log and dt_bias.
  c.cost = [](const Shape& s) {
    const double tokens = double(s["tokens"]), heads = double(s["heads"]), p = heads * s["d"], k = double(s["conv"]);
    const double states = tokens > 64 ? 1 : tokens;
    Cost cost;
    cost.bytes = tokens * (3 * p * 2.0 + p * 4.0 + heads * 4.0 + 4 * p * 4.0 + heads * 4.0) +
                 3 * p * (k * 4.0 + 2.0 * states * (k - 1) * 4.0) + heads * 4.0 + p * 4.0;
    cost.flops = tokens * p * (3.0 * 2 * k + 12.0);
    cost.timing = tokens > 64 ? Timing::alone : Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant&, int) -> Launch {
    const int tokens = int(s["tokens"]), heads = int(s["heads"]), d = int(s["d"]), conv = int(s["conv"]);
    const int64_t p = int64_t(heads) * d;
    const bool prefill = tokens > 64;
    const int64_t states = prefill ? 1 : tokens;
    auto qkv = device_normal_bf16(size_t(tokens * 3 * p), 0.0f, 1.0f, 21);
    auto f = device_normal_f32(size_t(tokens * p), 0.0f, 1.0f, 22);
    auto b = device_normal_f32(size_t(tokens) * heads, 0.0f, 1.0f, 23);
    auto conv_w = device_normal_f32(size_t(3 * p * conv), 0.0f, 0.5f, 24);
    auto conv_state = device_normal_f32(size_t(states * 3 * p * (conv - 1)), 0.0f, 1.0f, 25);
    auto a_log = device_uniform_f32(size_t(heads), -1.0f, 1.0f, 26);
    auto dt_bias = device_normal_f32(size_t(p), 0.0f, 1.0f, 27);
    auto out = device_bytes<float>(size_t(tokens * (4 * p + heads)), 0);
    return [=](int, cudaStream_t stream) {
      float *q = out->get(), *k = q + tokens * p, *v = k + tokens * p, *g = v + tokens * p, *beta = g + tokens * p;
      const auto call = prefill ? kernels::kda_preprocess_bounded_sigmoid_gate
                                : kernels::kda_preprocess_bounded_sigmoid_gate_decode_batch;
      CUDA_CHECK(call(qkv->get(), f->get(), b->get(), conv_w->get(), conv_state->get(), a_log->get(), dt_bias->get(),
                      -5.0f, q, k, v, g, beta, tokens, heads, d, conv, stream));
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> moe_routing_cases() {
  return {moe_route_case(), moe_bucket_case(kernels::MoeBucketAlgorithm::warp_chunks, "warp_chunks"),
          moe_bucket_case(kernels::MoeBucketAlgorithm::single_block, "single_block")};
}
std::vector<OpCase> attnres_cases() { return {attnres_case()}; }
std::vector<OpCase> kda_preprocess_cases() { return {kda_preprocess_case()}; }

}  // namespace k3::gpu_test
