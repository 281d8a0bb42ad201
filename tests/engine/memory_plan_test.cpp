// The runtime's memory plan: sizes that follow from the model and the run shape, and a clear refusal.
#include "core/error.h"
#include "core/parameters.h"
#include "engine/runtime/memory_plan.h"
#include "sim/memory.h"

#include <gtest/gtest.h>

namespace k3::runtime {
namespace {

ModelConfig k3() { return load_model_config(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/kimi-k3.json"); }

uint64_t item(const MemoryPlan& p, const std::string& prefix) {
  for (const auto& i : p.items) {
    if (i.what.rfind(prefix, 0) == 0) return i.bytes;
  }
  ADD_FAILURE() << "no item " << prefix;
  return 0;
}

TEST(MemoryPlan, K3SizesFollowTheModel) {
  const ModelConfig m = k3();
  RunShape s;
  s.max_sequences = 4;
  s.max_context_tokens = 131072;
  const MemoryPlan p = plan_memory(m, s);
  // Weights: 2.7227 T routed parameters at 4.25 bits (packed + scales), the other 56.7 B in bf16; the few
  // fp32 tensors (conv, A_log, dt_bias, norms of KDA, router bias: ~30 MB) are within 1e-4 of that.
  const double expected = 2722740830208.0 * 4.25 / 8 + 2.0 * (2779484478208.0 - 2722740830208.0);
  EXPECT_NEAR(double(item(p, "weights")), expected, 1e-4 * expected);
  EXPECT_GT(double(item(p, "weights")), expected);
  // KV pages: exactly the simulator's bytes per token (24 layers x 1152 B) for whole pages.
  Precision prec;
  EXPECT_EQ(item(p, "MLA latent cache"), uint64_t(kv_bytes_per_token(m, prec)) * 131072 * 4);
  EXPECT_EQ(item(p, "KDA state slots"), uint64_t(kda_recurrent_state_bytes(m, prec)) * 4);
  // A context that is not a multiple of the page rounds up to whole pages.
  s.max_context_tokens = 131073;
  EXPECT_EQ(item(plan_memory(m, s), "MLA latent cache"), uint64_t(24) * 1152 * (131072 + 64) * 4);
}

TEST(MemoryPlan, RefusesWithWhatItNeeds) {
  RunShape s;
  const MemoryPlan p = plan_memory(k3(), s);
  EXPECT_NO_THROW(require_fits(p, p.total_bytes(), "test GPU"));
  try {
    require_fits(p, 141ull << 30, "NVIDIA H200");
    ADD_FAILURE() << "a 1.5 TB model fitted in 141 GiB";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("does not fit on NVIDIA H200"), std::string::npos) << msg;
    EXPECT_NE(msg.find("141.000 GiB are free"), std::string::npos) << msg;
    EXPECT_NE(msg.find("weights (as stored, MXFP4 experts packed)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("KDA state slots"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace k3::runtime
