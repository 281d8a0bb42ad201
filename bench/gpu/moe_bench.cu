// moe_bench: the MXFP4 routed-expert products of kernels/mxfp4_grouped.h on one K3 projection, w1
// [3072, 3584] of all 896 experts (≈ 5.3 GB with scales, so every read comes from HBM), against the speed
// of light on the GPU it runs on (method and output: bench/gpu/bench_harness.h).
//   decode:  T = 1, 8, 16, 64 tokens, each choosing 16 distinct experts uniformly at random; the bytes are
//            those of the distinct experts actually read (4.25 bits per weight) plus x and y, averaged
//            over several routings that the timed launches take in turn (so consecutive launches read
//            different experts); every algorithm, the one `automatic` picks marked so, each launch timed alone;
//            and the GEMV as the decode graph runs it, per launch of a CUDA graph that replays one launch per
//            routing (no host launch gaps);
//   prefill: 8192 tokens × top 16 (every expert active): FLOP/s against the hardware file's bf16 peak, the
//            two GEMMs only (a GEMV re-reads every expert once per 8 slots, ≈ 19 times here);
//   the engine's two expert products, w13 (gate|up) [6144, 3584] and w2 [3584, 3072] of all 896 experts, fp32 y:
//            at decode (T = 1, 8, 16, 64, as above) the lean GEMV, and the tiled GEMV on a copy of the weights in
//            the tiled layout (kernels/mxfp4_tiled.h), alone and per graph launch, and beside them the read floor
//            of the same bytes (bench/gpu/read_floor.h: a kernel that only reads them, per graph launch); at
//            prefill (2048, 4096, 8192 and 32768 tokens, both layouts) the pipelined GEMM against the
//            dequantise-then-cuBLASLt path (kernels/mxfp4_grouped_dequantized.h), which for w13 includes gathering
//            x into slot order (w2's input is in slot order already, as in the engine).
//
// Usage: moe_bench [--hardware scenarios/hardware/h200-sxm.yaml] [--repeats N]
//                  [--filter TEXT (names containing it, or any of its |-separated parts)]
#include "bench/gpu/bench_harness.h"
#include "bench/gpu/read_floor.h"
#include "core/error.h"
#include "engine/runtime/gemm_cublaslt.h"
#include "kernels/gather_rows.h"
#include "kernels/mxfp4_grouped.h"
#include "kernels/mxfp4_grouped_dequantized.h"
#include "kernels/mxfp4_tiled.h"
#include "kernels/random_fill.h"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using k3::EfficiencyClass;
using k3::bench::device_alloc;
using k3::bench::Result;
using k3::bench::time_us;
using k3::kernels::ExpertRouting;
using k3::kernels::Mxfp4GroupedAlgorithm;

namespace {

constexpr int kExperts = 896, kTopK = 16;
constexpr int64_t kOut = 3072, kIn = 3584;
constexpr double kExpertBytes = kOut * kIn / 2.0 + kOut * kIn / 32.0;  // packed nibbles + E8M0 scales

// One routing on the device in the bucketing contract (expert-major slots, offsets, ascending active ids).
struct DeviceRouting {
  int32_t* offsets = nullptr;
  int32_t* slot_token = nullptr;
  int32_t* active = nullptr;
  int32_t* count = nullptr;
  std::vector<int32_t> host_offsets;  // [kExperts + 1]
  int distinct_experts = 0;
  int slots = 0;

