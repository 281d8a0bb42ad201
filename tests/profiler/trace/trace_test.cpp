// The trace model and its Chrome trace-event JSON: sorting, an exact round trip (nanoseconds,
// names with quotes, metadata, gzip), hand-written JSON as another tool writes it (foreign events
// skipped), and malformed traces rejected with the file, the event and the key named.
#include "profiler/trace/chrome_json.h"
#include "profiler/trace/gzip.h"

#include "core/atomic_file.h"
#include "core/limits.h"
#include "expect_input_error.h"
#include "perfetto_drop_rule.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace k3::profiler {
namespace {

Trace sample_trace() {
  Trace t;
  t.metadata["commit"] = "abc123";
  t.metadata["dropped_records"] = "2";
  const std::int64_t base = 1'712'345'678'901'234'567;  // a CUPTI-like absolute clock, ns
  // Added out of order on purpose.
  t.add({EventKind::kernel, "void k<\"q\">(int)", base + 2'001, base + 9'999, 0, 7, -1, 11, 0, 0, "L001.kda.recurrent",
         0});
  t.add({EventKind::range, "L001.kda.recurrent", base, base + 12'345, -1, -1, 4242, 0, 0, 0, "", -1});
  t.add({EventKind::api, "cudaLaunchKernel", base + 1, base + 1'500, -1, -1, 4242, 11, 0, 0, "", -1});
  t.add({EventKind::memcpy, "memcpy_htod", base + 20'000, base + 20'001, 1, 3, -1, 12, 0, 4096, "", -1});
  t.add({EventKind::kernel, "gemm", base + 30'000, base + 30'000, 0, 7, -1, 13, 77, 0, "head.lm_head", 3});
  t.sort();
  return t;
}

void expect_same(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Event x = a.event(i), y = b.event(i);
    EXPECT_EQ(x.kind, y.kind) << i;
    EXPECT_EQ(x.name, y.name) << i;
    EXPECT_EQ(x.start_ns, y.start_ns) << i;
    EXPECT_EQ(x.end_ns, y.end_ns) << i;
    EXPECT_EQ(x.device, y.device) << i;
    EXPECT_EQ(x.stream, y.stream) << i;
    EXPECT_EQ(x.thread, y.thread) << i;
    EXPECT_EQ(x.correlation, y.correlation) << i;
    EXPECT_EQ(x.graph_node, y.graph_node) << i;
    EXPECT_EQ(x.bytes, y.bytes) << i;
    EXPECT_EQ(x.op, y.op) << i;
    EXPECT_EQ(x.op_instance, y.op_instance) << i;
  }
  EXPECT_EQ(a.metadata, b.metadata);
}

TEST(Trace, SortsByStartThenKind) {
  const Trace t = sample_trace();
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t.kind[0], EventKind::range);
  EXPECT_EQ(t.kind[1], EventKind::api);
  EXPECT_EQ(t.kind[2], EventKind::kernel);
  EXPECT_EQ(t.kind[3], EventKind::memcpy);
  EXPECT_EQ(t.op_of(4), "head.lm_head");
  EXPECT_EQ(t.op_of(1), "");
  EXPECT_TRUE(t.is_sorted());
}

TEST(ChromeJson, WritesMicrosecondsWithNanosecondDecimalsAndTracks) {
  const std::string text = to_chrome_json(sample_trace());
  const nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["baseTimeNanoseconds"].get<std::int64_t>(), 1'712'345'678'901'234'567);
  EXPECT_EQ(doc["k3perf"]["commit"], "abc123");
  // The kernel: 2.001 us after the base, 7.998 us long, on pid = device 0, tid = stream 7.
  EXPECT_NE(
      text.find(
          "\"cat\":\"kernel\",\"name\":\"void k<\\\"q\\\">(int)\",\"pid\":0,\"tid\":7,\"ts\":2.001,\"dur\":7.998"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "\"cat\":\"nvtx\",\"name\":\"L001.kda.recurrent\",\"pid\":1001,\"tid\":4242,\"ts\":0.000,\"dur\":12.345"),
      std::string::npos);
  EXPECT_NE(text.find("\"name\":\"thread_name\",\"pid\":0,\"tid\":7,\"args\":{\"name\":\"stream 7\"}"),
            std::string::npos);
  EXPECT_NE(text.find("\"name\":\"process_name\",\"pid\":1000,\"tid\":0,\"args\":{\"name\":\"host: CUDA API\"}"),
            std::string::npos);
  EXPECT_NE(text.find("\"graph_node\":77,\"op\":\"head.lm_head\",\"op_instance\":3"), std::string::npos);
}

TEST(ChromeJson, RoundTripIsExact) {
  const Trace t = sample_trace();
  expect_same(t, parse_chrome_json(to_chrome_json(t), "mem"));
  Trace empty;
  EXPECT_EQ(parse_chrome_json(to_chrome_json(empty), "mem").size(), 0u);
}

TEST(ChromeJson, GzipFilesRoundTripAndPlainFilesToo) {
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_trace_test";
  std::filesystem::create_directories(dir);
  const Trace t = sample_trace();
  const std::string gz = (dir / "t.json.gz").string(), plain = (dir / "t.json").string();
  write_chrome_trace(t, gz);
  write_chrome_trace(t, plain);
  EXPECT_TRUE(is_gzip(read_file(gz)));
  EXPECT_FALSE(is_gzip(read_file(plain)));
  expect_same(t, read_trace(gz));
  expect_same(t, read_trace(plain));
  EXPECT_EQ(gzip_decompress(read_file(gz), gz), to_chrome_json(t));
  // Deterministic bytes; truncated gzip is named as such.
  EXPECT_EQ(gzip_compress("abc", 1), gzip_compress("abc", 1));
  const std::string bytes = read_file(gz);
  write_file_atomically(gz, bytes.substr(0, bytes.size() / 2));
  test::expect_input_error([&] { read_trace(gz); }, {gz, "truncated gzip"});
  std::string corrupt = bytes;
  corrupt[12] = static_cast<char>(corrupt[12] ^ 0x5a);
  corrupt[13] = static_cast<char>(corrupt[13] ^ 0x5a);
  write_file_atomically(gz, corrupt);
  test::expect_input_error([&] { read_trace(gz); }, {gz, "gzip"});
  std::filesystem::remove_all(dir);
}

TEST(ChromeJson, ReadsAnotherToolsTraceAndSkipsForeignEvents) {
  // As Kineto writes it: no base, cpu_op events, flows and counters; ours in cat kernel/nvtx.
  const char* text = R"({"traceEvents":[
    {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1.0,"dur":2.0},
    {"ph":"s","id":1,"cat":"ac2g","name":"flow","pid":1,"tid":1,"ts":1.5},
    {"ph":"C","name":"mem","pid":1,"ts":1.0,"args":{"v":1}},
    {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":10.5,"dur":0.25,
     "args":{"device":0,"stream":7,"correlation":5}},
    {"ph":"X","cat":"nvtx","name":"head.lm_head","pid":1001,"tid":9,"ts":9.999,"dur":2}]})";
  const Trace t = parse_chrome_json(text, "kineto.json");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.kind[0], EventKind::range);
  EXPECT_EQ(t.start_ns[0], 9'999);
  EXPECT_EQ(t.end_ns[0], 11'999);
  EXPECT_EQ(t.thread[0], 9);
  EXPECT_EQ(t.start_ns[1], 10'500);
  EXPECT_EQ(t.end_ns[1], 10'750);
  EXPECT_EQ(t.correlation[1], 5u);
  EXPECT_EQ(t.op_of(1), "");
}

TEST(ChromeJson, MalformedTracesNameFileEventAndKey) {
  using test::expect_input_error;
  expect_input_error([] { parse_chrome_json("{\"traceEvents\":[", "a.json"); }, {"a.json", "malformed JSON"});
  expect_input_error([] { parse_chrome_json("[1,2]", "b.json"); }, {"b.json", "traceEvents"});
  expect_input_error([] { parse_chrome_json("{\"traceEvents\":{}}", "c.json"); }, {"c.json", "'traceEvents'", "array"});
  const std::string head = "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0},";
  expect_input_error([&] { parse_chrome_json(head + "3]}", "d.json"); },
                     {"d.json", "traceEvents[1]", "expected an object"});
  expect_input_error(
      [&] {
        parse_chrome_json(
            head + R"({"ph":"X","cat":"kernel","name":"k","ts":1,"args":{"device":0,"stream":1,"correlation":1}}]})",
            "e.json");
      },
      {"e.json", "traceEvents[1] ('k')", "'dur'", "missing"});
  expect_input_error(
      [&] {
        parse_chrome_json(
            head +
                R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":-2,"args":{"device":0,"stream":1,"correlation":1}}]})",
            "f.json");
      },
      {"f.json", "traceEvents[1] ('k')", "'dur'", "-2"});
  expect_input_error(
      [&] {
        parse_chrome_json(
            head +
                R"({"ph":"X","cat":"kernel","name":"k","ts":"1","dur":2,"args":{"device":0,"stream":1,"correlation":1}}]})",
            "g.json");
      },
      {"g.json", "'ts'", "expected a number"});
  expect_input_error(
      [&] {
        parse_chrome_json(
            head + R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"args":{"stream":1,"correlation":1}}]})",
            "h.json");
      },
      {"h.json", "('k')", "'args.device'", "missing"});
  expect_input_error(
      [&] {
        parse_chrome_json(
            head +
                R"({"ph":"X","cat":"cuda_api","name":"cudaLaunchKernel","ts":1,"dur":2,"tid":3,"args":{"correlation":-4}}]})",
            "i.json");
      },
      {"i.json", "('cudaLaunchKernel')", "'args.correlation'", "-4"});
  expect_input_error(
      [&] {
        parse_chrome_json(
            head +
                R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"args":{"device":0,"stream":1,"correlation":1,"op":"L001.x"}}]})",
            "j.json");
      },
      {"j.json", "'args.op_instance'", "missing"});
  expect_input_error(
      [&] { parse_chrome_json(head + R"({"ph":"X","cat":"nvtx","name":7,"ts":1,"dur":2,"tid":1}]})", "k.json"); },
      {"k.json", "traceEvents[1]", "'name'", "expected a string"});
  expect_input_error([&] { parse_chrome_json(R"({"k3perf":{"commit":true},"traceEvents":[]})", "l.json"); },
                     {"l.json", "k3perf.commit", "a string or an integer"});
  expect_input_error([] { read_trace("/nonexistent/trace.json.gz"); }, {"/nonexistent/trace.json.gz", "cannot open"});
}

