// The spec sweep as data (sim/spec/spec_sweep.h): the shipped defaults file, its errors naming file
// and key, and the sweep's rows against the step costs computed one by one.
#include "sim/spec/spec_sweep.h"

#include "core/atomic_file.h"
#include "core/op_graph.h"
#include "expect_input_error.h"
#include "sim/memory.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>

namespace k3 {
namespace {

namespace fs = std::filesystem;
using test::expect_input_error;

const std::string kData = std::string(K3PERF_SOURCE_DIR) + "/scenarios";
const std::string kDefaults = kData + "/spec/defaults.yaml";

TEST(SpecDefaults, ShippedFile) {
  const SpecDefaults d = load_spec_defaults(kDefaults);
  EXPECT_EQ(d.draft_tokens, 7);
  EXPECT_EQ(d.drafter.kind, DrafterKind::block_parallel);
  EXPECT_EQ(d.drafter.layers, 5);
  EXPECT_EQ(d.drafter.mlp_intermediate, 8192);
  EXPECT_EQ(d.rollback, RollbackKind::replay_inputs);
  const std::vector<std::pair<std::string, double>> seed = {{"coding", 4.73}, {"creative", 2.61}};
  EXPECT_EQ(d.profiles, seed);  // in file order
  EXPECT_TRUE(d.batches.empty());
  EXPECT_TRUE(d.contexts.empty());
}

class SpecDefaultsErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("k3perf-spec-defaults-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& text) {
    const std::string path = (dir_ / "defaults.yaml").string();
    write_file_atomically(path, text);
    return path;
  }
  fs::path dir_;
};

const std::string kValid = R"(draft_tokens: 4
drafter: {kind: autoregressive, layers: 2, mlp_intermediate: 1024}
rollback: copy_states
profiles: {fast: 3.5, slow: 1.5}
batches: [1, 16]
contexts: [0, 4096]
)";

TEST_F(SpecDefaultsErrors, AnotherFileOfTheSameShape) {
  const SpecDefaults d = load_spec_defaults(write(kValid));
  EXPECT_EQ(d.draft_tokens, 4);
  EXPECT_EQ(d.drafter.kind, DrafterKind::autoregressive);
  EXPECT_EQ(d.rollback, RollbackKind::copy_states);
  EXPECT_EQ(d.profiles.front().first, "fast");
  EXPECT_EQ(d.batches, (std::vector<long long>{1, 16}));
  EXPECT_EQ(d.contexts, (std::vector<long long>{0, 4096}));
}

TEST_F(SpecDefaultsErrors, NameFileAndKey) {
  const auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = kValid;
    t.replace(t.find(from), from.size(), to);
    return write(t);
  };
  struct Case {
    std::string from, to, key, what;
  };
  for (const Case& c : std::vector<Case>{
           {"draft_tokens: 4", "draft_tokens: 0", "draft_tokens", "1..64"},
           {"kind: autoregressive", "kind: tree", "drafter.kind", "block_parallel"},
           {"layers: 2", "layers: -1", "drafter.layers", "-1"},
           {"rollback: copy_states", "rollback: none", "rollback", "replay_inputs"},
           {"fast: 3.5", "fast: 6", "profiles.fast", "1..draft_tokens + 1 = 5"},
           {"profiles: {fast: 3.5, slow: 1.5}", "profiles: [3.5]", "profiles", "mapping"},
           {"batches: [1, 16]", "batches: [1, 0]", "batches", "positive"},
           {"contexts: [0, 4096]", "contexts: [-1]", "contexts", "in 0..1073741824, got -1"},
           {"draft_tokens: 4", "draft_token: 4", "draft_token", "unknown"},
       }) {
    SCOPED_TRACE(c.to);
    const std::string path = replace(c.from, c.to);
    expect_input_error([&] { load_spec_defaults(path); }, {path, c.key, c.what});
  }
  expect_input_error([] { load_spec_defaults("/nonexistent/defaults.yaml"); }, {"/nonexistent/defaults.yaml"});
}

TEST(SpecSweep, RowsByContextThenBatchThenProfile) {
  const Scenario base = load_scenario(kData + "/k3-gb300-tp8-decode-128k.yaml", DataPaths::resolve(kData));
  const SpecDefaults d = load_spec_defaults(kDefaults);
  SpecSweepRequest r;
  r.drafter = d.drafter;
  r.draft_tokens = d.draft_tokens;
  r.rollback = d.rollback;
  r.profiles = iid_profiles(d.profiles, d.draft_tokens);
  r.batches = {1, 8};
  r.contexts = {8192, 131072};
  r.target_speedup = 2;
  const std::vector<SpecSweepRow> rows = spec_sweep(base, r);
  ASSERT_EQ(rows.size(), 8u);
  std::size_t i = 0;
  for (long long ctx : r.contexts) {
    for (long long batch : r.batches) {
      Scenario s = base;
      s.phase = Phase::decode(batch, ctx);
      const SpecStepCosts costs = speculative_step_costs(s, r.drafter, r.draft_tokens);
      for (const AcceptanceProfile& p : r.profiles) {
        const SpecSweepRow& row = rows[i++];
        EXPECT_EQ(row.profile, p.name);
        EXPECT_EQ(row.batch, batch);
        EXPECT_EQ(row.context_tokens, ctx);
        EXPECT_DOUBLE_EQ(row.costs.verify_us, costs.verify_us);
        EXPECT_DOUBLE_EQ(row.outcome.speedup, speculative_outcome(s, costs, p.acceptance, r.rollback).speedup);
        ASSERT_TRUE(row.required.has_value());
        const MemoryBreakdown m = estimate_memory(s, build_op_graph(s.model, s.phase, s.parallelism, s.precision));
        EXPECT_DOUBLE_EQ(row.memory_per_gpu_bytes, m.total_bytes);
        EXPECT_DOUBLE_EQ(row.usable_per_gpu_bytes, m.usable_bytes);
        EXPECT_EQ(row.fits(), m.fits());
      }
    }
  }
  EXPECT_NEAR(rows[0].outcome.tokens_per_step, 4.73, 1e-6);
  const std::string csv = spec_sweep_csv(rows);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 9);
  EXPECT_EQ(csv.rfind("profile,batch,context_tokens,", 0), 0u);
  EXPECT_NE(csv.find(",memory_per_gpu_bytes,usable_per_gpu_bytes,fits\n"), std::string::npos);
  // A batch that needs more than a GPU holds is marked so (K3 on 8 GB300s: 1,024 sequences of 1,048,000 tokens).
  SpecSweepRequest big = r;
  big.batches = {1, 1024};
  big.contexts = {1048000};
  const std::vector<SpecSweepRow> sized = spec_sweep(base, big);
  ASSERT_EQ(sized.size(), 2 * r.profiles.size());
  EXPECT_TRUE(sized.front().fits());
  EXPECT_FALSE(sized.back().fits());
  EXPECT_GT(sized.back().memory_per_gpu_bytes, sized.back().usable_per_gpu_bytes);
  // Without a grid the sweep is the scenario's own batch and context.
  r.batches.clear();
  r.contexts.clear();
  const std::vector<SpecSweepRow> own = spec_sweep(base, r);
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0].batch, base.phase.batch);
  EXPECT_EQ(own[0].context_tokens, base.phase.context_tokens);
}

}  // namespace
}  // namespace k3
