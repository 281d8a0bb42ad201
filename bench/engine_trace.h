// A synthetic trace shaped like the engine's decode traces (bench/results/*-engine-traces-*): kernels with
// real kernel names (40 to 450 characters), attributed to per-layer ops (`op`, `op_instance`), replayed from
// a CUDA graph (`graph_node`), on 2 streams of device 0. Used by the trace read and write benchmarks.
#pragma once

#include "profiler/trace/trace.h"

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace k3::bench {

inline profiler::Trace engine_like_trace(std::size_t kernels) {
  struct KernelOfOp {
    const char* op;  // without the layer prefix
    const char* kernel;
  };
  static constexpr std::array<KernelOfOp, 8> kLayer = {{
      {"attn_norm",
       "void k3::kernels::(anonymous namespace)::rmsnorm_row_in_registers<__nv_bfloat16, 4>(float const*, "
       "long, __nv_bfloat16 const*, float, __nv_bfloat16*, long, long)"},
      {"kda.gate_proj", "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_splitK_TNT"},
      {"kda.gate_proj",
       "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, float, "
       "__nv_bfloat16, __nv_bfloat16, true, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*, "
       "__nv_bfloat16 const*, float*, __nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, float const*, "
       "__nv_bfloat16*, void*, long, float*, int*, float*, float*, float const*, float const*, float const*, float "
       "const*, float const*)"},
      {"kda.recurrent",
       "void k3::kernels::(anonymous namespace)::kda_decode_column_per_thread<128, float>(float "
       "const*, float const*, float const*, float const*, float const*, float*, float*)"},
      {"mla.attn_decode",
       "void k3::kernels::(anonymous namespace)::mla_decode_wgmma_cluster_split_kv<false, "
       "4>(__nv_bfloat16 const*, __nv_bfloat16 const*, int const*, int const*, float, int, int, "
       "int, int, int, float*, float2*, float*, CUtensorMap_st, int)"},
      {"moe.router",
       "k3::kernels::(anonymous namespace)::moe_route_block_per_token(float const*, float const*, int, "
       "int, float, int*, float*)"},
      {"moe.experts",
       "void k3::kernels::mxfp4_detail::(anonymous namespace)::mxfp4_grouped_gemv_tiled<float>(k3::"
       "kernels::Mxfp4ExpertWeights, k3::kernels::ExpertRouting, __nv_bfloat16 const*, long, long, "
       "float*, long, unsigned int)"},
      {"residual",
       "k3::kernels::(anonymous namespace)::add_kernel(__nv_bfloat16 const*, __nv_bfloat16 const*, "
       "__nv_bfloat16*, long)"},
  }};
  constexpr int kLayers = 61;
  profiler::Trace t;
  t.reserve(kernels);
  t.metadata["source"] = "synthetic engine-like trace";
  t.metadata["gpu"] = "NVIDIA H200";
  std::int64_t now_ns = 1'700'000'000'000'000'000;
  for (std::size_t i = 0; i < kernels; ++i) {
    const std::size_t in_step = i % (kLayers * kLayer.size());
    const KernelOfOp& k = kLayer[in_step % kLayer.size()];
    const std::int64_t duration_ns = 1'000 + static_cast<std::int64_t>((i * 7'919) % 40'000);
    t.add(profiler::Event{profiler::EventKind::kernel, k.kernel, now_ns, now_ns + duration_ns, 0,
                          in_step % kLayer.size() == 6 ? 14 : 13, profiler::kNone, i + 1, 1 + in_step, 0,
                          fmt::format("L{:03d}.{}", 1 + in_step / kLayer.size(), k.op),
                          static_cast<std::int64_t>(i / (kLayers * kLayer.size()))});
    now_ns += duration_ns + 1'237;
  }
  t.sort();
  return t;
}

}  // namespace k3::bench
