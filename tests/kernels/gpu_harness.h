// Plain GPU kernel tests beside the op table (tests/kernels/op_cases/op_case.h says how to add a case to the table):
// the device data helpers, and K3_REQUIRE_GPU, which skips a test's GPU side where no CUDA device is present.
#pragma once

#include "tests/kernels/op_cases/device_data.h"
#include "tests/kernels/op_cases/op_case.h"

#include <gtest/gtest.h>

#include <string>

namespace k3::gpu_test {

// The checks a case's check function recorded (tests/kernels/op_cases/op_case.h), as GoogleTest expectations.
inline void expect_checks(const Checks& checks, const std::string& label) {
  for (const Check& c : checks.all()) EXPECT_TRUE(c.passed) << label << ": " << c.what << ": " << c.detail;
}

}  // namespace k3::gpu_test

#define K3_REQUIRE_GPU() \
  if (!::k3::gpu_test::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU side skipped"
