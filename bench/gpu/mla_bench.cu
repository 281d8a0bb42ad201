// mla_bench: MLA attention kernels of kernels/ against the speed of light on the GPU it runs on (method and output:
// bench/gpu/bench_harness.h).
//   decode  mla_decode_paged_bf16, 96 heads, batch {1, 2, 4, 8} × context {8K, 32K, 128K, 1M}, and a TP16 … TP2 rank's
//           6, 12, 24 and 48 heads at batch {1, 8} × context {128K, 1M}, the cache in scattered
//           64-token pages; per cached token and head (576 + 512)·2 FLOPs, per cached token 1152 bytes. Each shape
//           is timed with every MlaDecodeAlgorithm: "mla_decode_register_q" is register_q (the default off compute
//           capability 9.0), "mla_decode_wgmma" is wgmma (only on compute capability 9.0), on the same buffers; each
//           name carries the algorithm's own split count.
//           "mla_decode_wgmma_alternating" is wgmma_alternating and "mla_decode_wgmma_cluster" wgmma_cluster (only on
//           compute capability 9.0, like wgmma); 6 and 12 heads also at batch 64 and 128K. Cache rows and q are random
//           normal (constant data runs faster). Per shape two floors, per launch in a CUDA graph, each with the
//           decode's plain_bound beside it: "cache_read_floor" a kernel that only reads the cache's pages through the
//           page table (bench/gpu/read_floor.h; its bytes are the cache's), and wgmma_cluster with the cache
//           "L2-resident" (every page-table entry in 16 pages, so the time is the kernel's on-chip work alone).
//   prefill mla_prefill_attention_bf16, 96 heads, 8K and 32K tokens, no prefix, every MlaPrefillAlgorithm but
//           automatic, on random normal q, k, v (constant ones keep every row at its first maximum); FLOPs counted
//           causal (half the square): heads · T²/2 · (192 + 128) · 2.
// Each result carries the sim roofline (EfficiencyClass::attention, bf16) and, under "plain_bound", the bound with
// the ceilings measured in the same run, max(FLOPs / measured bf16 GEMM rate, bytes / measured copy bandwidth), with
// the time over it; the GEMM rate is cuBLASLt's 8192 × 8192 × 8192 bf16 product on random normal data (constant or
// zero operands run faster), printed as measured_gemm_bf16_flops_per_s.
//
// Usage: mla_bench [--hardware scenarios/hardware/h200-sxm.yaml] [--repeats N]
//                  [--filter TEXT (names containing it, or any of its |-separated parts)]
#include "bench/gpu/bench_harness.h"
#include "bench/gpu/read_floor.h"
#include "engine/runtime/gemm_cublaslt.h"
#include "kernels/mla_decode_paged.h"
#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_cluster.h"
#include "kernels/mla_prefill.h"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

using k3::EfficiencyClass;
using k3::bench::device_alloc;
using k3::bench::device_normal_bf16;
using k3::bench::Result;
using k3::bench::time_us;

namespace {

constexpr int kHeads = 96;
constexpr int kPageTokens = 64;
constexpr double kDecodeFlopsPerTokenHead = (576.0 + 512.0) * 2.0;
constexpr double kCacheBytesPerToken = 576.0 * 2.0;
constexpr int kGraphLaunches = 8;   // decode launches per CUDA graph replay
constexpr int kResidentPages = 16;  // the L2-resident form's distinct pages (1.2 MB)

// The bf16 GEMM ceiling: median FLOP/s of cuBLASLt's 8192³ bf16 product over `repeats` launches, on normal(0, 1)
// operands generated on the device.
double measured_gemm_bf16_flops_per_s(int repeats) {
  constexpr int64_t n = 8192;
  __nv_bfloat16* a = device_normal_bf16(n * n, 0.0f, 1.0f, 1);
  __nv_bfloat16* b = device_normal_bf16(n * n, 0.0f, 1.0f, 2);
  __nv_bfloat16* c = device_alloc<__nv_bfloat16>(n * n, 0);
  k3::runtime::GemmRunner gemm;
  const double us =
      time_us([&](int) { CUDA_CHECK(gemm.bf16_to_bf16(a, n, b, nullptr, 1.0f, 0.0f, c, n, n, n, n, nullptr)); },
              std::min(repeats, 20));
  for (__nv_bfloat16* p : {a, b, c}) CUDA_CHECK(cudaFree(p));
  return 2.0 * n * n * n / (us * 1e-6);
}

}  // namespace

