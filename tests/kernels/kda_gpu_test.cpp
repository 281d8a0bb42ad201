// KDA decode step and pre-processing beside their op cases (tests/kernels/op_cases/kda_cases.cpp,
// kda_preprocess_cases.cpp): argument rejection.
#include "gpu_harness.h"
#include "kernels/kda_decode.h"
#include "kernels/kda_preprocess.h"

#include <cmath>

namespace k3::gpu_test {
namespace {

// ---- Decode step (its comparisons against ref::kda_recurrent: tests/kernels/op_cases/kda_cases.cpp) ----

using kernels::KdaDecodeAlgorithm;

TEST(GpuKda, DecodeStepRejectsUnsupportedShapes) {
  // Argument checks come before any launch, so they hold (and run) without a device.
  for (int d : {0, 8, 24, 136, 256})
    EXPECT_EQ(kernels::kda_decode_step_f32state(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 4, d,
                                                nullptr),
              cudaErrorInvalidValue)
        << "d " << d;
  EXPECT_EQ(kernels::kda_decode_step_bf16state(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 0, 128,
                                               nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_decode_step_bf16state(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 96,
                                               128, nullptr),
            cudaSuccess);
  // The split-key version needs d a multiple of 32 (automatic then takes column_per_thread).
  for (int d : {16, 48, 80, 112})
    for (KdaDecodeAlgorithm a : {KdaDecodeAlgorithm::column_pair_split_key})
      EXPECT_EQ(kernels::kda_decode_step_f32state(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 4,
                                                  d, nullptr, a),
                cudaErrorInvalidValue)
          << "d " << d;
}

// ---- Pre-processing (its comparisons against the reference: tests/kernels/op_cases/kda_preprocess_cases.cpp) ----

TEST(GpuKda, PreprocessRejectsInvalidArguments) {
  // Argument checks come before any launch, so they hold (and run) without a device.
  const auto bounded = [](float lb, int d, int kernel) {
    return kernels::kda_preprocess_bounded_sigmoid_gate(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                        lb, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 4, d,
                                                        kernel, nullptr);
  };
  EXPECT_EQ(bounded(0.0f, 16, 4), cudaErrorInvalidValue);  // a bounded gate needs lb < 0
  EXPECT_EQ(bounded(NAN, 16, 4), cudaErrorInvalidValue);
  EXPECT_EQ(bounded(-5.0f, 0, 4), cudaErrorInvalidValue);
  EXPECT_EQ(bounded(-5.0f, 2048, 4), cudaErrorInvalidValue);
  EXPECT_EQ(bounded(-5.0f, 16, 0), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_preprocess_softplus_gate(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                  nullptr, nullptr, nullptr, nullptr, nullptr, 0, 4, 16, 4, nullptr),
            cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
