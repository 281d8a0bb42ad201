// Embedding gather against the table's rows: exact copies, strided rows, and ids outside [0, vocab)
// giving zero rows and raising the error flag.
#include "gpu_harness.h"
#include "kernels/embedding.h"

#include <climits>

namespace k3::gpu_test {
namespace {

struct Case {
  int64_t vocab, width, table_pad, y_pad;
  std::vector<int32_t> ids;  // empty: 7 random valid ids
  bool has_invalid_id;
};

TEST(GpuEmbedding, GathersRowsAndFlagsInvalidIds) {
  const Case cases[] = {
      {1000, 7168, 0, 0, {}, false},
      {163, 1000, 3, 5, {0, 162, 5, 5, 77}, false},
      {50, 64, 1, 0, {-1, 0, 50, 49, INT32_MIN, INT32_MAX, 3}, true},
      {50, 64, 0, 8, {-1, 0, 50, 49, 3}, true},  // 16-byte copies with invalid ids among them
  };
  std::mt19937 rng(20261201);
  for (const Case& c : cases) {
    std::vector<int32_t> ids = c.ids;
    if (ids.empty()) {
      std::uniform_int_distribution<int32_t> pick(0, int32_t(c.vocab - 1));
      for (int i = 0; i < 7; ++i) ids.push_back(pick(rng));
    }
    const auto tokens = int64_t(ids.size());
    const int64_t table_stride = c.width + c.table_pad, y_stride = c.width + c.y_pad;
    const ref::Matrix table = round_to_bf16(random_matrix(c.vocab, table_stride, rng, -2.0f, 2.0f));
    ref::Matrix expected = ref::Matrix::Zero(tokens, c.width);
    for (int64_t t = 0; t < tokens; ++t) {
      if (ids[t] >= 0 && ids[t] < c.vocab) expected.row(t) = table.row(ids[t]).leftCols(c.width);
    }
    K3_REQUIRE_GPU();
    DeviceBuffer<__nv_bfloat16> dtable(to_bf16(table));
    DeviceBuffer<int32_t> dids(ids);
    DeviceBuffer<int> flag(std::vector<int>{0});
    {
      DeviceBuffer<__nv_bfloat16> dy(tokens * y_stride);
      CUDA_CHECK(kernels::embedding_gather_bf16(dtable.get(), table_stride, c.vocab, dids.get(), tokens, dy.get(),
                                                y_stride, c.width, flag.get(), nullptr));
      const ref::Matrix got = from_bf16(dy.download(), tokens, y_stride).leftCols(c.width);
      ASSERT_TRUE(got.allFinite()) << c.vocab << "x" << c.width;
      EXPECT_EQ((got - expected).cwiseAbs().maxCoeff(), 0.0f) << c.vocab << "x" << c.width;
      EXPECT_EQ(flag.download()[0], c.has_invalid_id ? 1 : 0) << c.vocab << "x" << c.width;
    }
    {
      // Without a flag: the same rows, nothing else written.
      DeviceBuffer<__nv_bfloat16> dy(tokens * y_stride);
      CUDA_CHECK(kernels::embedding_gather_bf16(dtable.get(), table_stride, c.vocab, dids.get(), tokens, dy.get(),
                                                y_stride, c.width, nullptr, nullptr));
      const ref::Matrix got = from_bf16(dy.download(), tokens, y_stride).leftCols(c.width);
      ASSERT_TRUE(got.allFinite());
      EXPECT_EQ((got - expected).cwiseAbs().maxCoeff(), 0.0f);
    }
  }
}

// Argument checks happen on the host before any launch, so they run without a GPU too.
TEST(GpuEmbedding, RejectsBadArguments) {
  alignas(16) static __nv_bfloat16 table[64], y[64];
  static int32_t ids[1];
  EXPECT_EQ(kernels::embedding_gather_bf16(table, 8, 0, ids, 1, y, 8, 8, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::embedding_gather_bf16(table, 4, 8, ids, 1, y, 8, 8, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::embedding_gather_bf16(table, 8, 8, ids, -1, y, 8, 8, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::embedding_gather_bf16(table, 8, 8, ids, 0, y, 8, 8, nullptr, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