int main(int argc, char** argv) {
  const k3::bench::Session session(argc, argv);
  const int repeats = session.repeats;
  std::vector<Result> results;
  std::vector<double> plain_bound_us;
  const double gemm_flops_per_s = measured_gemm_bf16_flops_per_s(repeats);
  const auto plain_bound = [&](double flops, double bytes) {
    return std::max(flops / gemm_flops_per_s, bytes / session.copy_bytes_per_s) * 1e6;
  };

  // Decode: one set of (pages, page table, lengths, q, out, workspace) per rotation slot.
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  std::vector<std::pair<k3::kernels::MlaDecodeAlgorithm, const char*>> algorithms = {
      {k3::kernels::MlaDecodeAlgorithm::register_q, "mla_decode_register_q"}};
  if (k3::kernels::mla_decode_wgmma_supported(device))
    algorithms.emplace_back(k3::kernels::MlaDecodeAlgorithm::wgmma_alternating, "mla_decode_wgmma_alternating");
  if (k3::kernels::mla_decode_wgmma_supported(device))
    algorithms.emplace_back(k3::kernels::MlaDecodeAlgorithm::wgmma_cluster, "mla_decode_wgmma_cluster");
  std::mt19937 rng(20261214);
  struct DecodeShape {
    int heads, batch;
    int64_t context;
  };
  std::vector<DecodeShape> decode_shapes;
  for (int64_t context : {int64_t(8) << 10, int64_t(32) << 10, int64_t(128) << 10, int64_t(1) << 20}) {
    for (int batch : {1, 2, 4, 8}) decode_shapes.push_back({kHeads, batch, context});
  }
  // A TP16 / TP8 / TP4 / TP2 rank's heads (6, 12, 24, 48 of 96): the same cache bytes, fewer FLOPs.
  for (int heads : {6, 12, 24, 48}) {
    for (int64_t context : {int64_t(128) << 10, int64_t(1) << 20}) {
      for (int batch : {1, 8}) decode_shapes.push_back({heads, batch, context});
    }
  }
  for (int heads : {6, 12}) decode_shapes.push_back({heads, 64, int64_t(128) << 10});
  {
    for (const auto& [heads, batch, context] : decode_shapes) {
      const int pages_per_sequence = int(context / kPageTokens);
      const k3::kernels::MlaDecodeShape shape{batch, heads, kPageTokens, pages_per_sequence, context};
      const double cache_bytes = double(batch) * context * kCacheBytesPerToken;
      const double bytes = cache_bytes + double(batch) * heads * (576.0 * 2 + 512.0 * 4);
      const double flops = double(batch) * context * heads * kDecodeFlopsPerTokenHead;
      const int sets = session.rotation_for(bytes);
      const size_t pages = size_t(batch) * pages_per_sequence;
      const size_t workspace_bytes = k3::kernels::mla_decode_workspace_bytes(shape);
      struct Set {
        __nv_bfloat16 *cache, *q;
        int32_t *page_table, *lengths;
        float* out;
        void* workspace;
      };
      std::vector<Set> set(sets);
      for (Set& s : set) {
        s.cache = device_normal_bf16(pages * kPageTokens * 576, 0.0f, 1.0f, 0xC0FFEEu + (&s - set.data()));
        s.q = device_normal_bf16(size_t(batch) * heads * 576, 0.0f, 1.0f, 0xBEEFu + (&s - set.data()));
        s.out = device_alloc<float>(size_t(batch) * heads * 512, 0);
        s.workspace = device_alloc<uint8_t>(workspace_bytes, 0);
        std::vector<int32_t> ids(pages);  // scattered pages, as a paged cache holds them
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), rng);
        s.page_table = device_alloc<int32_t>(pages, 0);
        CUDA_CHECK(cudaMemcpy(s.page_table, ids.data(), pages * sizeof(int32_t), cudaMemcpyHostToDevice));
        const std::vector<int32_t> lengths(batch, int32_t(context));
        s.lengths = device_alloc<int32_t>(batch, 0);
        CUDA_CHECK(cudaMemcpy(s.lengths, lengths.data(), batch * sizeof(int32_t), cudaMemcpyHostToDevice));
      }
      for (const auto& [algorithm, kernel] : algorithms) {
        const int splits = k3::kernels::mla_decode_algorithm_splits(shape, algorithm);
        Result r{fmt::format("{} heads {} batch {} context {} splits {}", kernel, heads, batch, context, splits), bytes,
                 flops};
        if (!session.wants(r.name)) continue;
        r.cls = EfficiencyClass::attention;
        r.median_us = time_us(
            [&, algorithm = algorithm](int i) {
              const Set& s = set[i % sets];
              CUDA_CHECK(k3::kernels::mla_decode_paged_bf16(s.q, s.cache, s.page_table, s.lengths, 0.0721688f, shape,
                                                            s.out, s.workspace, workspace_bytes, nullptr, algorithm));
            },
            repeats);
        r.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::attention, k3::ComputeType::bf16);
        // The same launches replayed from a CUDA graph, as the decode step runs them: the host API's time per call
        // (tensor map, checks, two launches) is gone, leaving the kernels and the gaps between them.
        Result graph = r;
        graph.name = fmt::format("{}, per launch of {} in a CUDA graph", r.name, kGraphLaunches);
        int next = 0;
        graph.median_us = k3::bench::graph_us_per_launch(
            [&, algorithm = algorithm](cudaStream_t stream) {
              const Set& s = set[size_t(next++ % sets)];
              CUDA_CHECK(k3::kernels::mla_decode_paged_bf16(s.q, s.cache, s.page_table, s.lengths, 0.0721688f, shape,
                                                            s.out, s.workspace, workspace_bytes, stream, algorithm));
            },
            kGraphLaunches, std::min(repeats, 20));
        for (const Result& result : {r, graph}) {
          results.push_back(result);
          plain_bound_us.push_back(plain_bound(flops, bytes));
        }
      }
      // Two floors of the same shape, per launch in a CUDA graph beside the decode's bound (plain_bound):
      // what a kernel that only reads the cache's pages through the page table takes (bench/gpu/read_floor.h), and
      // wgmma_cluster with every page-table entry in 16 pages, so that its tiles come from the L2 and the time is
      // its on-chip work alone (tensor cores, shared memory, softmax, hand-offs).
      // (The cache's bytes do not depend on the heads: the 96-head rows' floors serve the rank's heads too.)
      uint32_t* sink = device_alloc<uint32_t>(size_t(k3::bench::read_floor_blocks()), 0);
      Result floor_row{fmt::format("cache_read_floor heads 96 batch {} context {}, per launch of {} in a CUDA graph",
                                   batch, context, kGraphLaunches),
                       cache_bytes, 0.0};
      if (heads == kHeads && session.wants(floor_row.name)) {
        int next = 0;
        floor_row.median_us = k3::bench::graph_us_per_launch(
            [&](cudaStream_t stream) {
              const Set& s = set[size_t(next++ % sets)];
              CUDA_CHECK(k3::bench::read_floor(s.cache, s.page_table, kPageTokens * int64_t(kCacheBytesPerToken),
                                               int64_t(pages), sink, stream));
            },
            kGraphLaunches, std::min(repeats, 20));
        floor_row.cls = EfficiencyClass::attention;
        floor_row.roofline_us =
            session.roofline_us(0.0, cache_bytes, EfficiencyClass::attention, k3::ComputeType::bf16);
        results.push_back(floor_row);
        plain_bound_us.push_back(plain_bound(flops, bytes));
      }
      CUDA_CHECK(cudaFree(sink));
      Result resident{fmt::format("mla_decode_wgmma_cluster heads 96 batch {} context {}, cache L2-resident ({} "
                                  "pages), per launch of {} in a CUDA graph",
                                  batch, context, kResidentPages, kGraphLaunches),
                      bytes, flops};
      if (heads == kHeads && k3::kernels::mla_decode_wgmma_cluster_runs(device) && session.wants(resident.name)) {
        std::vector<int32_t> ids(pages);
        for (size_t i = 0; i < pages; ++i) ids[i] = int32_t(i % kResidentPages);
        int32_t* resident_table = device_alloc<int32_t>(pages, 0);
        CUDA_CHECK(cudaMemcpy(resident_table, ids.data(), pages * sizeof(int32_t), cudaMemcpyHostToDevice));
        const Set& s = set[0];
        resident.median_us = k3::bench::graph_us_per_launch(
            [&](cudaStream_t stream) {
              CUDA_CHECK(k3::kernels::mla_decode_paged_bf16(s.q, s.cache, resident_table, s.lengths, 0.0721688f, shape,
                                                            s.out, s.workspace, workspace_bytes, stream,
                                                            k3::kernels::MlaDecodeAlgorithm::wgmma_cluster));
            },
            kGraphLaunches, std::min(repeats, 20));
        resident.cls = EfficiencyClass::attention;
        resident.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::attention, k3::ComputeType::bf16);
        results.push_back(resident);
        plain_bound_us.push_back(plain_bound(flops, bytes));
        CUDA_CHECK(cudaFree(resident_table));
      }
      for (Set& s : set) {
        CUDA_CHECK(cudaFree(s.cache));
        CUDA_CHECK(cudaFree(s.q));
        CUDA_CHECK(cudaFree(s.out));
        CUDA_CHECK(cudaFree(s.workspace));
        CUDA_CHECK(cudaFree(s.page_table));
        CUDA_CHECK(cudaFree(s.lengths));
      }
    }
  }

  // Prefill, no prefix: q, k [T, 96, 192], v and out [T, 96, 128]; large enough to need no rotation.
  for (int tokens : {8 << 10, 32 << 10}) {
    const size_t qk = size_t(tokens) * kHeads * 192, vo = size_t(tokens) * kHeads * 128;
    // Random normal operands: constant ones keep every row's maximum from the first tile on (and skip work that real
    // data does).
    __nv_bfloat16* q = k3::bench::device_normal_bf16(qk, 0.0f, 1.0f, 41);
    __nv_bfloat16* k = k3::bench::device_normal_bf16(qk, 0.0f, 1.0f, 42);
    __nv_bfloat16* v = k3::bench::device_normal_bf16(vo, 0.0f, 1.0f, 43);
    __nv_bfloat16* out = device_alloc<__nv_bfloat16>(vo, 0);
    const double bytes = 2.0 * (2.0 * qk + 2.0 * vo);
    const double flops = double(kHeads) * double(tokens) * double(tokens) / 2.0 * (192.0 + 128.0) * 2.0;
    using k3::kernels::MlaPrefillAlgorithm;
    for (const auto& [algorithm_value, label] :
         {std::pair{MlaPrefillAlgorithm::flash_q64, "flash_q64"},
          std::pair{MlaPrefillAlgorithm::flash_q128, "flash_q128"},
          std::pair{MlaPrefillAlgorithm::flash_q256, "flash_q256"}, std::pair{MlaPrefillAlgorithm::wgmma, "wgmma"}}) {
      const MlaPrefillAlgorithm algorithm = algorithm_value;
      Result r{fmt::format("mla_prefill_{} heads 96 tokens {} (causal FLOPs)", label, tokens), bytes, flops};
      if (!session.wants(r.name)) continue;
      r.cls = EfficiencyClass::attention;
      r.median_us = time_us(
          [&](int) {
            CUDA_CHECK(k3::kernels::mla_prefill_attention_bf16(q, k, v, tokens, tokens, kHeads, 0.0721688f, out,
                                                               nullptr, algorithm));
          },
          std::min(repeats, 20), 2);
      r.roofline_us = session.roofline_us(flops, bytes, EfficiencyClass::attention, k3::ComputeType::bf16);
      results.push_back(r);
      plain_bound_us.push_back(plain_bound(flops, bytes));
    }
    for (__nv_bfloat16* p : {q, k, v, out}) CUDA_CHECK(cudaFree(p));
  }

  std::string extra = "\"plain_bound\": [";
  for (size_t i = 0; i < results.size(); ++i)
    extra +=
        fmt::format("{}\n    {{\"op\": \"{}\", \"plain_bound_us\": {:.3f}, \"time_over_plain_bound\": {:.2f}}}",
                    i == 0 ? "" : ",", results[i].name, plain_bound_us[i], results[i].median_us / plain_bound_us[i]);
  extra += fmt::format("\n  ],\n  \"measured_gemm_bf16_flops_per_s\": {:.4g}", gemm_flops_per_s);
  session.print(results, extra);
  return 0;
}
