// gather_rows against a host gather: exact copies of the picked rows (repeats, any order, strided source and
// destination), zero rows for indices outside the source, destination padding left untouched; both versions
// (16-byte chunks where widths and strides allow, single elements elsewhere).
#include "gpu_harness.h"
#include "kernels/gather_rows.h"

#include <climits>
#include <limits>

namespace k3::gpu_test {
namespace {

struct Case {
  int64_t src_rows, width, src_pad, dst_pad;
  std::vector<int32_t> rows;  // empty: 37 random valid indices
};

TEST(GpuGatherRows, CopiesThePickedRowsExactly) {
  const Case cases[] = {
      {300, 2304, 0, 0, {}},                                     // Kimi Linear's hidden width
      {17, 1000, 3, 5, {16, 0, 5, 5, 5, 9, 1}},                  // repeats, strided, odd width
      {40, 64, 1, 0, {-1, 0, 40, 39, INT32_MIN, INT32_MAX, 3}},  // outside [0, src_rows): zero rows
      {9, 7, 0, 2, {8, 7, 6, 5, 4, 3, 2, 1, 0}},                 // width below a warp
      {50, 3584, 8, 16, {-1, 49, 0, 60, 7, 7}},                  // 16-byte chunks: K3's latent, strided, zero rows
  };
  std::mt19937 rng(20261202);
  for (const Case& c : cases) {
    std::vector<int32_t> rows = c.rows;
    if (rows.empty()) {
      std::uniform_int_distribution<int32_t> pick(0, int32_t(c.src_rows - 1));
      for (int i = 0; i < 37; ++i) rows.push_back(pick(rng));
    }
    const auto count = int64_t(rows.size());
    const int64_t src_stride = c.width + c.src_pad, dst_stride = c.width + c.dst_pad;
    const ref::Matrix src = round_to_bf16(random_matrix(c.src_rows, src_stride, rng, -3.0f, 3.0f));
    ref::Matrix expected = ref::Matrix::Zero(count, c.width);
    for (int64_t i = 0; i < count; ++i) {
      if (rows[i] >= 0 && rows[i] < c.src_rows) expected.row(i) = src.row(rows[i]).leftCols(c.width);
    }
    K3_REQUIRE_GPU();
    DeviceBuffer<__nv_bfloat16> dsrc(to_bf16(src));
    DeviceBuffer<int32_t> drows(rows);
    // The destination starts as NaN so a row or padding the kernel should not touch shows up.
    const ref::Matrix poison = ref::Matrix::Constant(count, dst_stride, std::numeric_limits<float>::quiet_NaN());
    DeviceBuffer<__nv_bfloat16> ddst(to_bf16(poison));
    CUDA_CHECK(kernels::gather_rows_bf16(dsrc.get(), src_stride, c.src_rows, drows.get(), count, ddst.get(), dst_stride,
                                         c.width, nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());
    const ref::Matrix all = from_bf16(ddst.download(), count, dst_stride);
    const ref::Matrix got = all.leftCols(c.width);
    ASSERT_TRUE(got.allFinite()) << c.src_rows << "x" << c.width;
    EXPECT_EQ((got - expected).cwiseAbs().maxCoeff(), 0.0f) << c.src_rows << "x" << c.width;
    if (c.dst_pad > 0) {
      EXPECT_TRUE(all.rightCols(c.dst_pad).array().isNaN().all()) << "padding was written";
    }
  }
}

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
