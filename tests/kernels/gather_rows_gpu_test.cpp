// gather_rows beside its op case (tests/kernels/op_cases/gather_cases.cpp: exact rows, repeats, strides, zero rows for
// indices outside the source, padding untouched): argument rejection.
#include "gpu_harness.h"
#include "kernels/gather_rows.h"

namespace k3::gpu_test {
namespace {

// Argument checks happen on the host before any launch, so they run without a GPU too.
TEST(GpuGatherRows, RejectsBadArguments) {
  alignas(16) static __nv_bfloat16 src[64], dst[64];
  static int32_t rows[1];
  EXPECT_EQ(kernels::gather_rows_bf16(src, 8, 0, rows, 1, dst, 8, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::gather_rows_bf16(src, 4, 8, rows, 1, dst, 8, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::gather_rows_bf16(src, 8, 8, rows, 1, dst, 4, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::gather_rows_bf16(src, 8, 8, rows, -1, dst, 8, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::gather_rows_bf16(src, 8, 8, nullptr, 1, dst, 8, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::gather_rows_bf16(src, 8, 8, rows, 0, dst, 8, 8, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
