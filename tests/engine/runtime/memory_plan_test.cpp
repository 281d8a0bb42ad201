// The runtime's memory plan (the exact sizes of what it allocates, engine/runtime/run_loop.cpp) and its refusal:
// the device, what is needed, what is free and every item, largest first.
#include "engine/runtime/memory_plan.h"
#include "core/error.h"

#include <gtest/gtest.h>

namespace k3::runtime {
namespace {

TEST(MemoryPlan, RefusesWithWhatItNeeds) {
  MemoryPlan p;
  p.items = {{"activation workspace (4096-token chunks, batch 1)", 2ull << 30},
             {"weights (device layout, MXFP4 experts packed)", 1500ull << 30},
             {"MLA pages and KDA state slots (1 sequences x 4096 tokens)", 1ull << 30}};
  EXPECT_EQ(p.total_bytes(), 1503ull << 30);
  EXPECT_NO_THROW(require_fits(p, p.total_bytes(), "test GPU"));
  try {
    require_fits(p, 141ull << 30, "NVIDIA H200");
    ADD_FAILURE() << "a 1.5 TB model fitted in 141 GiB";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("does not fit on NVIDIA H200"), std::string::npos) << msg;
    EXPECT_NE(msg.find("it needs 1503.000 GiB, 141.000 GiB are free"), std::string::npos) << msg;
    const std::size_t weights = msg.find("weights (device layout"), workspace = msg.find("activation workspace"),
                      cache = msg.find("MLA pages");
    ASSERT_NE(weights, std::string::npos) << msg;
    EXPECT_LT(weights, workspace) << msg;  // largest first
    EXPECT_LT(workspace, cache) << msg;
    EXPECT_NE(msg.find("1500.000 GiB"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace k3::runtime
