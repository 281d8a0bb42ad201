// The op families of the table (one <family>_cases.cpp each); op_cases.cpp concatenates them.
#pragma once

#include "tests/kernels/op_cases/op_case.h"

#include <vector>

namespace k3::gpu_test {

std::vector<OpCase> rmsnorm_cases();
std::vector<OpCase> kda_decode_cases();
std::vector<OpCase> kda_gate_proj_cases();
std::vector<OpCase> mla_absorb_cases();
std::vector<OpCase> moe_routing_cases();  // moe_cases.cpp: router, bucketing, combine
std::vector<OpCase> attnres_cases();
std::vector<OpCase> kda_preprocess_cases();
std::vector<OpCase> kda_output_gate_cases();
std::vector<OpCase> sampling_cases();
std::vector<OpCase> elementwise_cases();
std::vector<OpCase> gather_cases();  // embedding and gather_rows
std::vector<OpCase> situ_glu_cases();
std::vector<OpCase> gemm_cases();
std::vector<OpCase> kda_chunk_cases();
std::vector<OpCase> random_fill_cases();
std::vector<OpCase> mla_latent_cache_cases();
std::vector<OpCase> mla_attention_cases();  // decode and prefill
std::vector<OpCase> mxfp4_cases();

}  // namespace k3::gpu_test
