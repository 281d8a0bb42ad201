// The one `--set` applier (core/yaml_set.h): values parsed as YAML, parents created, and errors
// naming the assignment.
#include "core/yaml_set.h"

#include "expect_input_error.h"

#include <gtest/gtest.h>

namespace k3 {
namespace {

using test::expect_input_error;

TEST(YamlSet, EditsExistingAndCreatesMissingKeys) {
  YAML::Node root = YAML::Load("workload: {batch: 1}\nname: a\n");
  apply_sets(root, {"workload.batch=64", "serving.slo.ttft_ms=2000", "name=b"});
  EXPECT_EQ(root["workload"]["batch"].as<int>(), 64);
  EXPECT_EQ(root["serving"]["slo"]["ttft_ms"].as<int>(), 2000);
  EXPECT_EQ(root["name"].as<std::string>(), "b");
}

TEST(YamlSet, ValuesAreYaml) {
  YAML::Node root = YAML::Load("{}");
  apply_set(root, "a.list=[1, 2, 3]");
  apply_set(root, "a.text=hello world");
  apply_set(root, "a.map={x: 1}");
  ASSERT_TRUE(root["a"]["list"].IsSequence());
  EXPECT_EQ(root["a"]["list"].size(), 3u);
  EXPECT_EQ(root["a"]["text"].as<std::string>(), "hello world");
  EXPECT_EQ(root["a"]["map"]["x"].as<int>(), 1);
}

TEST(YamlSet, ScalarParentBecomesAMapping) {
  YAML::Node root = YAML::Load("runtime: 3\n");
  apply_set(root, "runtime.cuda_graphs=false");
  EXPECT_FALSE(root["runtime"]["cuda_graphs"].as<bool>());
}

TEST(YamlSet, LaterAssignmentWins) {
  YAML::Node root = YAML::Load("{}");
  apply_sets(root, {"a=1", "a=2"});
  EXPECT_EQ(root["a"].as<int>(), 2);
}

TEST(YamlSet, MalformedAssignmentsNameThemselves) {
  for (const std::string bad : {"workload.batch", "=64"}) {
    SCOPED_TRACE(bad);
    expect_input_error([&] { apply_set(YAML::Load("{}"), bad); }, {"--set '" + bad + "'", "expected key.path=value"});
  }
  for (const std::string bad : {"workload..batch=64", ".batch=64", "workload.=64"}) {
    SCOPED_TRACE(bad);
    expect_input_error([&] { apply_set(YAML::Load("{}"), bad); }, {"--set '" + bad + "'", "empty key in"});
  }
  expect_input_error([] { apply_set(YAML::Load("{}"), "a=[1, 2"); }, {"--set 'a=[1, 2'", "cannot parse the value"});
}

TEST(YamlSet, BadPathLeavesTheDocumentAlone) {
  YAML::Node root = YAML::Load("{}");
  EXPECT_THROW(apply_set(root, "x.y..z=1"), InputError);
  EXPECT_FALSE(root["x"]);
}

TEST(YamlSet, KeyOfAnAssignment) {
  EXPECT_EQ(set_key("workload.batch=64"), "workload.batch");
  EXPECT_EQ(set_key("a.b"), "a.b");
}

}  // namespace
}  // namespace k3
