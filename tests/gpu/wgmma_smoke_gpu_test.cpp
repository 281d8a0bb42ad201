// Hopper wgmma operand forms (kernels/wgmma_tile_product.h) against fp64 products on random bf16 inputs: the
// descriptors and the SW128 layout of kernels/wgmma_sm90.h that mla_decode_wgmma builds on, one form at a time, so a
// layout mistake fails here as one named form. Reading the failures: ss_n64_k_major alone → the A descriptor;
// every K-major form → the K-major B descriptor or the swizzle; rs_n256_mn_major alone → the leading byte offset
// between 64-column blocks of an MN-major B; both MN-major forms → trans-b or the MN-major stride byte offset;
// ss_n96_k_major → a K-major B of 96 rows per block; ss_n96_mn_major → trans-a (an MN-major A) or an MN-major B whose
// last 64-column block is half filled (the forms of an MLA decode with tokens as M).
#include "gpu_harness.h"
#include "kernels/wgmma_tile_product.h"

#include <fmt/format.h>

#include <string>

namespace k3::gpu_test {
namespace {

using kernels::WgmmaTileForm;

const WgmmaTileForm kForms[] = {WgmmaTileForm::ss_n64_k_major,   WgmmaTileForm::rs_n64_k_major,
                                WgmmaTileForm::rs_n64_mn_major,   WgmmaTileForm::rs_n256_mn_major,
                                WgmmaTileForm::ss_n96_k_major,    WgmmaTileForm::ss_n96_mn_major};

std::string name(WgmmaTileForm f) {
  switch (f) {
    case WgmmaTileForm::ss_n64_k_major:
      return "ss_n64_k_major";
    case WgmmaTileForm::rs_n64_k_major:
      return "rs_n64_k_major";
    case WgmmaTileForm::rs_n64_mn_major:
      return "rs_n64_mn_major";
    case WgmmaTileForm::rs_n256_mn_major:
      return "rs_n256_mn_major";
    case WgmmaTileForm::ss_n96_k_major:
      return "ss_n96_k_major";
    case WgmmaTileForm::ss_n96_mn_major:
      return "ss_n96_mn_major";
  }
  return "?";
}

// d = A · Bᵀ (b [n, k]) or A · B (b [k, n]) in fp64, with A = a (a [64, k]) or aᵀ (a [k, 64]).
ref::Matrix product(const ref::Matrix& a, const ref::Matrix& b, bool b_k_major, bool a_k_major = true) {
  const ref::MatrixD ad = a_k_major ? ref::MatrixD(a.cast<double>()) : ref::MatrixD(a.cast<double>().transpose());
  const ref::MatrixD bd = b.cast<double>();
  return (b_k_major ? ref::MatrixD(ad * bd.transpose()) : ref::MatrixD(ad * bd)).cast<float>();
}

TEST(GpuWgmma, ShapesOfTheForms) {
  const auto k_major = kernels::wgmma_tile_shape(WgmmaTileForm::ss_n64_k_major);
  EXPECT_EQ(k_major.n, 64);
  EXPECT_EQ(k_major.k, 576);
  EXPECT_TRUE(k_major.b_k_major);
  const auto wide = kernels::wgmma_tile_shape(WgmmaTileForm::rs_n256_mn_major);
  EXPECT_EQ(wide.n, 256);
  EXPECT_EQ(wide.k, 64);
  EXPECT_FALSE(wide.b_k_major);
  EXPECT_TRUE(wide.a_k_major);
  const auto tokens_as_m = kernels::wgmma_tile_shape(WgmmaTileForm::ss_n96_mn_major);
  EXPECT_EQ(tokens_as_m.n, 96);
  EXPECT_EQ(tokens_as_m.k, 64);
  EXPECT_FALSE(tokens_as_m.b_k_major);
  EXPECT_FALSE(tokens_as_m.a_k_major);
}

TEST(GpuWgmma, TileProductsMatchDirectProducts) {
  std::mt19937 rng(20261215);
  struct Case {
    WgmmaTileForm form;
    ref::Matrix a, b, want;
  };
  std::vector<Case> cases;
  for (const WgmmaTileForm form : kForms) {
    const kernels::WgmmaTileShape s = kernels::wgmma_tile_shape(form);
    Case c{form, round_to_bf16(s.a_k_major ? random_matrix(64, s.k, rng) : random_matrix(s.k, 64, rng)),
           round_to_bf16(s.b_k_major ? random_matrix(s.n, s.k, rng) : random_matrix(s.k, s.n, rng)), {}};
    c.want = product(c.a, c.b, s.b_k_major, s.a_k_major);
    // CPU side: the layout matters, so the transposed reading of a square operand is a different product.
    if (s.n == s.k) {
      EXPECT_GT(normalized_error(product(c.a, c.b, !s.b_k_major, s.a_k_major), c.want), 0.5) << name(form);
    }
    if (s.k == 64) {
      EXPECT_GT(normalized_error(product(c.a, c.b, s.b_k_major, !s.a_k_major), c.want), 0.5) << name(form);
    }
    cases.push_back(std::move(c));
  }

  K3_REQUIRE_GPU();
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (!kernels::wgmma_device_supported(device)) GTEST_SKIP() << "wgmma needs compute capability 9.0 (sm_90a)";
  for (const Case& c : cases) {
    const kernels::WgmmaTileShape s = kernels::wgmma_tile_shape(c.form);
    DeviceBuffer<__nv_bfloat16> a(to_bf16(c.a)), b(to_bf16(c.b));
    DeviceBuffer<float> d(size_t(64) * s.n);  // NaN-poisoned: every element must be written
    CUDA_CHECK(kernels::wgmma_tile_product_bf16(c.form, a.get(), b.get(), d.get(), nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());
    const ref::Matrix got = from_f32(d.download(), 64, s.n);
    // bf16 inputs, fp32 accumulation: only the summation differs from fp64 (a layout mistake errs by O(1)).
    const double error = normalized_error(got, c.want);
    EXPECT_LE(error, 1e-4) << name(c.form);
    if (!(error <= 1e-4) && got.allFinite()) {
      const ref::Matrix diff = (got - c.want).cwiseAbs();
      Eigen::Index row = 0, col = 0;
      diff.maxCoeff(&row, &col);
      ADD_FAILURE() << name(c.form) << ": largest error at row " << row << " column " << col << ": got "
                    << got(row, col) << " want " << c.want(row, col);
    }
  }
}

TEST(GpuWgmma, RejectsUnalignedOperands) {
  const auto* odd = reinterpret_cast<const __nv_bfloat16*>(uintptr_t(8));
  EXPECT_EQ(kernels::wgmma_tile_product_bf16(WgmmaTileForm::ss_n64_k_major, odd, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace k3::gpu_test