  ExpertRouting view() const { return {offsets, slot_token, active, count, slots, std::min(slots, kExperts)}; }
  void free() const {
    for (int32_t* p : {offsets, slot_token, active, count}) CUDA_CHECK(cudaFree(p));
  }
};

template <typename T>
T* upload(const std::vector<T>& host) {
  T* p = device_alloc<T>(host.size(), 0);
  CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

// Every token chooses kTopK distinct experts uniformly at random.
DeviceRouting random_routing(int tokens, std::mt19937& rng) {
  std::vector<int32_t> counts(kExperts, 0);
  std::vector<std::vector<int32_t>> tokens_of(kExperts);
  std::vector<int32_t> ids(kExperts);
  std::iota(ids.begin(), ids.end(), 0);
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < kTopK; ++j) {  // partial Fisher–Yates: the first kTopK of a fresh shuffle
      std::uniform_int_distribution<int> pick(j, kExperts - 1);
      std::swap(ids[size_t(j)], ids[size_t(pick(rng))]);
      tokens_of[size_t(ids[size_t(j)])].push_back(t);
    }
  }
  std::vector<int32_t> offsets(kExperts + 1, 0), slot_token, active;
  for (int e = 0; e < kExperts; ++e) {
    offsets[size_t(e + 1)] = offsets[size_t(e)] + static_cast<int32_t>(tokens_of[size_t(e)].size());
    slot_token.insert(slot_token.end(), tokens_of[size_t(e)].begin(), tokens_of[size_t(e)].end());
    if (!tokens_of[size_t(e)].empty()) active.push_back(e);
  }
  DeviceRouting r;
  r.distinct_experts = static_cast<int>(active.size());
  r.slots = tokens * kTopK;
  active.resize(kExperts, -1);
  r.offsets = upload(offsets);
  r.host_offsets = offsets;
  r.slot_token = upload(slot_token);
  r.active = upload(active);
  r.count = upload(std::vector<int32_t>{r.distinct_experts});
  return r;
}

// `count` routings of `tokens` tokens (consecutive timed launches take them in turn) and their mean distinct experts.
std::vector<DeviceRouting> random_routings(int tokens, int count, std::mt19937& rng, double& distinct) {
  std::vector<DeviceRouting> routings;
  distinct = 0;
  for (int i = 0; i < count; ++i) {
    routings.push_back(random_routing(tokens, rng));
    distinct += routings.back().distinct_experts / double(count);
  }
  return routings;
}

const char* algorithm_name(Mxfp4GroupedAlgorithm a) {
  switch (a) {
    case Mxfp4GroupedAlgorithm::gemv: return "gemv_mma_lean";
    case Mxfp4GroupedAlgorithm::gemm_pipelined: return "gemm_mma_128x128_pipelined";
    case Mxfp4GroupedAlgorithm::gemm_wgmma: return "gemm_wgmma_128x192";
    case Mxfp4GroupedAlgorithm::automatic: break;
  }
  return "automatic";
}

constexpr Mxfp4GroupedAlgorithm kDecodeAlgorithms[] = {Mxfp4GroupedAlgorithm::gemv,
                                                       Mxfp4GroupedAlgorithm::gemm_pipelined};
constexpr Mxfp4GroupedAlgorithm kPrefillAlgorithms[] = {Mxfp4GroupedAlgorithm::gemm_pipelined};

// The engine's expert products (gpu_model.cpp moe_mlp): w13 reads x through the routing's tokens, w2 reads the
// GLU's output, already one row per slot (slot_token = the identity).
struct Projection {
  const char* name;
  int64_t out, in;
  bool gather;
};

// Slot s reads x row s: w2's routing.
int32_t* identity_slots(int slots) {
  std::vector<int32_t> iota(static_cast<size_t>(slots), 0);
  std::iota(iota.begin(), iota.end(), 0);
  return upload(iota);
}

