// The session library holds the GPU engine exactly where the build has CUDA: a CUDA build whose `k3perf run` fell
// back to "no GPU" (a configuration that lost the engine) fails here, on any machine.
#include "engine/session/run_session.h"

#include <gtest/gtest.h>

namespace k3::session {
namespace {

TEST(RunSession, HoldsTheEngineExactlyInCudaBuilds) {
#ifdef K3PERF_TEST_CUDA_BUILD
  EXPECT_TRUE(engine_built()) << "a CUDA build linked the session library without the engine";
#else
  EXPECT_FALSE(engine_built());
  std::string why;
  EXPECT_FALSE(gpu_available(&why));
  EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
#endif
}

}  // namespace
}  // namespace k3::session
