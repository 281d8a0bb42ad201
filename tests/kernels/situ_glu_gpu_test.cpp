// SiTU-GLU and SiLU-GLU beside their op cases (tests/kernels/op_cases/situ_glu_cases.cpp: every shape and input type
// against ref::situ and ref::silu): the four-element path equal to the one-element path bit for bit, and argument
// rejection.
#include "gpu_harness.h"
#include "kernels/situ_glu.h"

#include <cstring>
#include <vector>

namespace k3::gpu_test {
namespace {

constexpr float kBeta = 4.0f, kLinearBeta = 25.0f;

TEST(GpuSituGlu, FourElementGroupsEqualOneElementAtATimeBitForBit) {
  // The same rows laid out with a stride of 2I (four-element groups) and of 2I + 1 (one element at a time) must give
  // the same bf16 outputs, every bit: both paths run the same arithmetic per element.
  constexpr int64_t kTokens = 9, kIntermediate = 3072;
  std::mt19937 rng(20261130);
  const ref::Matrix rows = round_to_bf16(random_matrix(kTokens, 2 * kIntermediate, rng, -30.0f, 30.0f));
  ref::Matrix padded = ref::Matrix::Zero(kTokens, 2 * kIntermediate + 1);
  padded.leftCols(2 * kIntermediate) = rows;
  K3_REQUIRE_GPU();
  DeviceBuffer<float> grouped(to_f32(rows)), single(to_f32(padded));
  DeviceBuffer<__nv_bfloat16> out_grouped(kTokens * kIntermediate), out_single(kTokens * kIntermediate);
  for (const bool situ : {true, false}) {
    const auto run = [&](const DeviceBuffer<float>& in, int64_t stride, DeviceBuffer<__nv_bfloat16>& out) {
      return situ ? kernels::situ_glu_bf16(in.get(), stride, kBeta, kLinearBeta, out.get(), kIntermediate, kTokens,
                                           kIntermediate, nullptr)
                  : kernels::silu_glu_bf16(in.get(), stride, out.get(), kIntermediate, kTokens, kIntermediate, nullptr);
    };
    CUDA_CHECK(run(grouped, 2 * kIntermediate, out_grouped));
    CUDA_CHECK(run(single, 2 * kIntermediate + 1, out_single));
    const std::vector<__nv_bfloat16> a = out_grouped.download(), b = out_single.download();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(__nv_bfloat16)), 0) << (situ ? "situ" : "silu");
  }
}

TEST(GpuSituGlu, RejectsInvalidArguments) {
  K3_REQUIRE_GPU();
  DeviceBuffer<float> in(64);
  DeviceBuffer<__nv_bfloat16> out(64);
  EXPECT_EQ(kernels::situ_glu_bf16(in.get(), 8, 0.0f, kLinearBeta, out.get(), 4, 1, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::situ_glu_bf16(in.get(), 7, kBeta, kLinearBeta, out.get(), 4, 1, 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::silu_glu_bf16(in.get(), 8, out.get(), 3, 1, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::silu_glu_bf16(in.get(), 8, out.get(), 4, 0, 4, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
