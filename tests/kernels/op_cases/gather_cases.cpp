// Row gathers against a host gather: embedding_gather_bf16 (exact copies of the table's rows, strided rows, ids
// outside [0, vocab) giving zero rows and raising the error flag, also without a flag) and gather_rows_bf16 (exact
// copies of the picked rows — repeats, any order, strided source and destination — zero rows for indices outside
// the source, destination padding left untouched; 16-byte chunks where widths and strides allow, single elements
// elsewhere).
#include "kernels/embedding.h"
#include "kernels/gather_rows.h"
#include "tests/kernels/op_cases/cases.h"

#include <climits>
#include <limits>

namespace k3::gpu_test {
namespace {

// The index lists of the shapes' "ids" dimension; an empty list: `random_ids` random valid indices.
const std::vector<int32_t> kIdLists[] = {
    {},
    {0, 162, 5, 5, 77},
    {-1, 0, 50, 49, INT32_MIN, INT32_MAX, 3},
    {-1, 0, 50, 49, 3},
    {16, 0, 5, 5, 5, 9, 1},
    {-1, 0, 40, 39, INT32_MIN, INT32_MAX, 3},
    {8, 7, 6, 5, 4, 3, 2, 1, 0},
    {-1, 49, 0, 60, 7, 7},
};

std::vector<int32_t> ids_of(const Shape& s, int64_t rows, int random_ids, std::mt19937& rng) {
  std::vector<int32_t> ids = kIdLists[s["ids"]];
  if (ids.empty()) {
    std::uniform_int_distribution<int32_t> pick(0, int32_t(rows - 1));
    for (int i = 0; i < random_ids; ++i) ids.push_back(pick(rng));
  }
  return ids;
}

// rows[i] of src (its first `width` columns), zero where rows[i] is outside [0, src.rows()).
ref::Matrix host_gather(const ref::Matrix& src, const std::vector<int32_t>& rows, int64_t width) {
  ref::Matrix out = ref::Matrix::Zero(Eigen::Index(rows.size()), width);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= 0 && rows[i] < src.rows()) out.row(Eigen::Index(i)) = src.row(rows[i]).leftCols(width);
  }
  return out;
}

// The flag of embedding_gather_bf16: given (raised on an invalid id) or null (nothing else written).
enum class Flag { given, none };

OpCase embedding_case() {
  OpCase c{"embedding_gather_bf16", OpKind::embedding};
  // vocab, width, table_pad, y_pad, ids (kIdLists; the last shape: 16-byte copies with invalid ids among them)
  const int64_t dims[][5] = {{1000, 7168, 0, 0, 0}, {163, 1000, 3, 5, 1}, {50, 64, 1, 0, 2}, {50, 64, 0, 8, 3}};
  for (const auto& d : dims) {
    c.shapes.push_back(shape({{"vocab", d[0]}, {"width", d[1]}, {"table_pad", d[2]}, {"y_pad", d[3]}, {"ids", d[4]}}));
  }
  c.variants = {variant(Flag::given, "flag"), variant(Flag::none, "no_flag")};
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    const int64_t vocab = s["vocab"], width = s["width"];
    const int64_t table_stride = width + s["table_pad"], y_stride = width + s["y_pad"];
    const std::vector<int32_t> ids = ids_of(s, vocab, 7, rng);
    const ref::Matrix table = round_to_bf16(random_matrix(vocab, table_stride, rng, -2.0f, 2.0f));
    const ref::Matrix expected = host_gather(table, ids, width);
    bool has_invalid_id = false;
    for (const int32_t id : ids) has_invalid_id |= id < 0 || id >= vocab;
    return [=](const Variant& v, Checks& gpu) {
      const auto tokens = int64_t(ids.size());
      DeviceBuffer<__nv_bfloat16> dtable(to_bf16(table)), dy(size_t(tokens * y_stride));
      DeviceBuffer<int32_t> dids(ids);
      DeviceBuffer<int> flag(std::vector<int>{0});
      const bool with_flag = algorithm_of<Flag>(v) == Flag::given;
      CUDA_CHECK(kernels::embedding_gather_bf16(dtable.get(), table_stride, vocab, dids.get(), tokens, dy.get(),
                                                y_stride, width, with_flag ? flag.get() : nullptr, nullptr));
      const ref::Matrix got = from_bf16(dy.download(), tokens, y_stride).leftCols(width);
      gpu.expect(got.allFinite(), "every row written");
      gpu.expect(got.allFinite() && (got - expected).cwiseAbs().maxCoeff() == 0.0f, "rows copied exactly");
      if (with_flag) gpu.equal("error flag", flag.download()[0], has_invalid_id ? 1 : 0);
      // One rank's rows of a vocabulary-parallel table, [vocab / 3, 2 vocab / 3): the others' ids give zero rows.
      const int64_t first = vocab / 3, held = vocab / 3;
      DeviceBuffer<__nv_bfloat16> dshard(to_bf16(table.middleRows(first, held)));
      DeviceBuffer<int> shard_flag(std::vector<int>{0});
      CUDA_CHECK(kernels::embedding_gather_rows_bf16(dshard.get(), table_stride, vocab, first, held, dids.get(), tokens,
                                                     dy.get(), y_stride, width, shard_flag.get(), nullptr));
      const ref::Matrix got_shard = from_bf16(dy.download(), tokens, y_stride).leftCols(width);
      ref::Matrix expected_shard = expected;
      for (int64_t t = 0; t < tokens; ++t) {
        if (ids[t] < first || ids[t] >= first + held) expected_shard.row(Eigen::Index(t)).setZero();
      }
      gpu.expect(got_shard.allFinite() && (got_shard - expected_shard).cwiseAbs().maxCoeff() == 0.0f,
                 "a shard's rows copied, the others' zero");
      gpu.equal("error flag of a shard", shard_flag.download()[0], has_invalid_id ? 1 : 0);
    };
  };
  return c;
}

