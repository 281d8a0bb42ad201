// The session library holds the GPU engine exactly where the build has CUDA: a CUDA build whose `k3perf run` fell
// back to "no GPU" (a configuration that lost the engine) fails here, on any machine.
#include "engine/session/run_session.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// A rank that routes fewer decode tokens than the busiest rank says so (its step is not the deployment's), in the
// text and the JSON; the busiest rank does not.
TEST(RunSession, ARankWithoutItsShareOfTokensSaysSo) {
  runtime::RunSummary s;
  s.rank = "rank 0 of 16";
  s.options.batch = 1;
  s.decode_routed_tokens = 0;
  s.decode_routed_tokens_max = 1;
  EXPECT_NE(summary_text(s).find("this rank routes 0 of the decode step's 1 tokens, the busiest rank 1"),
            std::string::npos)
      << summary_text(s);
  const auto j = nlohmann::json::parse(summary_json(s));
  EXPECT_EQ(j["rank"]["decode_routed_tokens"], 0);
  EXPECT_EQ(j["rank"]["decode_routed_tokens_max"], 1);
  s.decode_routed_tokens = 1;
  EXPECT_EQ(summary_text(s).find("this rank routes"), std::string::npos) << summary_text(s);
}

}  // namespace
}  // namespace k3::session