// Decode: the lean GEMV on the checkpoint's layout and the tiled GEMV on the tiled copy of the same weights, each
// launch alone and per launch of a CUDA graph of one launch per routing.
void decode_at_engine_shape(const k3::bench::Session& session, const Projection& p,
                            const k3::kernels::Mxfp4ExpertWeights& w, const k3::kernels::Mxfp4ExpertWeights& tiled,
                            std::mt19937& rng, std::vector<Result>& results) {
  const double expert_bytes = p.out * p.in / 2.0 + p.out * p.in / 32.0;
  for (const int tokens : {1, 8, 16, 64}) {
    constexpr int kRoutings = 8;
    double distinct = 0;
    const std::vector<DeviceRouting> routings = random_routings(tokens, kRoutings, rng, distinct);
    const int slots = tokens * kTopK;
    int32_t* by_slot = identity_slots(slots);
    const int64_t x_rows = p.gather ? tokens : slots;
    __nv_bfloat16* x = k3::bench::device_normal_bf16(size_t(x_rows * p.in), 0.0f, 1.0f, 300 + tokens);
    float* y = device_alloc<float>(size_t(slots) * size_t(p.out), 0);
    const auto view = [&](int i) {
      k3::kernels::ExpertRouting r = routings[size_t(i % kRoutings)].view();
      if (!p.gather) r.slot_token = by_slot;
      return r;
    };
    const double bytes = distinct * expert_bytes + x_rows * p.in * 2.0 + slots * p.out * 4.0;
    const double flops = 2.0 * slots * p.out * p.in;
    const std::string shape = fmt::format("{} {}x{} decode T={} top 16 of 896 ({:.1f} distinct experts)", p.name, p.in,
                                          p.out, tokens, distinct);
    for (const auto& [kernel, weights] :
         {std::pair{"mxfp4_grouped_gemv_mma_lean", &w}, std::pair{"mxfp4_grouped_gemv_tiled", &tiled}}) {
      const k3::kernels::Mxfp4ExpertWeights& ww = *weights;
      Result alone{fmt::format("{} {}", kernel, shape), bytes, flops};
      if (!session.wants(alone.name)) continue;
      alone.median_us = time_us(
          [&](int i) {
            CUDA_CHECK(k3::kernels::mxfp4_grouped_bf16_to_f32(ww, view(i), x, p.in, x_rows, y, p.out, nullptr,
                                                              Mxfp4GroupedAlgorithm::gemv));
          },
          session.repeats);
      Result graph{fmt::format("{} {}, per launch of {} in a CUDA graph", kernel, shape, kRoutings), bytes, flops};
      int next = 0;
      graph.median_us = k3::bench::graph_us_per_launch(
          [&](cudaStream_t stream) {
            CUDA_CHECK(k3::kernels::mxfp4_grouped_bf16_to_f32(ww, view(next++), x, p.in, x_rows, y, p.out, stream,
                                                              Mxfp4GroupedAlgorithm::gemv));
          },
          kRoutings, session.repeats);
      for (Result* r : {&alone, &graph}) {
        r->cls = EfficiencyClass::grouped_gemm;
        r->roofline_us = session.roofline_us(r->flops, r->bytes, EfficiencyClass::grouped_gemm, k3::ComputeType::bf16);
        results.push_back(*r);
      }
    }
    // The read floor of the same bytes (bench/gpu/read_floor.h): each launch of the graph reads the GEMV's bytes
    // (weights, x, y: rounded down to 16) from its own place in the tiled weights where they hold 8 such places (else
    // from fewer, each far larger than the L2), so no launch finds them in the L2.
    Result floor_row{fmt::format("weight_read_floor {}, per launch of {} in a CUDA graph", shape, kRoutings),
                     std::floor(bytes / 16.0) * 16.0, 0.0};
    if (session.wants(floor_row.name)) {
      uint32_t* sink = device_alloc<uint32_t>(size_t(k3::bench::read_floor_blocks()), 0);
      const int64_t floor_bytes = int64_t(floor_row.bytes);
      const int64_t places = std::clamp<int64_t>(int64_t(kExperts) * p.out * p.in / 2 / floor_bytes, 1, kRoutings);
      int next = 0;
      floor_row.median_us = k3::bench::graph_us_per_launch(
          [&](cudaStream_t stream) {
            CUDA_CHECK(k3::bench::read_floor(tiled.packed + (next++ % places) * floor_bytes, nullptr, floor_bytes, 1,
                                             sink, stream));
          },
          kRoutings, session.repeats);
      floor_row.cls = EfficiencyClass::grouped_gemm;
      floor_row.roofline_us =
          session.roofline_us(0.0, floor_row.bytes, EfficiencyClass::grouped_gemm, k3::ComputeType::bf16);
      results.push_back(floor_row);
      CUDA_CHECK(cudaFree(sink));
    }
    for (const DeviceRouting& routing : routings) routing.free();
    CUDA_CHECK(cudaFree(by_slot));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }
}

