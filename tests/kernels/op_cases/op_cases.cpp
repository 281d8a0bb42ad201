#include "tests/kernels/op_cases/cases.h"

namespace k3::gpu_test {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> table = [] {
    std::vector<OpCase> all;
    for (auto family :
         {rmsnorm_cases, kda_decode_cases, kda_gate_proj_cases, mla_absorb_cases, moe_routing_cases, attnres_cases,
          kda_preprocess_cases, kda_output_gate_cases, sampling_cases, elementwise_cases, gather_cases, situ_glu_cases,
          gemm_cases, kda_chunk_cases, random_fill_cases, mla_latent_cache_cases, mla_attention_cases, mxfp4_cases}) {
      for (OpCase& c : family()) all.push_back(std::move(c));
    }
    return all;
  }();
  return table;
}

}  // namespace k3::gpu_test
