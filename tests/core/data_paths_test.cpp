// The one name lookup of models and hardware (core/data_paths.h): names in the data folder, paths as
// given, and errors that list what is there.
#include "core/data_paths.h"

#include "core/hardware.h"
#include "core/model_config.h"
#include "expect_input_error.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace k3 {
namespace {

namespace fs = std::filesystem;
using test::expect_input_error;

const std::string kData = std::string(K3PERF_SOURCE_DIR) + "/scenarios";

TEST(DataPaths, LayoutUnderARoot) {
  const DataPaths d = DataPaths::under("/data");
  EXPECT_EQ(d.models_dir, "/data/models");
  EXPECT_EQ(d.hardware_dir, "/data/hardware");
  EXPECT_EQ(d.claims_dir, "/data/claims");
  EXPECT_EQ(d.prices_dir, "/data/prices");
  EXPECT_EQ(d.spec_dir, "/data/spec");
  expect_input_error([] { DataPaths::resolve("/nonexistent/scenarios"); }, {"/nonexistent/scenarios", "--data-dir"});
}

TEST(DataPaths, NamesResolveInTheDataFolder) {
  const DataPaths d = DataPaths::resolve(kData);
  EXPECT_EQ(d.model_file("kimi-k3"), kData + "/models/kimi-k3.json");
  EXPECT_EQ(d.hardware_file("h200-sxm"), kData + "/hardware/h200-sxm.yaml");
  EXPECT_EQ(load_model_config_by_name("kimi-k3", d.models_dir).source_file, kData + "/models/kimi-k3.json");
  EXPECT_EQ(load_hardware_by_name("h200-sxm", d.hardware_dir).source_file, kData + "/hardware/h200-sxm.yaml");
}

TEST(DataPaths, PathsAreTakenAsGiven) {
  const DataPaths d = DataPaths::resolve(kData);
  const std::string model = kData + "/models/kimi-linear-48b-a3b.json";
  EXPECT_EQ(d.model_file(model), model);
  // A hardware argument that looks like a path is one, even when it does not exist (the loader says so).
  EXPECT_EQ(d.hardware_file("elsewhere/gpu.yaml"), "elsewhere/gpu.yaml");
  EXPECT_EQ(d.hardware_file("gpu.yml"), "gpu.yml");
}

TEST(DataPaths, UnknownNamesListTheKnownOnes) {
  const DataPaths d = DataPaths::resolve(kData);
  expect_input_error([&] { d.model_file("kimi-k4"); },
                     {"unknown model 'kimi-k4'", "kimi-k3", "kimi-linear-48b-a3b", d.models_dir});
  expect_input_error([&] { d.hardware_file("h300"); }, {"unknown hardware 'h300'", "h200-sxm", d.hardware_dir});
  expect_input_error([] { DataPaths::find_hardware_file("h200-sxm", "/nonexistent"); },
                     {"unknown hardware 'h200-sxm'", "available in /nonexistent: none"});
}

TEST(DataPaths, ListNamesSortsStemsOfOneExtension) {
  const std::vector<std::string> names = list_names(kData + "/hardware", ".yaml");
  ASSERT_FALSE(names.empty());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "h200-sxm"), names.end());
  EXPECT_EQ(names, list_hardware_names(kData + "/hardware"));
  EXPECT_TRUE(list_names("/nonexistent", ".yaml").empty());
}

}  // namespace
}  // namespace k3