// Prefill: the pipelined GEMM against dequantisation + cuBLASLt (which, for w13, gathers x into slot order first),
// each on the checkpoint's layout and on the tiled copy.
void prefill_at_engine_shape(const k3::bench::Session& session, const Projection& p,
                             const k3::kernels::Mxfp4ExpertWeights& w, const k3::kernels::Mxfp4ExpertWeights& tiled,
                             std::mt19937& rng, std::vector<Result>& results) {
  const int repeats = std::min(session.repeats, 10);
  k3::runtime::GemmRunner gemm;
  __nv_bfloat16* scratch = device_alloc<__nv_bfloat16>(size_t(p.out * p.in), 0);
  const double expert_bytes = p.out * p.in / 2.0 + p.out * p.in / 32.0;
  for (const int tokens : {2048, 4096, 8192, 32768}) {
    const DeviceRouting routing = random_routing(tokens, rng);
    const int slots = routing.slots;
    int32_t* by_slot = identity_slots(slots);
    const int64_t x_rows = p.gather ? tokens : slots;
    __nv_bfloat16* x = k3::bench::device_normal_bf16(size_t(x_rows * p.in), 0.0f, 1.0f, 200 + tokens);
    __nv_bfloat16* x_by_slot = p.gather ? device_alloc<__nv_bfloat16>(size_t(slots * p.in), 0) : x;
    float* y = device_alloc<float>(size_t(slots) * size_t(p.out), 0);
    k3::kernels::ExpertRouting view = routing.view();
    if (!p.gather) view.slot_token = by_slot;
    const double bytes = routing.distinct_experts * expert_bytes + x_rows * p.in * 2.0 + slots * p.out * 4.0;
    const double flops = 2.0 * slots * p.out * p.in;
    const std::string shape = fmt::format("{} {}x{} prefill T={} top 16 of 896 ({} distinct experts)", p.name, p.in,
                                          p.out, tokens, routing.distinct_experts);
    for (const auto& [layout, weights] : {std::pair{"", &w}, std::pair{" (tiled layout)", &tiled}}) {
      const k3::kernels::Mxfp4ExpertWeights& ww = *weights;
      Result pipelined{fmt::format("mxfp4_grouped_gemm_mma_128x128_pipelined{} {}", layout, shape), bytes, flops};
      if (session.wants(pipelined.name))
        pipelined.median_us = time_us(
            [&](int) {
              CUDA_CHECK(k3::kernels::mxfp4_grouped_bf16_to_f32(ww, view, x, p.in, x_rows, y, p.out, nullptr,
                                                                Mxfp4GroupedAlgorithm::gemm_pipelined));
            },
            repeats);
      Result dequantized{fmt::format("mxfp4_grouped_dequantized{} {}{}", layout, shape, p.gather ? ", x gathered" : ""),
                         bytes, flops};
      if (session.wants(dequantized.name))
        dequantized.median_us = time_us(
            [&](int) {
              if (p.gather) {
                CUDA_CHECK(k3::kernels::gather_rows_bf16(x, p.in, x_rows, routing.slot_token, slots, x_by_slot, p.in,
                                                         p.in, nullptr));
              }
              const cudaError_t status = k3::kernels::mxfp4_grouped_dequantized_bf16_to_f32(
                  gemm, ww, routing.host_offsets.data(), x_by_slot, p.in, y, p.out, scratch, p.out * p.in, nullptr);
              K3_CHECK(status == cudaSuccess, "dequantized path: {} ({})", cudaGetErrorString(status),
                       gemm.last_error());
            },
            repeats);
      // The wgmma GEMM reads the tiled layout on compute capability 9.0 only.
      Result wgmma{fmt::format("mxfp4_grouped_gemm_wgmma_128x192{} {}", layout, shape), bytes, flops};
      const bool wgmma_runs = k3::kernels::mxfp4_grouped_gemm_wgmma_supported(ww);
      if (wgmma_runs && session.wants(wgmma.name))
        wgmma.median_us = time_us(
            [&](int) {
              CUDA_CHECK(k3::kernels::mxfp4_grouped_bf16_to_f32(ww, view, x, p.in, x_rows, y, p.out, nullptr,
                                                                Mxfp4GroupedAlgorithm::gemm_wgmma));
            },
            repeats);
      for (Result* r : {&pipelined, &dequantized, &wgmma}) {
        if (r == &wgmma && !wgmma_runs) continue;
        if (!session.wants(r->name)) continue;
        r->cls = EfficiencyClass::grouped_gemm;
        r->roofline_us = session.roofline_us(r->flops, r->bytes, EfficiencyClass::grouped_gemm, k3::ComputeType::bf16);
        results.push_back(*r);
      }
    }
    // The rate to reach: one dense bf16 cuBLASLt GEMM of the same products (every slot times one expert's weights).
    Result dense{
        fmt::format("bf16_gemm_cublaslt {} {}x{} M={} (the same FLOPs, one weight)", p.name, p.in, p.out, slots),
        double(slots) * p.in * 2.0 + p.out * p.in * 2.0 + slots * p.out * 4.0, flops};
    if (session.wants(dense.name)) {
      dense.median_us = time_us(
          [&](int) {
            const __nv_bfloat16* rows = p.gather ? x_by_slot : x;
            CUDA_CHECK(
                gemm.bf16_to_f32(rows, p.in, scratch, nullptr, 1.0f, 0.0f, y, p.out, slots, p.out, p.in, nullptr));
          },
          repeats);
      dense.cls = EfficiencyClass::gemm;
      dense.roofline_us = session.roofline_us(dense.flops, dense.bytes, EfficiencyClass::gemm, k3::ComputeType::bf16);
      results.push_back(dense);
    }
    routing.free();
    CUDA_CHECK(cudaFree(by_slot));
    if (p.gather) CUDA_CHECK(cudaFree(x_by_slot));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }
  CUDA_CHECK(cudaFree(scratch));
}

