// gemm_bench: the dense-GEMM ceilings of cuBLASLt at K3's shapes and the small MoE and head kernels around them,
// against the speed of light on the GPU it runs on (method and output: bench/gpu/bench_harness.h).
//   GEMM  y = x Wᵀ, bf16 x and W, bf16 out (fp32 for the router), m = 1, 8, 64 (decode) and 4096, 8192 (prefill)
//         tokens, over (n, k) = KDA q/k/v/gate projections (12288, 7168), o_proj (7168, 12288), the latent down
//         projection (3584, 7168), lm_head (163840, 7168) and the router (896, 7168).
//   MoE   router top-16 of 896 and the bucketing at 1, 64, 8192 tokens; the combine of 16 latent (3584) expert
//         outputs per token; SiTU-GLU of the shared expert (intermediate 6144).
//   head  greedy sampling over 163840 logits at batch 1 and 64 (top-p: bench/lab/sample_top_p.cu).
// GEMM FLOPs 2·m·n·k and bytes x + W + y, once each; the rest count the bytes they must read and write once.
// The largest GEMM rate measured is printed as measured_gemm_bf16_flops_per_s. GEMM operands are random normal
// (x stddev 1, W 0.02), generated on the device.
//
// Usage: gemm_bench [--hardware scenarios/hardware/h200-sxm.yaml] [--repeats N]
#include "bench/gpu/bench_harness.h"
#include "engine/runtime/gemm_cublaslt.h"
#include "kernels/moe_bucket.h"
#include "kernels/moe_router.h"
#include "kernels/sampling.h"
#include "kernels/situ_glu.h"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

using k3::EfficiencyClass;
using k3::bench::device_alloc;
using k3::bench::Result;
using k3::bench::time_us;

