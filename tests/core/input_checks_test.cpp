// The checks every JSON and YAML input goes through (core/json_reader, core/yaml_reader, read_file): nesting within
// limit::nesting, keys once per object, numbers a double holds, errors that quote at most an excerpt, directories
// refused as files.
#include "core/atomic_file.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/yaml_reader.h"
#include "expect_input_error.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace k3 {
namespace {

using test::expect_input_error;

std::string nested(const std::string& open, const std::string& close, int depth, const std::string& inner) {
  std::string text;
  for (int i = 0; i < depth; ++i) text += open;
  text += inner;
  for (int i = 0; i < depth; ++i) text += close;
  return text;
}

TEST(JsonInput, NestingIsBounded) {
  const int most = static_cast<int>(limit::nesting.value);
  EXPECT_NO_THROW(JsonNode::parse(nested("{\"a\":", "}", most, "1"), "ok.json"));
  expect_input_error([&] { JsonNode::parse(nested("{\"a\":", "}", most + 1, "1"), "deep.json"); },
                     {"deep.json", "nested deeper than 256 levels"});
  expect_input_error([&] { JsonNode::parse("{\"x\":" + nested("[", "]", 200'000, "") + "}", "deep.json"); },
                     {"deep.json", "nested deeper than 256 levels"});
}

TEST(JsonInput, KeysAppearOncePerObject) {
  expect_input_error([] { JsonNode::parse(R"({"a": 1, "a": 2})", "d.json"); }, {"d.json", "key 'a' appears twice"});
  expect_input_error([] { JsonNode::parse(R"({"t": {"u": {"v": 1, "v": 1}}})", "d.json"); },
                     {"d.json", "key 'v' appears twice in 't.u'"});
  // The same key in two objects is no duplicate.
  EXPECT_NO_THROW(JsonNode::parse(R"({"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 1}, {"k": 2}]})", "ok.json"));
}

// The members of an object one at a time, with the checks of parse_json; the GUI's reader keeps the file's order.
TEST(JsonInput, MembersOneAtATimeAndInFileOrder) {
  std::vector<std::string> seen;
  parse_json_members(R"({"b": {"x": [1, 2]}, "a": 3, "c": "s"})", "m.json", 256,
                     [&](const std::string& key, const nlohmann::json& value) { seen.push_back(key + value.dump()); });
  EXPECT_EQ(seen, (std::vector<std::string>{R"(b{"x":[1,2]})", "a3", R"(c"s")"}));
  auto members = [](const std::string& text, int depth) {
    parse_json_members(text, "m.json", depth, [](const std::string&, const nlohmann::json&) {});
  };
  expect_input_error([&] { members(R"({"a": 1, "a": 2})", 8); }, {"m.json", "key 'a' appears twice"});
  expect_input_error([&] { members(R"({"a": {"k": 1, "k": 2}})", 8); }, {"m.json", "key 'k' appears twice"});
  expect_input_error([&] { members("[1]", 8); }, {"m.json", "expected a JSON object at the top level"});
  expect_input_error([&] { members("7", 8); }, {"m.json", "expected a JSON object at the top level"});
  expect_input_error([&] { members(R"({"a": [[[1]]]})", 3); }, {"m.json", "nested deeper than 3 levels"});
  EXPECT_NO_THROW(members(R"({"a": [[1]]})", 3));
  expect_input_error([&] { members(R"({"a": 1e400})", 8); }, {"m.json", "beyond the range of a double"});
  expect_input_error([&] { members(R"({"a": 1)", 8); }, {"m.json", "malformed JSON"});

  const nlohmann::ordered_json ordered = parse_ordered_json(R"({"z": 1, "a": {"y": 2, "b": 3}})", "o.json");
  EXPECT_EQ(ordered.dump(), R"({"z":1,"a":{"y":2,"b":3}})");
  expect_input_error([] { parse_ordered_json(R"({"z": 1, "z": 2})", "o.json"); }, {"o.json", "key 'z' appears twice"});
  expect_input_error([&] { parse_ordered_json(nested("[", "]", 300, ""), "o.json"); }, {"nested deeper than 256"});
}

TEST(JsonInput, NumbersBeyondADoubleAreInputErrors) {
  expect_input_error([] { JsonNode::parse(R"({"hidden_size": 1e400})", "n.json"); },
                     {"n.json", "1e400", "beyond the range of a double"});
  expect_input_error([] { JsonNode::parse(R"({"x": -1e400})", "n.json"); }, {"-1e400"});
  expect_input_error([] { JsonNode::parse(R"({"x": 1, })", "m.json"); }, {"m.json", "malformed JSON at byte"});
}

TEST(JsonInput, ErrorsQuoteAnExcerpt) {
  std::string many = "1";
  for (int i = 0; i < 50'000; ++i) many += ",1";
  const JsonNode root =
      JsonNode::parse("{\"x\": " + nested("[", "]", 200, "") + ", \"y\": [" + many + "]}", "big.json");
  for (const char* key : {"x", "y"}) {
    try {
      root[key].as_int();
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_LT(std::string(e.what()).size(), 400u) << e.what();
      EXPECT_NE(std::string(e.what()).find("characters)"), std::string::npos) << e.what();
    }
  }
}

TEST(YamlInput, DuplicateKeysAreErrors) {
  expect_input_error([] { YamlNode::load_string("a: 1\nb: 2\na: 3\n", "d.yaml"); },
                     {"d.yaml:3", "key 'a' appears twice"});
  expect_input_error([] { YamlNode::load_string("p: {tp: 8, ep: 16, tp: 4}\n", "d.yaml"); },
                     {"d.yaml:1", "key 'tp' appears twice"});
  EXPECT_NO_THROW(YamlNode::load_string("a: {k: 1}\nb: {k: 1}\nc: [{k: 1}, {k: 2}]\n", "ok.yaml"));
}

TEST(YamlInput, KeysAreSingleValues) {
  // yaml-cpp used to throw its own "bad conversion" when such a key was read.
  expect_input_error([] { YamlNode::load_string("? {a: 1}\n: 3\n", "k.yaml"); }, {"k.yaml:1", "a key must be"});
  expect_input_error([] { YamlNode::load_string("? [1, 2]\n: 3\n", "k.yaml"); }, {"k.yaml:1", "a key must be"});
  // Aliases stay usable as values.
  const YamlNode y = YamlNode::load_string("a: &x 4\nb: *x\n", "ok.yaml");
  EXPECT_EQ(y["b"].as_int(), 4);
}

TEST(YamlInput, NestingIsBounded) {
  const int most = static_cast<int>(limit::nesting.value);
  EXPECT_NO_THROW(YamlNode::load_string("x: " + nested("[", "]", most - 1, ""), "ok.yaml"));
  expect_input_error([&] { YamlNode::load_string("x: " + nested("[", "]", most, ""), "deep.yaml"); },
                     {"deep.yaml:1", "nested deeper than 256 levels"});
  expect_input_error([&] { YamlNode::load_string("x: " + nested("[", "]", 200'000, ""), "deep.yaml"); },
                     {"deep.yaml:1", "nested deeper"});
}

TEST(YamlInput, EntriesComeInFileOrderWithTheirKeyPaths) {
  const YamlNode y = YamlNode::load_string("s:\n  b: 1\n  a: 2\n  c: 3\n", "e.yaml");
  const auto entries = y["s"].entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].first, "b");
  EXPECT_EQ(entries[1].second.as_int(), 2);
  EXPECT_EQ(entries[2].second.key_path(), "s.c");
  EXPECT_EQ(entries[2].second.line(), 4);
}

TEST(ReadFile, ADirectoryIsAnError) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  expect_input_error([&] { read_file(dir.string()); }, {dir.string(), "is a directory"});
  expect_input_error([&] { YamlNode::load_file(dir.string()); }, {dir.string(), "is a directory"});
}

}  // namespace
}  // namespace k3
