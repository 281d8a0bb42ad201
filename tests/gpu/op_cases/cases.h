// The op families of the table (one <family>_cases.cpp each); op_cases.cpp concatenates them.
#pragma once

#include "tests/gpu/op_cases/op_case.h"

#include <vector>

namespace k3::gpu_test {

std::vector<OpCase> rmsnorm_cases();
std::vector<OpCase> kda_decode_cases();
std::vector<OpCase> kda_gate_proj_cases();
std::vector<OpCase> mla_absorb_cases();
std::vector<OpCase> moe_routing_cases();     // perf only (perf_only_cases.cpp)
std::vector<OpCase> attnres_cases();         // perf only
std::vector<OpCase> kda_preprocess_cases();  // perf only
std::vector<OpCase> kda_output_gate_cases();
std::vector<OpCase> sampling_cases();

}  // namespace k3::gpu_test