namespace {

// Device copy of n values drawn uniformly from [lo, hi) (a fixed seed: the same data every run).
float* device_random(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> host(n);
  for (float& v : host) v = dist(rng);
  float* p = device_alloc<float>(n, 0);
  CUDA_CHECK(cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

struct GemmShape {
  const char* what;
  int64_t n, k;
  bool f32_out;
};

}  // namespace

int main(int argc, char** argv) {
  const k3::bench::Session session(argc, argv);
  const int repeats = session.repeats;
  std::vector<Result> results;
  double best_gemm_flops_per_s = 0;
  k3::runtime::GemmRunner gemm;

  const GemmShape shapes[] = {{"kda q/k/v/gate proj", 12288, 7168, false},
                              {"o_proj", 7168, 12288, false},
                              {"latent down proj", 3584, 7168, false},
                              {"lm_head", 163840, 7168, false},
                              {"router", 896, 7168, true}};
  for (const GemmShape& shape : shapes) {
    for (const int64_t m : {1, 8, 64, 4096, 8192}) {
      const int64_t n = shape.n, k = shape.k, out_bytes = shape.f32_out ? 4 : 2;
      const double bytes = 2.0 * m * k + 2.0 * n * k + double(out_bytes) * m * n;
      const double flops = 2.0 * m * n * k;
      const int sets = session.rotation_for(bytes);
      std::vector<__nv_bfloat16*> x(sets), w(sets);
      std::vector<void*> y(sets);
      for (int s = 0; s < sets; ++s) {
        // Random normal operands: constant or zero ones let the tensor cores run faster than real data does.
        x[s] = k3::bench::device_normal_bf16(m * k, 0.0f, 1.0f, 2 * s + 1);
        w[s] = k3::bench::device_normal_bf16(n * k, 0.0f, 0.02f, 2 * s + 2);
        y[s] = device_alloc<uint8_t>(m * n * out_bytes, 0);
      }
      Result r{fmt::format("gemm_cublaslt bf16->{} m={} n={} k={} ({})", shape.f32_out ? "fp32" : "bf16", m, n, k,
                           shape.what),
               bytes, flops};
      r.cls = EfficiencyClass::gemm;
      r.median_us = time_us(
          [&](int i) {
            const int s = i % sets;
            if (shape.f32_out) {
              CUDA_CHECK(
                  gemm.bf16_to_f32(x[s], k, w[s], nullptr, 1.0f, 0.0f, static_cast<float*>(y[s]), n, m, n, k, nullptr));
            } else {
              CUDA_CHECK(gemm.bf16_to_bf16(x[s], k, w[s], nullptr, 1.0f, 0.0f, static_cast<__nv_bfloat16*>(y[s]), n, m,
                                           n, k, nullptr));
            }
          },
          repeats);
      r.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::gemm, k3::ComputeType::bf16);
      best_gemm_flops_per_s = std::max(best_gemm_flops_per_s, flops / (r.median_us * 1e-6));
      results.push_back(r);
      for (int s = 0; s < sets; ++s) {
        CUDA_CHECK(cudaFree(x[s]));
        CUDA_CHECK(cudaFree(w[s]));
        CUDA_CHECK(cudaFree(y[s]));
      }
    }
  }

  // Router top-16 of 896 and the bucketing, K3's layer shapes; inputs rotated as one allocation per kind.
  const int experts = 896, top_k = 16;
  for (const int tokens : {1, 64, 8192}) {
    const int64_t pairs = int64_t(tokens) * top_k;
    const double route_bytes = 4.0 * tokens * experts + 4.0 * experts + 8.0 * pairs;
    const int sets = session.rotation_for(route_bytes);
    float* logits = device_random(size_t(sets) * tokens * experts, -4.0f, 4.0f, 1);
    float* bias = device_random(experts, -0.05f, 0.05f, 2);
    int32_t* ids = device_alloc<int32_t>(size_t(sets) * pairs, 0);
    float* weights = device_alloc<float>(size_t(sets) * pairs, 0);
    Result route{fmt::format("moe_route_topk_sigmoid {} tokens, top 16 of 896", tokens), route_bytes, 0.0};
    route.median_us = time_us(
        [&](int i) {
          const size_t s = size_t(i % sets);
          CUDA_CHECK(k3::kernels::moe_route_topk_sigmoid(logits + s * tokens * experts, bias, tokens, experts, top_k,
                                                         1.0f, ids + s * pairs, weights + s * pairs, nullptr));
        },
        repeats);
    route.roofline_us = session.roofline_us(0, route_bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
    results.push_back(route);

    // Bucketing of routed ids: every set routed once first.
    for (int s = 0; s < sets; ++s) {
      CUDA_CHECK(k3::kernels::moe_route_topk_sigmoid(logits + size_t(s) * tokens * experts, bias, tokens, experts,
                                                     top_k, 1.0f, ids + size_t(s) * pairs, weights + size_t(s) * pairs,
                                                     nullptr));
    }
    const double bucket_bytes = 8.0 * pairs + 12.0 * pairs + 4.0 * (2 * experts + 2);
    int32_t* offsets = device_alloc<int32_t>(experts + 1, 0);
    int32_t* slot_token = device_alloc<int32_t>(pairs, 0);
    float* slot_weight = device_alloc<float>(pairs, 0);
    int32_t* slot_of = device_alloc<int32_t>(pairs, 0);
    int32_t* active = device_alloc<int32_t>(experts, 0);
    int32_t* active_count = device_alloc<int32_t>(1, 0);
    const size_t workspace_bytes = k3::kernels::moe_bucket_workspace_bytes(tokens, top_k, experts);
    void* workspace = device_alloc<uint8_t>(workspace_bytes, 0);
    const k3::kernels::MoeBuckets buckets{offsets, slot_token, slot_weight, slot_of, active, active_count};
    Result bucket{fmt::format("moe_bucket_by_expert {} tokens x 16 of 896", tokens), bucket_bytes, 0.0};
    bucket.median_us = time_us(
        [&](int i) {
          const size_t s = size_t(i % sets);
          CUDA_CHECK(k3::kernels::moe_bucket_by_expert(ids + s * pairs, weights + s * pairs, tokens, top_k, experts,
                                                       buckets, workspace, workspace_bytes, nullptr));
        },
        repeats);
    bucket.roofline_us = session.roofline_us(0, bucket_bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
    results.push_back(bucket);

    // Combine of the 16 latent expert outputs per token (fp32, width 3584) with the slots just computed.
    const int width = 3584;
    const double combine_bytes = 4.0 * pairs * width + 8.0 * pairs + 4.0 * tokens * width;
    float* expert_out = device_alloc<float>(size_t(pairs) * width, 0x3F);  // the values do not change the time
    float* y = device_alloc<float>(size_t(tokens) * width, 0);
    Result combine{fmt::format("moe_combine_f32 {} tokens x 16, width 3584", tokens), combine_bytes,
                   2.0 * pairs * width};
    combine.median_us = time_us(
        [&](int) {
          CUDA_CHECK(k3::kernels::moe_combine_f32(expert_out, slot_of, weights, tokens, top_k, width, y, nullptr));
        },
        repeats);
    combine.roofline_us =
        session.roofline_us(combine.flops, combine_bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
    results.push_back(combine);
    for (void* p : std::initializer_list<void*>{logits, bias, ids, weights, offsets, slot_token, slot_weight, slot_of,
                                                active, active_count, workspace, expert_out, y}) {
      CUDA_CHECK(cudaFree(p));
    }
  }

  // SiTU-GLU of the shared expert (intermediate 6144) on an fp32 gate|up GEMM output.
  for (const int64_t tokens : {1, 64, 8192}) {
    const int64_t intermediate = 6144;
    const double bytes = 4.0 * tokens * 2 * intermediate + 2.0 * tokens * intermediate;
    const int sets = session.rotation_for(bytes);
    float* gate_up = device_random(size_t(sets) * tokens * 2 * intermediate, -8.0f, 8.0f, 4);
    __nv_bfloat16* out = device_alloc<__nv_bfloat16>(size_t(sets) * tokens * intermediate, 0);
    Result r{fmt::format("situ_glu_bf16 fp32 in, {} tokens x 6144", tokens), bytes, 12.0 * tokens * intermediate};
    r.median_us = time_us(
        [&](int i) {
          const size_t s = size_t(i % sets);
          CUDA_CHECK(k3::kernels::situ_glu_bf16(gate_up + s * tokens * 2 * intermediate, 2 * intermediate, 4.0f, 25.0f,
                                                out + s * tokens * intermediate, intermediate, tokens, intermediate,
                                                nullptr));
        },
        repeats);
    r.roofline_us = session.roofline_us(r.flops, bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
    results.push_back(r);
    CUDA_CHECK(cudaFree(gate_up));
    CUDA_CHECK(cudaFree(out));
  }

  // Sampling over K3's vocabulary.
  const int vocab = 163840;
  for (const int batch : {1, 64}) {
    const double bytes = 4.0 * batch * vocab + 4.0 * batch;
    const int sets = session.rotation_for(bytes);
    float* logits = device_random(size_t(sets) * batch * vocab, -8.0f, 8.0f, 5);
    int32_t* out = device_alloc<int32_t>(batch, 0);
    Result greedy{fmt::format("sample_greedy batch {} vocab 163840", batch), bytes, 0.0};
    greedy.median_us = time_us(
        [&](int i) {
          CUDA_CHECK(k3::kernels::sample_greedy(logits + size_t(i % sets) * batch * vocab, batch, vocab, out, nullptr));
        },
        repeats);
    greedy.roofline_us = session.roofline_us(0, bytes, EfficiencyClass::elementwise, k3::ComputeType::fp32);
    results.push_back(greedy);
    CUDA_CHECK(cudaFree(logits));
    CUDA_CHECK(cudaFree(out));
  }

  session.print(results, fmt::format("\"measured_gemm_bf16_flops_per_s\": {:.4g}", best_gemm_flops_per_s));
  return 0;
}