OpCase gather_rows_case() {
  OpCase c{"gather_rows_bf16", OpKind::elementwise};
  // src_rows, width, src_pad, dst_pad, ids: Kimi Linear's hidden width (37 random rows); repeats, strided, odd width;
  // indices outside [0, src_rows): zero rows; a width below a warp; 16-byte chunks at K3's latent, strided, zero rows.
  const int64_t dims[][5] = {
      {300, 2304, 0, 0, 0}, {17, 1000, 3, 5, 4}, {40, 64, 1, 0, 5}, {9, 7, 0, 2, 6}, {50, 3584, 8, 16, 7}};
  for (const auto& d : dims) {
    c.shapes.push_back(
        shape({{"src_rows", d[0]}, {"width", d[1]}, {"src_pad", d[2]}, {"dst_pad", d[3]}, {"ids", d[4]}}));
  }
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    const int64_t src_rows = s["src_rows"], width = s["width"], dst_pad = s["dst_pad"];
    const int64_t src_stride = width + s["src_pad"], dst_stride = width + dst_pad;
    const std::vector<int32_t> rows = ids_of(s, src_rows, 37, rng);
    const ref::Matrix src = round_to_bf16(random_matrix(src_rows, src_stride, rng, -3.0f, 3.0f));
    const ref::Matrix expected = host_gather(src, rows, width);
    return [=](const Variant&, Checks& gpu) {
      const auto count = int64_t(rows.size());
      DeviceBuffer<__nv_bfloat16> dsrc(to_bf16(src)), ddst(size_t(count * dst_stride));  // NaN: untouched shows
      DeviceBuffer<int32_t> drows(rows);
      CUDA_CHECK(kernels::gather_rows_bf16(dsrc.get(), src_stride, src_rows, drows.get(), count, ddst.get(), dst_stride,
                                           width, nullptr));
      const ref::Matrix all = from_bf16(ddst.download(), count, dst_stride);
      const ref::Matrix got = all.leftCols(width);
      gpu.expect(got.allFinite(), "every row written");
      gpu.expect(got.allFinite() && (got - expected).cwiseAbs().maxCoeff() == 0.0f, "rows copied exactly");
      if (dst_pad > 0) gpu.expect(all.rightCols(dst_pad).array().isNaN().all(), "padding left untouched");
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> gather_cases() { return {embedding_case(), gather_rows_case()}; }

}  // namespace k3::gpu_test
