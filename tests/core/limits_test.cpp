// core/limits: integers read in their own type within a stated limit; errors name the key, value and limit.
#include "core/limits.h"
#include "core/yaml_reader.h"
#include "expect_input_error.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

namespace k3 {
namespace {

using test::expect_input_error;

YamlNode value(const std::string& text) { return YamlNode::load_string("a: {b: " + text + "}\n", "t.yaml")["a"]["b"]; }

TEST(ReadInt, InsideTheLimitReadsTheValue) {
  EXPECT_EQ(read_int<int>(value("65536"), limit::parallel_degree), 65536);
  EXPECT_EQ(read_int<int>(value("1"), limit::parallel_degree), 1);
  EXPECT_EQ(read_int<int64_t>(value("0"), limit::tokens), 0);
  EXPECT_EQ(read_int<long long>(value("1.073741824e9"), limit::tokens), 1'073'741'824);
}

TEST(ReadInt, BeyondTheLimitNamesFileKeyValueAndLimit) {
  expect_input_error([] { read_int<int>(value("4294967296"), limit::parallel_degree); },
                     {"t.yaml:1", "key 'a.b'", "4294967296 exceeds 65536", "parallel degree"});
  expect_input_error([] { read_int<int>(value("65537"), limit::parallel_degree); }, {"65537 exceeds 65536"});
  expect_input_error([] { read_int<int>(value("9223372036854775807"), limit::layers); },
                     {"9223372036854775807 exceeds 4096"});
  expect_input_error([] { read_int<int>(value("0"), limit::parallel_degree); },
                     {"key 'a.b'", "expected a positive integer in 1..65536, got 0"});
  expect_input_error([] { read_int<int64_t>(value("-1"), limit::tokens); },
                     {"expected an integer in 0..1073741824, got -1"});
  expect_input_error([] { read_int<int>(value("1e400"), limit::layers); }, {"key 'a.b'", "1e400"});
  expect_input_error([] { read_int<int>(value("2.5"), limit::layers); }, {"expected an integer"});
  static constexpr IntLimit positive_tokens = at_least(limit::tokens, 1);
  expect_input_error([] { read_int<int64_t>(value("0"), positive_tokens); }, {"positive"});
}

// Every limit fits the type the readers put it in (int for counts and dims), and the largest parameter count the
// limits allow (layers x experts x 3 matrices of dim x dim) fits a long long.
TEST(Limits, FitTheirTypes) {
  for (const IntLimit* l : int_limits()) {
    SCOPED_TRACE(std::string(l->what));
    EXPECT_LE(l->min, l->max);
    EXPECT_FALSE(l->what.empty());
    EXPECT_FALSE(l->applies_to.empty());
  }
  for (const IntLimit* l : {&limit::layers, &limit::heads, &limit::head_dim, &limit::model_dim, &limit::vocab,
                            &limit::experts, &limit::parallel_degree, &limit::gpus, &limit::replicas}) {
    EXPECT_LE(l->max, std::numeric_limits<int>::max()) << l->what;
  }
  EXPECT_LE(1.0L * limit::heads.max * limit::head_dim.max, std::numeric_limits<int>::max());
  EXPECT_LE(1.0L * limit::shared_experts.max * limit::model_dim.max, std::numeric_limits<int>::max());
  EXPECT_LE(1.0L * limit::parallel_degree.max * limit::parallel_degree.max, std::numeric_limits<long long>::max());
  const long double routed =
      1.0L * limit::layers.max * limit::experts.max * 3 * limit::model_dim.max * limit::model_dim.max;
  EXPECT_LE(routed, 0.5L * std::numeric_limits<long long>::max());
}

TEST(QuotedExcerpt, CutsLongValues) {
  EXPECT_EQ(quoted_excerpt("short"), "short");
  const std::string long_value(100'000, '[');
  const std::string cut = quoted_excerpt(long_value);
  EXPECT_LT(cut.size(), 260u);
  EXPECT_NE(cut.find("100000 characters"), std::string::npos) << cut;
}

}  // namespace
}  // namespace k3

namespace k3 {
namespace {

// docs/reliability.md states the limits; its table is the one limits_table() writes from the constants, verbatim
// (regenerate it with `core_tests --gtest_filter=Limits.DocumentedTableMatchesTheCode` and paste the printed table).
TEST(Limits, DocumentedTableMatchesTheCode) {
  std::ifstream in(std::string(K3PERF_SOURCE_DIR) + "/docs/reliability.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  const std::string table = limits_table();
  EXPECT_NE(doc.find(table), std::string::npos) << "docs/reliability.md lacks the table:\n" << table;
  // Every limit has its row (the table itself is built from int_limits() and size_limits()).
  for (const IntLimit* l : int_limits())
    EXPECT_NE(table.find(fmt::format("| {} | {}..{} |", l->what, l->min, l->max)), std::string::npos);
  EXPECT_NE(table.find("| parallel degree | 1..65536 | tp, ep, attention_dp, pp |"), std::string::npos) << table;
  EXPECT_NE(table.find("| JSON and YAML nesting | 256 levels |"), std::string::npos) << table;
  EXPECT_NE(table.find("| the serve queue sample interval | 0.001 ms (at least) |"), std::string::npos) << table;
}

}  // namespace
}  // namespace k3
