// kernel_bench: the decode-time elementwise and recurrent kernels of kernels/ against the
// speed of light on the GPU it runs on (method and output: bench/gpu/bench_harness.h).
// MLA's absorbed-decode products (memory-bound on kv_b) are timed on rotated weights.
// The decode step's small ops (MoE router selection and bucketing, the fp32 MoE latent RMSNorm, greedy sampling)
// are latency-bound: their inputs are the L2-resident outputs of the kernel before them, so they are timed on one
// buffer set, each variant both as one launch and per launch of 32 replayed from one CUDA graph (as in the decode
// step, where launch gaps of the host API are gone). The KDA decode step is timed both as one launch and per layer of
// a CUDA graph holding one step per layer (each layer its own state), beside a copy of the same state bytes timed
// the same two ways. The KDA pre-processing (short conv + SiLU, L2 norms, gate, β) and output gate (RMSNorm times
// sigmoid(gate)) run on random inputs at K3's width for a 32K-token prefill chunk (timed alone) and for a decode step
// of batch 1 and 64 (both ways), against the bytes they must move; the output gate in each version.
//
// Usage: kernel_bench [--hardware scenarios/hardware/h200-sxm.yaml] [--repeats N]
#include "bench/gpu/bench_harness.h"
#include "kernels/attnres_mix.h"
#include "kernels/kda_decode.h"
#include "kernels/kda_gate_proj.h"
#include "kernels/kda_output_gate.h"
#include "kernels/kda_preprocess.h"
#include "kernels/mla_absorb.h"
#include "kernels/moe_bucket.h"
#include "kernels/moe_router.h"
#include "kernels/rmsnorm.h"
#include "kernels/sampling.h"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

using k3::EfficiencyClass;
using k3::bench::Result;
using k3::bench::device_alloc;
using k3::bench::graph_us_per_launch;
using k3::bench::time_us;

namespace {

// Both timings of a latency-bound op (see the top of the file) appended to `results`.
void time_small_op(const k3::bench::Session& session, std::vector<Result>& results, const std::string& name,
                   double bytes, double flops, const std::function<void(cudaStream_t)>& launch) {
  constexpr int kGraphLaunches = 32;
  Result single{name + " (one launch)", bytes, flops};
  single.median_us = time_us([&](int) { launch(nullptr); }, session.repeats);
  single.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
  Result graph = single;
  graph.name = fmt::format("{} (per launch, {} in a CUDA graph)", name, kGraphLaunches);
  graph.median_us = graph_us_per_launch(launch, kGraphLaunches, session.repeats);
  results.push_back(single);
  results.push_back(graph);
}

// A bandwidth-sized launch timed alone, or a latency-bound one both ways (time_small_op).
void time_op(const k3::bench::Session& session, std::vector<Result>& results, const std::string& name, double bytes,
             double flops, bool latency_bound, const std::function<void(cudaStream_t)>& launch) {
  if (latency_bound) {
    time_small_op(session, results, name, bytes, flops, launch);
    return;
  }
  Result r{name, bytes, flops};
  r.median_us = time_us([&](int) { launch(nullptr); }, session.repeats);
  r.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
  results.push_back(r);
}

}  // namespace