void at_engine_shapes(const k3::bench::Session& session, std::mt19937& rng, std::vector<Result>& results) {
  for (const Projection& p : {Projection{"w13", 6144, 3584, true}, Projection{"w2", 3584, 3072, false}}) {
    const size_t weights = size_t(kExperts) * size_t(p.out * p.in);
    uint8_t* packed = device_alloc<uint8_t>(weights / 2, 0);
    uint8_t* scales = device_alloc<uint8_t>(weights / 32, 0);
    CUDA_CHECK(k3::kernels::mxfp4_fill_normal(packed, scales, int64_t(kExperts) * p.out, p.in, 0.02f, 11, nullptr));
    const k3::kernels::Mxfp4ExpertWeights w{packed, scales, kExperts, p.out, p.in};
    uint8_t* tiled_packed = device_alloc<uint8_t>(weights / 2, 0);
    uint8_t* tiled_scales = device_alloc<uint8_t>(weights / 32, 0);
    CUDA_CHECK(
        k3::kernels::mxfp4_tiled_repack(packed, scales, kExperts, p.out, p.in, tiled_packed, tiled_scales, nullptr));
    const k3::kernels::Mxfp4ExpertWeights tiled{tiled_packed, tiled_scales, kExperts,
                                                p.out,        p.in,         k3::kernels::Mxfp4Layout::tiled16};
    decode_at_engine_shape(session, p, w, tiled, rng, results);
    prefill_at_engine_shape(session, p, w, tiled, rng, results);
    for (uint8_t* buffer : {packed, scales, tiled_packed, tiled_scales}) CUDA_CHECK(cudaFree(buffer));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const k3::bench::Session session(argc, argv);
  const int repeats = session.repeats;
  std::vector<Result> results;

  const size_t weights = size_t(kExperts) * kOut * kIn;
  // Random normal(0, 0.02) weights quantised to MXFP4 (block scales around 2^-7), as `--weights random` makes them.
  uint8_t* packed = device_alloc<uint8_t>(weights / 2, 0);
  uint8_t* scales = device_alloc<uint8_t>(weights / 32, 0);
  CUDA_CHECK(k3::kernels::mxfp4_fill_normal(packed, scales, int64_t(kExperts) * kOut, kIn, 0.02f, 7, nullptr));
  const k3::kernels::Mxfp4ExpertWeights w{packed, scales, kExperts, kOut, kIn};
  std::mt19937 rng(20261214);

  // Decode: fp32 y, as the SiTU-GLU that follows reads it.
  for (const int tokens : {1, 8, 16, 64}) {
    constexpr int kRoutings = 8;
    double distinct = 0;
    const std::vector<DeviceRouting> routings = random_routings(tokens, kRoutings, rng, distinct);
    const int slots = tokens * kTopK;
    __nv_bfloat16* x = k3::bench::device_normal_bf16(size_t(tokens) * kIn, 0.0f, 1.0f, 100 + tokens);
    float* y = device_alloc<float>(size_t(slots) * kOut, 0);
    const Mxfp4GroupedAlgorithm automatic = k3::kernels::mxfp4_grouped_algorithm(w, routings[0].view());
    for (const Mxfp4GroupedAlgorithm algorithm : kDecodeAlgorithms) {
      Result r{fmt::format("mxfp4_grouped_{}{} w1 3072x3584 decode T={} top 16 of 896 ({:.1f} distinct experts)",
                           algorithm_name(algorithm), algorithm == automatic ? " (automatic)" : "", tokens, distinct),
               distinct * kExpertBytes + tokens * kIn * 2.0 + slots * kOut * 4.0, 2.0 * slots * kOut * kIn};
      if (!session.wants(r.name)) continue;
      r.cls = EfficiencyClass::grouped_gemm;
      r.median_us = time_us(
          [&](int i) {
            CUDA_CHECK(k3::kernels::mxfp4_grouped_bf16_to_f32(w, routings[size_t(i % kRoutings)].view(), x, kIn, tokens,
                                                              y, kOut, nullptr, algorithm));
          },
          repeats);
      r.roofline_us = session.roofline_us(r.flops, r.bytes, EfficiencyClass::grouped_gemm, k3::ComputeType::bf16);
      results.push_back(r);
    }
    {  // the GEMV as the decode graph runs it
      const Mxfp4GroupedAlgorithm algorithm = Mxfp4GroupedAlgorithm::gemv;
      Result r{fmt::format("mxfp4_grouped_{} w1 3072x3584 decode T={} top 16 of 896 ({:.1f} distinct experts), per "
                           "launch of {} in a CUDA graph",
                           algorithm_name(algorithm), tokens, distinct, kRoutings),
               distinct * kExpertBytes + tokens * kIn * 2.0 + slots * kOut * 4.0, 2.0 * slots * kOut * kIn};
      if (session.wants(r.name)) {
        r.cls = EfficiencyClass::grouped_gemm;
        int next = 0;
        r.median_us = k3::bench::graph_us_per_launch(
            [&](cudaStream_t stream) {
              CUDA_CHECK(k3::kernels::mxfp4_grouped_bf16_to_f32(w, routings[size_t(next++ % kRoutings)].view(), x, kIn,
                                                                tokens, y, kOut, stream, algorithm));
            },
            kRoutings, repeats);
        r.roofline_us = session.roofline_us(r.flops, r.bytes, EfficiencyClass::grouped_gemm, k3::ComputeType::bf16);
        results.push_back(r);
      }
    }
    for (const DeviceRouting& routing : routings) routing.free();
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }

  // Prefill: 8192 tokens × top 16, bf16 y.
  {
    const int tokens = 8192, slots = tokens * kTopK;
    const DeviceRouting routing = random_routing(tokens, rng);
    __nv_bfloat16* x = k3::bench::device_normal_bf16(size_t(tokens) * kIn, 0.0f, 1.0f, 100 + tokens);
    __nv_bfloat16* y = device_alloc<__nv_bfloat16>(size_t(slots) * kOut, 0);
    const Mxfp4GroupedAlgorithm automatic = k3::kernels::mxfp4_grouped_algorithm(w, routing.view());
    for (const Mxfp4GroupedAlgorithm algorithm : kPrefillAlgorithms) {
      Result r{fmt::format("mxfp4_grouped_{}{} w1 3072x3584 prefill T={} top 16 of 896 ({} distinct experts)",
                           algorithm_name(algorithm), algorithm == automatic ? " (automatic)" : "", tokens,
                           routing.distinct_experts),
               routing.distinct_experts * kExpertBytes + tokens * kIn * 2.0 + slots * kOut * 2.0,
               2.0 * slots * kOut * kIn};
      if (!session.wants(r.name)) continue;
      r.cls = EfficiencyClass::grouped_gemm;
      r.median_us = time_us(
          [&](int) {
            CUDA_CHECK(k3::kernels::mxfp4_grouped_bf16_to_bf16(w, routing.view(), x, kIn, tokens, y, kOut, nullptr,
                                                               algorithm));
          },
          repeats);
      r.roofline_us = session.roofline_us(r.flops, r.bytes, EfficiencyClass::grouped_gemm, k3::ComputeType::bf16);
      results.push_back(r);
    }
    routing.free();
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }

  CUDA_CHECK(cudaFree(packed));
  CUDA_CHECK(cudaFree(scales));
  at_engine_shapes(session, rng, results);
  session.print(results, fmt::format("\"bf16_peak_flops_per_s\": {:.4g}", session.hw.peak(k3::ComputeType::bf16)));
  return 0;
}
