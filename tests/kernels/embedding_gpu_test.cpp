// Embedding gather beside its op case (tests/kernels/op_cases/gather_cases.cpp: exact rows, strides, invalid ids and
// the error flag): argument rejection.
#include "gpu_harness.h"
#include "kernels/embedding.h"

namespace k3::gpu_test {
namespace {

// Argument checks happen on the host before any launch, so they run without a GPU too.
TEST(GpuEmbedding, RejectsBadArguments) {
  alignas(16) static __nv_bfloat16 table[64], y[64];
  static int32_t ids[1];
  EXPECT_EQ(kernels::embedding_gather_bf16(table, 8, 0, ids, 1, y, 8, 8, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::embedding_gather_bf16(table, 4, 8, ids, 1, y, 8, 8, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::embedding_gather_bf16(table, 8, 8, ids, -1, y, 8, 8, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::embedding_gather_bf16(table, 8, 8, ids, 0, y, 8, 8, nullptr, nullptr), cudaSuccess);
  // A shard must lie inside the vocabulary.
  EXPECT_EQ(kernels::embedding_gather_rows_bf16(table, 8, 8, 4, 5, ids, 1, y, 8, 8, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::embedding_gather_rows_bf16(table, 8, 8, 2, 0, ids, 1, y, 8, 8, nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace k3::gpu_test
