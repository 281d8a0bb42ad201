// The trace readers: the shipped Mooncake and Azure traces against their published statistics and
// an independent parse, and every malformed input naming its file, line and key.
#include "expect_input_error.h"
#include "sim/workload/azure_reader.h"
#include "sim/workload/mooncake_reader.h"
#include "sim/workload/trace_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace k3::workload {
namespace {

std::string trace(const std::string& file) { return std::string(K3PERF_SOURCE_DIR) + "/data/traces/" + file; }

TEST(MooncakeReader, ConversationTraceMatchesThePublishedStatistics) {
  const std::vector<Request> r = read_mooncake_trace(trace("conversation_trace.jsonl"));
  const TraceStats s = trace_stats(r);
  // Mooncake FAST'25 paper, trace table: 12,031 requests, mean input 12,035, mean output 343 tokens.
  EXPECT_EQ(s.requests, 12031);
  EXPECT_EQ(std::lround(s.mean_input_tokens()), 12035);
  EXPECT_EQ(std::lround(s.mean_output_tokens()), 343);
  EXPECT_EQ(r.front().input_tokens, 6758);
  EXPECT_EQ(r.front().block_hashes.size(), 14u);
  EXPECT_EQ(r.front().block_tokens, 512);
  EXPECT_EQ(r.back().id, 12030);
  EXPECT_NEAR(s.duration_ms, 3536999, 0.5);  // one hour
}

TEST(MooncakeReader, SyntheticTraceMatchesThePublishedStatistics) {
  const TraceStats s = trace_stats(read_mooncake_trace(trace("synthetic_trace.jsonl")));
  EXPECT_EQ(s.requests, 3993);
  EXPECT_EQ(std::lround(s.mean_input_tokens()), 15325);
  EXPECT_EQ(std::lround(s.mean_output_tokens()), 149);
}

TEST(AzureReader, ShippedTracesMatchAnIndependentParse) {
  // Row counts from the published files; means computed independently (Python's csv module).
  const TraceStats conv = trace_stats(read_azure_trace(trace("AzureLLMInferenceTrace_conv.csv")));
  EXPECT_EQ(conv.requests, 19366);
  EXPECT_NEAR(conv.mean_input_tokens(), 1154.6974078281523, 1e-9);
  EXPECT_NEAR(conv.mean_output_tokens(), 211.12594237323142, 1e-9);
  EXPECT_EQ(conv.prefix_reuse, 0);  // no prefix information
  const std::vector<Request> code = read_azure_trace(trace("AzureLLMInferenceTrace_code.csv"));
  EXPECT_EQ(code.size(), 8819u);
  // First row 18:17:03.9799600, second 18:17:04.0319600: 52 ms apart.
  EXPECT_NEAR(code[1].arrival_ms - code[0].arrival_ms, 52.0, 1e-6);
  EXPECT_EQ(code[0].arrival_ms, 0);
  EXPECT_TRUE(code[0].block_hashes.empty());
}

TEST(AzureReader, TimestampsCrossMidnight) {
  const auto r = parse_azure_trace(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-12-31 23:59:59.5,10,2\n2024-01-01 00:00:00.25,3,4\n", "t.csv");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_NEAR(r[1].arrival_ms, 750.0, 1e-6);
  EXPECT_EQ(r[1].input_tokens, 3);
  EXPECT_EQ(r[1].output_tokens, 4);
}

TEST(MooncakeReader, ParsesAHandWrittenTrace) {
  const auto r = parse_mooncake_trace(
      "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [0, 1]}\n\n"
      "{\"timestamp\": 7, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [0, 2]}\n",
      "t.jsonl");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].id, 1);
  EXPECT_EQ(r[1].arrival_ms, 7);
  EXPECT_EQ(r[1].block_hashes, (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(r[1].session_id, -1);
}

TEST(MooncakeReader, BadInputNamesFileLineAndKey) {
  using test::expect_input_error;
  expect_input_error([] { parse_mooncake_trace("{\"timestamp\": 0}\n", "t.jsonl"); }, {"t.jsonl:1", "input_length"});
  expect_input_error([] { parse_mooncake_trace("not json\n", "t.jsonl"); }, {"t.jsonl:1", "JSON"});
  expect_input_error(
      [] {
        parse_mooncake_trace(
            "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n"
            "{\"timestamp\": 0, \"input_length\": 513, \"output_length\": 1, \"hash_ids\": [0]}\n",
            "t.jsonl");
      },
      {"t.jsonl:2", "hash_ids", "expected 2"});
  expect_input_error(
      [] {
        parse_mooncake_trace(
            "{\"timestamp\": 9, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n"
            "{\"timestamp\": 3, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n",
            "t.jsonl");
      },
      {"t.jsonl:2", "timestamp", "arrival order"});
  expect_input_error(
      [] {
        parse_mooncake_trace("{\"timestamp\": 0, \"input_length\": -4, \"output_length\": 1, \"hash_ids\": []}\n",
                             "t.jsonl");
      },
      {"t.jsonl:1", "input_length", "non-negative"});
  expect_input_error([] { read_mooncake_trace("/nonexistent/trace.jsonl"); }, {"/nonexistent/trace.jsonl"});
}

TEST(AzureReader, BadInputNamesFileLineAndColumn) {
  using test::expect_input_error;
  expect_input_error([] { parse_azure_trace("a,b,c\n", "t.csv"); }, {"t.csv:1", "header"});
  expect_input_error(
      [] { parse_azure_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,x,1\n", "t.csv"); },
      {"t.csv:2", "ContextTokens", "'x'"});
  expect_input_error(
      [] { parse_azure_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-13-16 18:15:46,1,1\n", "t.csv"); },
      {"t.csv:2", "TIMESTAMP"});
  expect_input_error(
      [] { parse_azure_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1\n", "t.csv"); },
      {"t.csv:2", "3 comma-separated"});
  expect_input_error([] { parse_azure_trace("", "t.csv"); }, {"t.csv", "empty"});
}

// Token counts are bounded like every other count (limit::tokens): 2^63 - 1 once reached the block arithmetic
// (input_length + block - 1 overflowed), and the Azure columns took any int64.
TEST(TraceReaders, TokenCountsBeyondTheLimitAreRefused) {
  using test::expect_input_error;
  expect_input_error(
      [] {
        parse_mooncake_trace(
            "{\"timestamp\": 0, \"input_length\": 9223372036854775807, \"output_length\": 1, \"hash_ids\": []}\n",
            "t.jsonl");
      },
      {"t.jsonl:1", "input_length", "9223372036854775807 exceeds 1073741824, the limit on tokens"});
  expect_input_error(
      [] {
        parse_mooncake_trace(
            "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 18446744073709551615, \"hash_ids\": [1]}\n",
            "t.jsonl");
      },
      {"t.jsonl:1", "output_length", "18446744073709551615 exceeds 1073741824"});
  expect_input_error(
      [] {
        parse_mooncake_trace("{\"timestamp\": 1e300, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n",
                             "t.jsonl");
      },
      {"t.jsonl:1", "timestamp", "non-negative integer"});
  // A hash past 2^63 is a valid unsigned hash.
  EXPECT_EQ(parse_mooncake_trace(
                "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [18446744073709551615]}\n",
                "t.jsonl")
                .front()
                .block_hashes.front(),
            18446744073709551615ull);
  const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  expect_input_error([&] { parse_azure_trace(header + "2023-11-16 18:15:46,1073741825,1\n", "t.csv"); },
                     {"t.csv:2", "ContextTokens", "1073741825 exceeds 1073741824, the limit on tokens"});
  expect_input_error([&] { parse_azure_trace(header + "2023-11-16 18:15:46,1,99999999999999999999\n", "t.csv"); },
                     {"t.csv:2", "GeneratedTokens", "99999999999999999999 exceeds"});
  EXPECT_EQ(parse_azure_trace(header + "2023-11-16 18:15:46,1073741824,0\n", "t.csv").front().input_tokens, 1073741824);
}

}  // namespace
}  // namespace k3::workload
