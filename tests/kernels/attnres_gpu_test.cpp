// Block AttnRes mixer beside its op cases (tests/kernels/op_cases/attnres_cases.cpp: every shape and algorithm against
// ref::attnres_mix + ref::rmsnorm): argument rejection.
#include "gpu_harness.h"
#include "kernels/attnres_mix.h"

namespace k3::gpu_test {
namespace {

// Argument checks happen on the host before any launch, so they run without a GPU too.
TEST(GpuAttnResMix, RejectsBadArguments) {
  alignas(16) static __nv_bfloat16 v[64], w[64], out[64];
  kernels::AttnResCandidates list;
  const auto call = [&](const kernels::AttnResCandidates& l, int64_t tokens, int64_t width) {
    return kernels::attnres_mix_rmsnorm_bf16(l, w, w, 1e-5f, w, 1e-5f, out, 8, out, 8, tokens, width, nullptr);
  };
  EXPECT_EQ(call(list, 1, 8), cudaErrorInvalidValue);  // no candidates
  list.count = kernels::kAttnResMaxCandidates + 1;
  EXPECT_EQ(call(list, 1, 8), cudaErrorInvalidValue);
  list.count = 2;
  list.rows[0] = v;
  list.row_stride[0] = 8;
  EXPECT_EQ(call(list, 1, 8), cudaErrorInvalidValue);  // candidate 1 unset
  list.rows[1] = v;
  list.row_stride[1] = 4;
  EXPECT_EQ(call(list, 1, 8), cudaErrorInvalidValue);  // stride below the width
  list.row_stride[1] = 8;
  EXPECT_EQ(call(list, 1, 16), cudaErrorInvalidValue);  // output strides below the width
  EXPECT_EQ(call(list, 0, 8), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
