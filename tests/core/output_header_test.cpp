// The header of every JSON output (core/output_header.h): its members first, in order, naming the build; and the
// writers that use it.
#include "core/output_header.h"

#include "core/engine_sources.h"
#include "core/version.h"

#include <gtest/gtest.h>

namespace k3 {
namespace {

TEST(OutputHeader, NamesTheFormatItsVersionAndTheBuild) {
  nlohmann::ordered_json j = output_header("k3perf-serve", 3);
  j["summary"] = 1;
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"format", "version", "k3perf", "summary"}));
  EXPECT_EQ(j["format"], "k3perf-serve");
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["k3perf"]["version"], std::string(k3perf_version()));
  EXPECT_EQ(j["k3perf"]["engine_sources"], std::string(engine_sources_hash()));
  EXPECT_EQ(std::string(engine_sources_hash()).size(), 16u);
}

}  // namespace
}  // namespace k3