int main(int argc, char** argv) {
  const k3::bench::Session session(argc, argv);
  const int repeats = session.repeats;
  std::vector<Result> results;

  // RMSNorm, bf16, 4096 tokens x 7168.
  {
    const int64_t rows = 4096, width = 7168;
    const double bytes = 2.0 * rows * width * 2 + width * 2;
    const int sets = session.rotation_for(bytes);
    std::vector<__nv_bfloat16*> x(sets), y(sets);
    for (int s = 0; s < sets; ++s) {
      x[s] = device_alloc<__nv_bfloat16>(rows * width, 0x3F);
      y[s] = device_alloc<__nv_bfloat16>(rows * width, 0);
    }
    __nv_bfloat16* w = device_alloc<__nv_bfloat16>(width, 0x3F);
    Result r{"rmsnorm_bf16 4096x7168", bytes, 4.0 * rows * width};
    r.median_us = time_us([&](int i) {
      CUDA_CHECK(k3::kernels::rmsnorm_bf16(x[i % sets], width, w, 1e-5f, y[i % sets], width, rows, width, nullptr));
    }, repeats);
    r.roofline_us = session.roofline_us(r.flops, r.bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
    results.push_back(r);
    for (int s = 0; s < sets; ++s) {
      CUDA_CHECK(cudaFree(x[s]));
      CUDA_CHECK(cudaFree(y[s]));
    }
    CUDA_CHECK(cudaFree(w));
  }

  // KDA decode step, 96 heads x 128, fp32 state, batch 1..256.
  for (int batch : {1, 16, 64, 256}) {
    const int heads = 96, d = 128;
    const size_t state_elems = size_t(batch) * heads * d * d;
    const double bytes = 2.0 * state_elems * 4 + double(batch) * heads * d * 4 * 5 + batch * heads * 4;
    const double flops = double(batch) * heads * (7.0 * d * d + 2.0 * d);
    const int sets = session.rotation_for(bytes);
    std::vector<float*> state(sets);
    // Random state and inputs (zeros can run faster): q, k at the scale of L2-normalised rows, gates below 0.
    for (int s = 0; s < sets; ++s) state[s] = k3::bench::device_normal_f32(state_elems, 0.0f, 0.05f, 10 + s);
    const size_t vec = size_t(batch) * heads * d;
    float* q = k3::bench::device_normal_f32(vec, 0.0f, 0.09f, 1);
    float* k = k3::bench::device_normal_f32(vec, 0.0f, 0.09f, 2);
    float* v = k3::bench::device_normal_f32(vec, 0.0f, 1.0f, 3);
    float* g = k3::bench::device_normal_f32(vec, -0.05f, 0.02f, 4);
    float* beta = k3::bench::device_uniform_f32(size_t(batch) * heads, 0.0f, 1.0f, 5);
    float* out = device_alloc<float>(size_t(batch) * heads * d, 0);
    using k3::kernels::KdaDecodeAlgorithm;
    for (const auto& [algorithm_value, label] :
         {std::pair{KdaDecodeAlgorithm::automatic, "automatic"},
          std::pair{KdaDecodeAlgorithm::column_per_thread, "column_per_thread"},
          std::pair{KdaDecodeAlgorithm::column_pair_split_key, "column_pair_split_key"},
          std::pair{KdaDecodeAlgorithm::column_quad_split_key, "column_quad_split_key"}}) {
      const KdaDecodeAlgorithm algorithm = algorithm_value;
      Result r{fmt::format("kda_decode_step_f32state_{} batch {} heads 96 d 128", label, batch), bytes, flops};
      r.cls = EfficiencyClass::recurrent;
      r.median_us = time_us([&](int i) {
        CUDA_CHECK(k3::kernels::kda_decode_step_f32state(q, k, v, g, beta, state[i % sets], out, batch, heads, d,
                                                         nullptr, algorithm));
      }, repeats);
      r.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::recurrent, k3::ComputeType::fp32);
      results.push_back(r);
    }
    // The same-size ceiling: a device-to-device copy of this batch's state bytes (read + write counted), beside the
    // 1 GiB copy every row is compared with, so the step can also be read against a copy with the same ramp and tail.
    {
      float* copy_to = device_alloc<float>(state_elems, 0);
      Result copy{fmt::format("copy of the KDA state bytes, batch {} (cudaMemcpyAsync, read + write)", batch),
                  2.0 * state_elems * 4, 0.0};
      copy.cls = EfficiencyClass::recurrent;
      copy.median_us = time_us([&](int i) {
        CUDA_CHECK(cudaMemcpyAsync(copy_to, state[i % sets], state_elems * 4, cudaMemcpyDeviceToDevice));
      }, repeats);
      copy.roofline_us = session.roofline_us(0.0, copy.bytes, EfficiencyClass::recurrent, k3::ComputeType::fp32);
      results.push_back(copy);
      CUDA_CHECK(cudaFree(copy_to));
    }
    for (float* p : state) CUDA_CHECK(cudaFree(p));
    for (float* p : {q, k, v, g, beta, out}) CUDA_CHECK(cudaFree(p));
  }

  // KDA decode as it runs in the decode graph: one step per layer (each layer its own state) captured in one CUDA
  // graph, so launch gaps of the host API are gone; the time per layer is the replay time / layers. 69 layers (K3's
  // KDA layers) while their states fit 16 GiB, fewer above (64 at batch 16 is 6.6 GB; batch 256, 1.6 GB a layer,
  // takes 10). Beside each, the same-size ceiling as the graph sees it: one copy of each layer's state bytes per
  // layer (device-to-device, read + write counted), replayed the same way.
  for (int batch : {1, 16, 64, 256}) {
    const int heads = 96, d = 128;
    const size_t state_elems = size_t(batch) * heads * d * d, vec = size_t(batch) * heads * d;
    const double state_bytes = double(state_elems) * 4;
    const int layers = int(std::min(69.0, std::max(2.0, std::floor(16.0 * (1 << 30) / state_bytes))));
    std::vector<float*> state(layers);
    for (int l = 0; l < layers; ++l) state[l] = k3::bench::device_normal_f32(state_elems, 0.0f, 0.05f, 10 + l);
    float* q = k3::bench::device_normal_f32(vec, 0.0f, 0.09f, 1);
    float* k = k3::bench::device_normal_f32(vec, 0.0f, 0.09f, 2);
    float* v = k3::bench::device_normal_f32(vec, 0.0f, 1.0f, 3);
    float* g = k3::bench::device_normal_f32(vec, -0.05f, 0.02f, 4);
    float* beta = k3::bench::device_uniform_f32(size_t(batch) * heads, 0.0f, 1.0f, 5);
    float* out = device_alloc<float>(vec, 0);
    float* copy_to = device_alloc<float>(state_elems, 0);
    // Median µs per layer of a graph holding `step(l, stream)` for every layer, each layer once.
    const auto per_layer_us = [&](const std::function<void(int, cudaStream_t)>& step) {
      int layer = 0;
      return graph_us_per_launch([&](cudaStream_t stream) { step(layer++, stream); }, layers, repeats);
    };
    const double bytes = 2.0 * state_bytes + double(vec) * 4 * 5 + double(batch) * heads * 4;
    const double flops = double(batch) * heads * (7.0 * d * d + 2.0 * d);
    Result r{fmt::format("kda_decode_step_f32state batch {}, per layer of a {}-layer CUDA graph", batch, layers), bytes,
             flops};
    r.cls = EfficiencyClass::recurrent;
    r.median_us = per_layer_us([&](int l, cudaStream_t stream) {
      CUDA_CHECK(k3::kernels::kda_decode_step_f32state(q, k, v, g, beta, state[l], out, batch, heads, d, stream));
    });
    r.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::recurrent, k3::ComputeType::fp32);
    results.push_back(r);
    Result copy{fmt::format("copy of the KDA state bytes, batch {}, per layer of a {}-layer CUDA graph "
                            "(cudaMemcpyAsync, read + write)",
                            batch, layers),
                2.0 * state_bytes, 0.0};
    copy.cls = EfficiencyClass::recurrent;
    copy.median_us = per_layer_us([&](int l, cudaStream_t stream) {
      CUDA_CHECK(cudaMemcpyAsync(copy_to, state[l], state_elems * 4, cudaMemcpyDeviceToDevice, stream));
    });
    copy.roofline_us = session.roofline_us(0.0, copy.bytes, EfficiencyClass::recurrent, k3::ComputeType::fp32);
    results.push_back(copy);
    for (float* p : state) CUDA_CHECK(cudaFree(p));
    for (float* p : {q, k, v, g, beta, out, copy_to}) CUDA_CHECK(cudaFree(p));
  }

  // KDA gate projections at K3's widths (f_a 128 x 7168, f_b 12288 x 128, b_proj 96 x 7168: 6.3 MB of bf16 weights)
  // for T = 1, 3, 8 tokens: weight-bound, so the weights rotate over sets larger than L2, in both timings (the graph's
  // 32 launches take consecutive sets).
  for (const int tokens : {1, 3, 8}) {
    constexpr int kHidden = 7168, kRank = 128, kProjection = 12288, kHeads = 96;
    const double weight_bytes =
        2.0 * (double(kRank) * kHidden + double(kProjection) * kRank + double(kHeads) * kHidden);
    const double bytes = weight_bytes + tokens * (kHidden * 2.0 + kRank * 4.0 + kProjection * 4.0 + kHeads * 4.0);
    const double flops = 2.0 * tokens * (double(kRank + kHeads) * kHidden + double(kProjection) * kRank);
    const int sets = session.rotation_for(weight_bytes);
    std::vector<__nv_bfloat16*> w_fa(sets), w_fb(sets), w_b(sets);
    for (int s = 0; s < sets; ++s) {
      w_fa[s] = device_alloc<__nv_bfloat16>(size_t(kRank) * kHidden, 0x3C);
      w_fb[s] = device_alloc<__nv_bfloat16>(size_t(kProjection) * kRank, 0x3C);
      w_b[s] = device_alloc<__nv_bfloat16>(size_t(kHeads) * kHidden, 0x3C);
    }
    __nv_bfloat16* x = device_alloc<__nv_bfloat16>(size_t(tokens) * kHidden, 0x3C);
    __nv_bfloat16* fa = device_alloc<__nv_bfloat16>(size_t(tokens) * kRank, 0);
    float* f = device_alloc<float>(size_t(tokens) * kProjection, 0);
    float* b = device_alloc<float>(size_t(tokens) * kHeads, 0);
    int next_set = 0;
    time_small_op(session, results,
                  fmt::format("kda_gate_proj_warp_per_row T={} 7168 -> 128 -> 12288, beta 96", tokens), bytes, flops,
                  [&](cudaStream_t stream) {
                    const int s = next_set++ % sets;
                    CUDA_CHECK(k3::kernels::kda_gate_proj_bf16(x, kHidden, w_fa[s], w_fb[s], w_b[s], tokens, kHidden,
                                                               kRank, kProjection, kHeads, fa, f, b, stream));
                  });
    for (int s = 0; s < sets; ++s) {
      for (__nv_bfloat16* p : {w_fa[s], w_fb[s], w_b[s]}) CUDA_CHECK(cudaFree(p));
    }
    for (void* p : {static_cast<void*>(x), static_cast<void*>(fa), static_cast<void*>(f), static_cast<void*>(b)}) {
      CUDA_CHECK(cudaFree(p));
    }
  }

  // MLA's absorbed-decode products at K3's widths (96 heads, dn = dv = 128, dr = 64, r = 512): each reads its half
  // of kv_b (12.6 MB, rotated over sets larger than L2) for T = 1 … 64 tokens, per algorithm.
  for (const int tokens : {1, 4, 8, 16, 32, 64}) {
    const k3::kernels::MlaDims dims{96, 128, 64, 128, 512};
    const int64_t kv_b_elems = int64_t(dims.heads) * (dims.nope_dim + dims.value_dim) * dims.latent_rank;
    const double half_bytes = double(kv_b_elems);  // bf16: half the elements × 2 bytes
    const double flops = 2.0 * tokens * dims.heads * dims.nope_dim * dims.latent_rank;
    const int sets = session.rotation_for(half_bytes);
    std::vector<__nv_bfloat16*> kv_b(sets);
    for (int s = 0; s < sets; ++s) kv_b[s] = device_alloc<__nv_bfloat16>(size_t(kv_b_elems), 0x3C);
    const int64_t q_stride = int64_t(dims.heads) * (dims.nope_dim + dims.rope_dim);
    __nv_bfloat16* q = device_alloc<__nv_bfloat16>(size_t(tokens * q_stride), 0x3C);
    __nv_bfloat16* q_abs =
        device_alloc<__nv_bfloat16>(size_t(tokens) * dims.heads * (dims.latent_rank + dims.rope_dim), 0);
    float* latent = device_alloc<float>(size_t(tokens) * dims.heads * dims.latent_rank, 0);
    __nv_bfloat16* gate = device_alloc<__nv_bfloat16>(size_t(tokens) * dims.heads * dims.value_dim, 0x3C);
    __nv_bfloat16* out = device_alloc<__nv_bfloat16>(size_t(tokens) * dims.heads * dims.value_dim, 0);
    using k3::kernels::MlaAbsorbAlgorithm;
    for (const auto& [algorithm_value, label] : {std::pair{MlaAbsorbAlgorithm::per_column, "per_column"},
                                                 std::pair{MlaAbsorbAlgorithm::weight_stream, "weight_stream"},
                                                 std::pair{MlaAbsorbAlgorithm::mma_tiled, "mma_tiled"}}) {
      const MlaAbsorbAlgorithm algorithm = algorithm_value;
      const double q_bytes = half_bytes + tokens * (q_stride * 2.0 + dims.heads * (dims.latent_rank + dims.rope_dim) * 2.0);
      Result rq{fmt::format("mla_absorb_q_{} T={} 96 heads r 512", label, tokens), q_bytes, flops};
      rq.cls = EfficiencyClass::gemm;
      rq.median_us = time_us([&](int i) {
        CUDA_CHECK(k3::kernels::mla_absorb_q_bf16(q, q_stride, kv_b[i % sets], dims, tokens, q_abs, nullptr, algorithm));
      }, repeats);
      rq.roofline_us = session.roofline_us(flops, q_bytes, EfficiencyClass::gemm, k3::ComputeType::bf16);
      results.push_back(rq);
      const double v_bytes = half_bytes + tokens * dims.heads * (dims.latent_rank * 4.0 + dims.value_dim * 4.0);
      Result rv{fmt::format("mla_apply_v_{} T={} 96 heads r 512 gated", label, tokens), v_bytes, flops};
      rv.cls = EfficiencyClass::gemm;
      rv.median_us = time_us([&](int i) {
        CUDA_CHECK(k3::kernels::mla_apply_v_bf16(latent, kv_b[i % sets], gate, int64_t(dims.heads) * dims.value_dim,
                                                 dims, tokens, out, nullptr, algorithm));
      }, repeats);
      rv.roofline_us = session.roofline_us(flops, v_bytes, EfficiencyClass::gemm, k3::ComputeType::bf16);
      results.push_back(rv);
    }
    for (__nv_bfloat16* p : kv_b) CUDA_CHECK(cudaFree(p));
    for (void* p : {static_cast<void*>(q), static_cast<void*>(q_abs), static_cast<void*>(latent),
                    static_cast<void*>(gate), static_cast<void*>(out)}) {
      CUDA_CHECK(cudaFree(p));
    }
  }

  // MoE router selection, K3's top 16 of 896 (sigmoid, bias, selection, renormalisation), T = 1 … 64 tokens.
  for (const int tokens : {1, 8, 64}) {
    constexpr int kExperts = 896, kTopK = 16;
    float* logits = device_alloc<float>(size_t(tokens) * kExperts, 0);
    float* bias = device_alloc<float>(kExperts, 0);
    int32_t* ids = device_alloc<int32_t>(size_t(tokens) * kTopK, 0);
    float* weights = device_alloc<float>(size_t(tokens) * kTopK, 0);
    std::vector<float> host(size_t(tokens) * kExperts);
    for (size_t i = 0; i < host.size(); ++i) host[i] = float((i * 7919) % 1000) / 250.0f - 2.0f;  // varied scores
    CUDA_CHECK(cudaMemcpy(logits, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    const double bytes = tokens * kExperts * 4.0 + kExperts * 4.0 + tokens * kTopK * 8.0;
    for (const auto& [algorithm_value, label] :
         {std::pair{k3::kernels::MoeRouterAlgorithm::block_per_token, "block_per_token"},
          std::pair{k3::kernels::MoeRouterAlgorithm::warp_per_token, "warp_per_token"}}) {
      const k3::kernels::MoeRouterAlgorithm algorithm = algorithm_value;  // a lambda cannot capture a binding
      time_small_op(session, results, fmt::format("moe_route_{} T={} top 16 of 896", label, tokens), bytes,
                    5.0 * tokens * kExperts, [&](cudaStream_t stream) {
                      CUDA_CHECK(k3::kernels::moe_route_topk_sigmoid(logits, bias, tokens, kExperts, kTopK, 1.0f, ids,
                                                                     weights, stream, algorithm));
                    });
    }
    // The token→expert bucketing of that routing, per version (warp_chunks: three launches; single_block: one, up to
    // 1024 pairs).
    const size_t slots = size_t(tokens) * kTopK;
    CUDA_CHECK(k3::kernels::moe_route_topk_sigmoid(logits, bias, tokens, kExperts, kTopK, 1.0f, ids, weights, nullptr));
    k3::kernels::MoeBuckets buckets{device_alloc<int32_t>(kExperts + 1, 0), device_alloc<int32_t>(slots, 0),
                                    device_alloc<float>(slots, 0),          device_alloc<int32_t>(slots, 0),
                                    device_alloc<int32_t>(kExperts, 0),     device_alloc<int32_t>(1, 0)};
    const size_t workspace_bytes = k3::kernels::moe_bucket_workspace_bytes(tokens, kTopK, kExperts);
    uint8_t* workspace = device_alloc<uint8_t>(workspace_bytes, 0);
    using k3::kernels::MoeBucketAlgorithm;
    for (const auto& [algorithm_value, label] : {std::pair{MoeBucketAlgorithm::warp_chunks, "warp_chunks"},
                                                 std::pair{MoeBucketAlgorithm::single_block, "single_block"}}) {
      const MoeBucketAlgorithm algorithm = algorithm_value;
      if (algorithm == MoeBucketAlgorithm::single_block && slots > size_t(k3::kernels::kMoeBucketSingleBlockPairs)) {
        continue;
      }
      time_small_op(session, results, fmt::format("moe_bucket_by_expert_{} T={} top 16 of 896", label, tokens),
                    slots * 8.0 + (kExperts + 1) * 4.0 + slots * 12.0 + kExperts * 4.0 + 4.0, 0.0,
                    [&](cudaStream_t stream) {
                      CUDA_CHECK(k3::kernels::moe_bucket_by_expert(ids, weights, tokens, kTopK, kExperts, buckets,
                                                                   workspace, workspace_bytes, stream, algorithm));
                    });
    }
    for (void* p : {static_cast<void*>(logits), static_cast<void*>(bias), static_cast<void*>(ids),
                    static_cast<void*>(weights), static_cast<void*>(buckets.expert_offsets),
                    static_cast<void*>(buckets.slot_token), static_cast<void*>(buckets.slot_weight),
                    static_cast<void*>(buckets.slot_of), static_cast<void*>(buckets.active_experts),
                    static_cast<void*>(buckets.active_count), static_cast<void*>(workspace)}) {
      CUDA_CHECK(cudaFree(p));
    }
  }

  // The MoE latent RMSNorm: fp32 rows of 3584, in place (fp32 out) and to the bf16 input of the up projection.
  for (const int64_t rows : {1, 8, 64}) {
    constexpr int64_t kWidth = 3584;
    float* x = device_alloc<float>(size_t(rows * kWidth), 0x3F);
    __nv_bfloat16* y = device_alloc<__nv_bfloat16>(size_t(rows * kWidth), 0);
    __nv_bfloat16* w = device_alloc<__nv_bfloat16>(kWidth, 0x3F);
    using k3::kernels::RmsNormF32Algorithm;
    for (const auto& [algorithm_value, label] :
         {std::pair{RmsNormF32Algorithm::block_per_row, "block_per_row"},
          std::pair{RmsNormF32Algorithm::row_in_registers, "row_in_registers"}}) {
      const RmsNormF32Algorithm algorithm = algorithm_value;
      time_small_op(
          session, results, fmt::format("rmsnorm_f32_{} in place {}x{}", label, rows, kWidth),
          rows * kWidth * 8.0 + kWidth * 2.0, 4.0 * rows * kWidth, [&](cudaStream_t stream) {
            CUDA_CHECK(k3::kernels::rmsnorm_f32(x, kWidth, w, 1e-5f, x, kWidth, rows, kWidth, stream, algorithm));
          });
      time_small_op(session, results, fmt::format("rmsnorm_f32_to_bf16_{} {}x{}", label, rows, kWidth),
                    rows * kWidth * 6.0 + kWidth * 2.0, 4.0 * rows * kWidth, [&](cudaStream_t stream) {
                      CUDA_CHECK(k3::kernels::rmsnorm_f32_to_bf16(x, kWidth, w, 1e-5f, y, kWidth, rows, kWidth, stream,
                                                                  algorithm));
                    });
    }
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
    CUDA_CHECK(cudaFree(w));
  }

  // The Block AttnRes mixer with its RMSNorm at K3's width (7168), over 3 and 9 candidates (the first layers' and
  // the deepest's), per version that runs there.
  for (const int64_t tokens : {1, 8, 64}) {
    constexpr int64_t kWidth = 7168;
    constexpr int kMaxCandidates = k3::kernels::kAttnResMaxCandidates;
    std::vector<__nv_bfloat16*> rows;
    for (int c = 0; c < kMaxCandidates; ++c) rows.push_back(device_alloc<__nv_bfloat16>(size_t(tokens * kWidth), 0x3C));
    __nv_bfloat16* weights = device_alloc<__nv_bfloat16>(size_t(3 * kWidth), 0x3C);  // query, key norm, norm weight
    __nv_bfloat16* out = device_alloc<__nv_bfloat16>(size_t(2 * tokens * kWidth), 0);  // mix, normed
    using k3::kernels::AttnResAlgorithm;
    for (const int n : {3, kMaxCandidates}) {
      k3::kernels::AttnResCandidates candidates;
      candidates.count = n;
      for (int c = 0; c < n; ++c) candidates.rows[c] = rows[size_t(c)], candidates.row_stride[c] = kWidth;
      for (const auto& [algorithm_value, label] :
           {std::pair{AttnResAlgorithm::vec8_block_per_token, "vec8_block_per_token"},
            std::pair{AttnResAlgorithm::vec8_cluster_per_token, "vec8_cluster_per_token"}}) {
        const AttnResAlgorithm algorithm = algorithm_value;
        time_small_op(session, results, fmt::format("attnres_mix_rmsnorm_{} {} candidates {}x{}", label, n, tokens,
                                                    kWidth),
                      (n + 2) * tokens * kWidth * 2.0 + 3 * kWidth * 2.0, (4.0 * n + 4) * tokens * kWidth,
                      [&](cudaStream_t stream) {
                        CUDA_CHECK(k3::kernels::attnres_mix_rmsnorm_bf16(
                            candidates, weights, weights + kWidth, 1e-6f, weights + 2 * kWidth, 1e-6f, out, kWidth,
                            out + tokens * kWidth, kWidth, tokens, kWidth, stream, algorithm));
                      });
      }
    }
    for (__nv_bfloat16* p : rows) CUDA_CHECK(cudaFree(p));
    CUDA_CHECK(cudaFree(weights));
    CUDA_CHECK(cudaFree(out));
  }

  // KDA pre-processing at K3's width (96 heads × 128, conv kernel 4, bounded gate).
  {
    constexpr int kHeads = 96, kD = 128, kConv = 4;
    constexpr int64_t kP = int64_t(kHeads) * kD;
    const auto bytes_for = [&](int64_t tokens, int64_t states) {
      return tokens * (3 * kP * 2.0 + kP * 4.0 + kHeads * 4.0 + 4 * kP * 4.0 + kHeads * 4.0) +
             3 * kP * (kConv * 4.0 + 2.0 * states * (kConv - 1) * 4.0) + kHeads * 4.0 + kP * 4.0;
    };
    for (const int64_t tokens : {int64_t{1}, int64_t{64}, int64_t{32768}}) {
      const bool prefill = tokens > 64;  // else a decode step of `tokens` sequences, one conv-state slot each
      const int64_t states = prefill ? 1 : tokens;
      auto* qkv = k3::bench::device_normal_bf16(size_t(tokens * 3 * kP), 0.0f, 1.0f, 21);
      float* f = k3::bench::device_normal_f32(size_t(tokens * kP), 0.0f, 1.0f, 22);
      float* b = k3::bench::device_normal_f32(size_t(tokens * kHeads), 0.0f, 1.0f, 23);
      float* conv_w = k3::bench::device_normal_f32(size_t(3 * kP * kConv), 0.0f, 0.5f, 24);
      float* conv_state = k3::bench::device_normal_f32(size_t(states * 3 * kP * (kConv - 1)), 0.0f, 1.0f, 25);
      float* a_log = k3::bench::device_uniform_f32(kHeads, -1.0f, 1.0f, 26);
      float* dt_bias = k3::bench::device_normal_f32(size_t(kP), 0.0f, 1.0f, 27);
      float* out = device_alloc<float>(size_t(tokens * (4 * kP + kHeads)), 0);
      float *q = out, *k = q + tokens * kP, *v = k + tokens * kP, *g = v + tokens * kP, *beta = g + tokens * kP;
      const double bytes = bytes_for(tokens, states), flops = double(tokens) * kP * (3.0 * 2 * kConv + 12.0);
      const auto launch = [&](cudaStream_t stream) {
        if (prefill) {
          CUDA_CHECK(k3::kernels::kda_preprocess_bounded_sigmoid_gate(qkv, f, b, conv_w, conv_state, a_log, dt_bias,
                                                                      -5.0f, q, k, v, g, beta, int(tokens), kHeads, kD,
                                                                      kConv, stream));
        } else {
          CUDA_CHECK(k3::kernels::kda_preprocess_bounded_sigmoid_gate_decode_batch(
              qkv, f, b, conv_w, conv_state, a_log, dt_bias, -5.0f, q, k, v, g, beta, int(tokens), kHeads, kD, kConv,
              stream));
        }
      };
      time_op(session, results,
              fmt::format("kda_preprocess {} {}, heads 96 d 128", prefill ? "prefill" : "decode batch", tokens), bytes,
              flops, !prefill, launch);
      CUDA_CHECK(cudaFree(qkv));
      for (float* p : {f, b, conv_w, conv_state, a_log, dt_bias, out}) CUDA_CHECK(cudaFree(p));
    }
  }

  // KDA output gate at K3's width (96 heads × 128): o fp32 and gate bf16 in, bf16 out, the norm weight.
  for (const int64_t tokens : {int64_t{1}, int64_t{64}, int64_t{32768}}) {
    constexpr int kHeads = 96, kD = 128;
    constexpr int64_t kP = int64_t(kHeads) * kD;
    float* o = k3::bench::device_normal_f32(size_t(tokens * kP), 0.0f, 1.0f, 31);
    float* w = k3::bench::device_normal_f32(kD, 1.0f, 0.1f, 32);
    auto* gate = k3::bench::device_normal_bf16(size_t(tokens * kP), 0.0f, 1.0f, 33);
    __nv_bfloat16* out = device_alloc<__nv_bfloat16>(size_t(tokens * kP), 0);
    const double bytes = tokens * kP * (4.0 + 2.0 + 2.0) + kD * 4.0, flops = tokens * kP * 8.0;
    using k3::kernels::KdaOutputGateAlgorithm;
    for (const auto& [algorithm_value, label] :
         {std::pair{KdaOutputGateAlgorithm::block_per_token_head, "block_per_token_head"},
          std::pair{KdaOutputGateAlgorithm::warp_per_token_head, "warp_per_token_head"}}) {
      const KdaOutputGateAlgorithm algorithm = algorithm_value;
      const auto launch = [&](cudaStream_t stream) {
        CUDA_CHECK(
            k3::kernels::kda_output_gate_bf16(o, w, gate, kP, 1e-5f, out, int(tokens), kHeads, kD, stream, algorithm));
      };
      time_op(session, results, fmt::format("kda_output_gate_{} {} tokens, heads 96 d 128", label, tokens), bytes,
              flops, tokens <= 64, launch);
    }
    CUDA_CHECK(cudaFree(o));
    CUDA_CHECK(cudaFree(w));
    CUDA_CHECK(cudaFree(gate));
    CUDA_CHECK(cudaFree(out));
  }

  // Greedy sampling over K3's 163,840 logits, batch 1, 8, 64.
  for (const int batch : {1, 8, 64}) {
    constexpr int kVocab = 163840;
    float* logits = device_alloc<float>(size_t(batch) * kVocab, 0x3F);
    int32_t* tokens = device_alloc<int32_t>(size_t(batch), 0);
    using k3::kernels::SampleGreedyAlgorithm;
    for (const auto& [algorithm_value, label] :
         {std::pair{SampleGreedyAlgorithm::block_per_row, "block_per_row"},
          std::pair{SampleGreedyAlgorithm::cluster_per_row, "cluster_per_row"}}) {
      const SampleGreedyAlgorithm algorithm = algorithm_value;
      time_small_op(session, results, fmt::format("sample_greedy_{} batch {} vocab {}", label, batch, kVocab),
                    batch * kVocab * 4.0 + batch * 4.0, double(batch) * kVocab, [&](cudaStream_t stream) {
                      CUDA_CHECK(k3::kernels::sample_greedy(logits, batch, kVocab, tokens, stream, algorithm));
                    });
    }
    CUDA_CHECK(cudaFree(logits));
    CUDA_CHECK(cudaFree(tokens));
  }

  session.print(results);
  return 0;
}
