// Which engine a calibration belongs to (core/engine_sources.h): the build's hash of kernels/ and engine/runtime/
// equals what scripts/engine-sources-hash.sh computes from the same tree (two implementations of one rule); a
// hardware file's calibrated_on is read and checked; a file fitted on other sources gets a warning naming both.
#include "core/engine_sources.h"

#include "core/error.h"
#include "core/hardware.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace k3 {
namespace {

const std::string kRoot = K3PERF_SOURCE_DIR;

std::string script_hash() {
  const std::string command = "bash '" + kRoot + "/scripts/engine-sources-hash.sh'";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  EXPECT_NE(pipe, nullptr);
  std::array<char, 64> out{};
  std::string text;
  while (pipe && fgets(out.data(), int(out.size()), pipe.get()) != nullptr) text += out.data();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

TEST(EngineSources, TheBuildsHashIsTheScriptsOfTheSameTree) {
  const std::string built = engine_sources_hash();
  EXPECT_EQ(built.size(), 16u);
  EXPECT_EQ(script_hash(), built);
}

Hardware calibrated(const std::string& sources, const std::string& commit) {
  Hardware hw = load_hardware(kRoot + "/scenarios/hardware/h200-sxm.yaml");
  hw.calibrated_engine_sources = sources;
  hw.calibrated_commit = commit;
  return hw;
}

TEST(EngineSources, AFileFittedOnOtherSourcesIsStale) {
  EXPECT_FALSE(calibration_staleness(calibrated("", ""), "0123456789abcdef"));  // not calibrated: nothing to say
  EXPECT_FALSE(calibration_staleness(calibrated("0123456789abcdef", "abc1234"), "0123456789abcdef"));
  const auto stale = calibration_staleness(calibrated("0123456789abcdef", "abc1234"), "fedcba9876543210");
  ASSERT_TRUE(stale);
  for (const char* needle : {"h200-sxm.yaml", "abc1234", "0123456789abcdef", "fedcba9876543210", "refit"}) {
    EXPECT_NE(stale->find(needle), std::string::npos) << *stale;
  }
}

TEST(EngineSources, TheValidatedFileNamesTheEngineItWasFittedOn) {
  const Hardware hw = load_hardware(kRoot + "/scenarios/hardware/h200-validated.yaml");
  EXPECT_EQ(hw.calibrated_engine_sources, "c1f86c126f5ac051");  // scripts/engine-sources-hash.sh 14a9206
  EXPECT_EQ(hw.calibrated_commit, "14a9206");
  EXPECT_TRUE(load_hardware(kRoot + "/scenarios/hardware/h200-sxm.yaml").calibrated_engine_sources.empty());
}

}  // namespace
}  // namespace k3