// Hostile traces: nesting beyond limit::nesting (an event nested 200,000 deep overflowed the stack), a gzip bomb
// (a megabyte of zeros inflates a thousandfold), a base time that overflows when added to an event's.
TEST(ChromeJson, HostileTracesAreInputErrors) {
  using test::expect_input_error;
  const std::string head = R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"args":{"x":)";
  const std::string deep = head + std::string(200'000, '[') + std::string(200'000, ']') + "}}]}";
  expect_input_error([&] { parse_chrome_json(deep, "deep.json"); }, {"deep.json", "nested deeper than 256 levels"});
  const int fits = static_cast<int>(limit::nesting.value) - 1;  // inside the document's object
  EXPECT_NO_THROW(parse_chrome_json(
      "{\"x\":" + std::string(fits, '[') + std::string(fits, ']') + ",\"traceEvents\":[]}", "ok.json"));
  expect_input_error(
      [&] {
        parse_chrome_json("{\"x\":" + std::string(fits + 1, '[') + std::string(fits + 1, ']') + ",\"traceEvents\":[]}",
                          "one.json");
      },
      {"one.json", "nested deeper"});

  const std::filesystem::path bomb = std::filesystem::temp_directory_path() / "k3perf_bomb.json.gz";
  const std::string zeros(std::size_t{256} << 20, ' ');  // 256 MiB of spaces: about 0.25 MB compressed
  write_file_atomically(bomb.string(), gzip_compress("{\"traceEvents\":[" + zeros + "]}", 9));
  EXPECT_LT(std::filesystem::file_size(bomb), 1u << 20);
  expect_input_error([&] { read_trace(bomb.string()); }, {bomb.string(), "inflates to more than", "200 times"});
  std::filesystem::remove(bomb);

  for (const char* base : {"9223372036854775807", "-9223372036854775808", "18446744073709551615"}) {
    expect_input_error(
        [&] { parse_chrome_json(fmt::format(R"({{"baseTimeNanoseconds":{},"traceEvents":[]}})", base), "b.json"); },
        {"b.json", "baseTimeNanoseconds", base, "outside"});
  }
}

// Kernels that overlap under programmatic dependent launch go to a further lane of their stream: nothing is
// dropped, and reading the file back gives the same events.
TEST(ChromeJson, OverlappingKernelsGoToALaneNoViewerDrops) {
  Trace t;
  t.add({EventKind::kernel, "a", 0, 1'000, 0, 7, -1, 1, 0, 0, "", -1});
  t.add({EventKind::kernel, "b", 940, 2'000, 0, 7, -1, 2, 0, 0, "", -1});  // starts 60 ns before a ends
  t.add({EventKind::kernel, "c", 2'000, 2'500, 0, 7, -1, 3, 0, 0, "", -1});
  t.add({EventKind::kernel, "d", 2'100, 2'200, 0, 7, -1, 4, 0, 0, "", -1});  // inside c: not nested either
  t.add({EventKind::range, "L001.kda.recurrent", 0, 3'000, -1, -1, 42, 0, 0, 0, "", -1});
  t.add({EventKind::range, "L001.kda.inner", 10, 900, -1, -1, 42, 0, 0, 0, "", -1});  // nests: stays
  t.sort();
  EXPECT_EQ(trace_lanes(t), (std::vector<int>{0, 0, 0, 1, 0, 1}));  // sorted: range, a, inner, b, c, d
  const std::string json = to_chrome_json(t);
  EXPECT_TRUE(test::perfetto_would_drop(json).empty());
  const nlohmann::json doc = nlohmann::json::parse(json);
  int on_lane = 0;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && (e.at("name") == "b" || e.at("name") == "d")) {
      EXPECT_EQ(e.at("tid").get<long long>(), 7 + kLaneTidStride);
      EXPECT_EQ(e.at("args").at("stream"), 7);
      ++on_lane;
    }
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("tid").get<long long>() == 7 + kLaneTidStride) {
      EXPECT_EQ(e.at("args").at("name"), "stream 7 (overlapping, lane 2)");
    }
  }
  EXPECT_EQ(on_lane, 2);
  expect_same(t, parse_chrome_json(json, "lanes.json"));
  // The check is not vacuous: the same events on one track lose b (d nests inside c, which Perfetto allows).
  std::string one_track = json;
  for (std::size_t at; (at = one_track.find(std::to_string(7 + kLaneTidStride))) != std::string::npos;) {
    one_track.replace(at, std::to_string(7 + kLaneTidStride).size(), "7");
  }
  EXPECT_EQ(test::perfetto_would_drop(one_track), (std::vector<std::string>{"b"}));
}

// The H200 traces (bench/results/2026-12-03-h200-moe-wgmma) written again: their PDL overlaps on lanes, none dropped.
TEST(ChromeJson, EngineTracesWrittenLoseNothingInPerfetto) {
  const std::string dir = std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-12-03-h200-moe-wgmma/";
  int lanes = 0;
  for (const char* name : {"trace_decode_b8_ctx131072.json.gz", "trace_prefill_8192.json.gz"}) {
    const Trace t = read_trace(dir + name);
    for (int l : trace_lanes(t)) lanes += l > 0;
    const std::string json = to_chrome_json(t);
    const std::vector<std::string> dropped = test::perfetto_would_drop(json);
    EXPECT_TRUE(dropped.empty()) << name << ": " << dropped.size() << " dropped, the first " << dropped.front();
    std::size_t events = 0;
    const nlohmann::json doc = nlohmann::json::parse(json);
    for (const nlohmann::json& e : doc.at("traceEvents"))
      events += e.at("ph") == "X" && e.at("cat") != "gpu_user_annotation";
    EXPECT_EQ(events, t.size()) << name;
    // The same in Kineto's flavour.
    const std::vector<std::string> kineto_dropped = test::perfetto_would_drop(to_chrome_json(t, TraceFormat::kineto));
    EXPECT_TRUE(kineto_dropped.empty()) << name << " (kineto): " << kineto_dropped.size() << " dropped";
  }
  EXPECT_GT(lanes, 0);  // the engine's kernels do overlap (programmatic dependent launch)
}

}  // namespace
}  // namespace k3::profiler
