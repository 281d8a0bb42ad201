// The streaming trace reader against the DOM reader it replaced (dom_reader.h): the same columns, names
// and metadata, or the same InputError, on every kind of event, escapes and unicode in names, numbers
// with exponents, keys in any order and repeated, foreign events, and seeded random traces; whatever
// the chunk boundaries (down to 1 byte); truncated JSON and gzip named as such; the committed engine
// traces read identically.
#include "dom_reader.h"
#include "expect_input_error.h"
#include "profiler/trace/chrome_json.h"
#include "profiler/trace/gzip.h"

#include "core/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <vector>

namespace k3::profiler {
namespace {

void expect_identical(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.stream, b.stream);
  EXPECT_EQ(a.thread, b.thread);
  EXPECT_EQ(a.correlation, b.correlation);
  EXPECT_EQ(a.graph_node, b.graph_node);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.op_instance, b.op_instance);
  EXPECT_EQ(a.names(), b.names());
  EXPECT_EQ(a.metadata, b.metadata);
}

Trace read_in_chunks(const std::string& text, std::size_t chunk_bytes) {
  StringSource in(text, chunk_bytes);
  return parse_chrome_json(in, "chunked.json");
}

// Both readers on `text`: the same trace, whatever the chunks, or the same error. Syntax errors are
// worded by each parser, so there both must name the origin and say "malformed JSON".
void expect_readers_agree(const std::string& text, std::initializer_list<std::size_t> chunk_bytes = {1, 7, 4096}) {
  std::optional<Trace> dom;
  std::string dom_error;
  try {
    dom = dom::parse_chrome_json_dom(text, "chunked.json");
  } catch (const InputError& e) {
    dom_error = e.what();
  }
  for (const std::size_t chunk : chunk_bytes) {
    SCOPED_TRACE(fmt::format("{}-byte chunks of {}", chunk, text));
    if (dom) {
      expect_identical(*dom, read_in_chunks(text, chunk));
    } else if (dom_error.find("malformed JSON") != std::string::npos) {
      test::expect_input_error([&] { read_in_chunks(text, chunk); }, {"chunked.json: malformed JSON at byte"});
    } else {
      try {
        read_in_chunks(text, chunk);
        ADD_FAILURE() << "no error; the DOM reader says: " << dom_error;
      } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()), dom_error);
      }
    }
  }
}

std::string trace_with(const std::string& events, const std::string& top = "") {
  return "{" + top + "\"traceEvents\":[" + events + "]}";
}

const char* const kKernel =
    R"({"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":10.5,"dur":0.25,"args":{"device":0,"stream":7,"correlation":5}})";

TEST(StreamingReader, EveryEventKindRoundTrips) {
  Trace t;
  t.metadata["commit"] = "abc123";
  t.metadata["quote \" and \\ and é"] = "line\nbreak\ttab \x01";
  const std::int64_t base = 1'712'345'678'901'234'567;
  t.add({EventKind::range, "step 0", base, base + 99'999, -1, -1, kStepTrackThread, 0, 0, 0, "", -1});
  t.add({EventKind::range, "L001.kda.recurrent", base + 5, base + 12'345, -1, -1, 4242, 0, 0, 0, "", -1});
  t.add({EventKind::api, "cudaLaunchKernel", base + 1, base + 1'500, -1, -1, 4242, 11, 0, 0, "", -1});
  t.add({EventKind::kernel, "void k<\"q\">(int) \\ é€😀", base + 2'001, base + 9'999, 0, 7, -1, 11, 0, 0,
         "L001.kda.recurrent", 0});
  t.add({EventKind::memcpy, "memcpy_htod", base + 20'000, base + 20'001, 1, 3, -1, 12, 0, 4096, "", -1});
  t.add({EventKind::memset, "memset", base + 20'000, base + 21'000, 999, INT32_MAX, -1, 13, 5, 0, "x", 2});
  t.add({EventKind::kernel, "gemm", base + 30'000, base + 30'000, 0, 7, -1, 13, 77, 0, "head.lm_head", 3});
  t.sort();
  const std::string text = to_chrome_json(t);
  expect_readers_agree(text);
  const Trace back = parse_chrome_json(text, "mem");
  ASSERT_EQ(back.size(), 7u);
  // Sorted by (start, kind): the range at the base, the API call, the kernel, memcpy before memset.
  EXPECT_EQ(back.kind[0], EventKind::range);
  EXPECT_EQ(back.name_of(3), "void k<\"q\">(int) \\ é€😀");
  EXPECT_EQ(back.kind[5], EventKind::memset);
  EXPECT_EQ(back.stream[5], INT32_MAX);
  EXPECT_EQ(back.metadata.at("quote \" and \\ and é"), "line\nbreak\ttab \x01");
}

TEST(StreamingReader, EscapesUnicodeAndNumbersAsTheDomReadsThem) {
  // Every JSON escape, \u with surrogate pairs and NUL, raw UTF-8; ts and dur as integers, exponents,
  // -0 and a 3-byte BOM before the document.
  expect_readers_agree(trace_with(
      R"({"ph":"X","cat":"nvtx","name":"a\"b\\c\/d\b\f\n\r\t\u0001\u00e9\u20AC\ud83d\ude00\u0000z é€😀","tid":-2,)"
      R"("ts":1.5e3,"dur":2.5E-1,"args":{}},)"
      R"({"ph":"X","cat":"nvtx","name":"n","tid":0,"ts":1E+2,"dur":-0,"args":{}},)"
      R"({"ph":"X","cat":"nvtx","name":"n","tid":0,"ts":12345e-3,"dur":0.0001e4},)"
      R"({"ph":"X","cat":"nvtx","name":"n","tid":0,"ts":9000000000000,"dur":0.0005})"));
  expect_readers_agree("\xEF\xBB\xBF" + trace_with(kKernel));
  expect_readers_agree(" \n\t\r" + trace_with(kKernel) + " \n\t\r");
  // nlohmann takes a NUL byte after the document for the end of input.
  expect_readers_agree(trace_with(kKernel) + std::string("\0 junk", 6));
  const Trace t = parse_chrome_json(
      trace_with(R"({"ph":"X","cat":"nvtx","name":"\u00e9\ud83d\ude00","tid":1,"ts":1.5e3,"dur":2.5E-1})"), "m");
  EXPECT_EQ(t.name_of(0), "é😀");
  EXPECT_EQ(t.start_ns[0], 1'500'000);
  EXPECT_EQ(t.end_ns[0], 1'500'250);
}

TEST(StreamingReader, NumbersAreTheDoublesStrtodGives) {
  // A double where an integer belongs is in the message as nlohmann dumps it (the shortest text that
  // reads back), so equal messages mean bit-equal doubles. Mantissas of 1 to 25 digits, powers of ten
  // around and beyond the exact range, subnormals, underflow to 0, integers at the 64-bit limits.
  std::mt19937_64 rng(26);
  std::vector<std::string> numbers = {"18446744073709551615",
                                      "18446744073709551616",
                                      "-9223372036854775808",
                                      "-9223372036854775809",
                                      "9007199254740993",
                                      "9007199254740993.0",
                                      "4.9e-324",
                                      "2.4703282292062328e-324",
                                      "1e-400",
                                      "-1e-400",
                                      "1.7976931348623157e308",
                                      "123456789012345678901234567890",
                                      "0.1",
                                      "-0.0",
                                      "0e5",
                                      "1E22",
                                      "1e23"};
  for (int n = 0; n < 1500; ++n) {
    const int digits = 1 + static_cast<int>(rng() % 25);
    std::string mantissa;
    for (int d = 0; d < digits; ++d) mantissa += static_cast<char>('0' + (d == 0 ? 1 + rng() % 9 : rng() % 10));
    const int point = static_cast<int>(rng() % static_cast<std::uint64_t>(digits + 1));
    std::string text = rng() % 4 == 0 ? "-" : "";
    text += mantissa.substr(0, point == 0 ? 1 : point);
    if (point != 0 && point < digits) text += fmt::format(".{}", mantissa.substr(point));
    if (rng() % 2) text += fmt::format("e{}", static_cast<int>(rng() % 80) - 40);
    numbers.push_back(text);
  }
  for (const std::string& number : numbers) {
    expect_readers_agree(trace_with(R"({"ph":"X","cat":"nvtx","name":"r","ts":1,"dur":2,"tid":)" + number + "}"),
                         {4096});
  }
}

TEST(StreamingReader, KeysInAnyOrderAndTheLastOfDuplicatesWins) {
  // Base and metadata after the events; args before ph; unknown keys with nested values anywhere.
  expect_readers_agree(
      R"({"traceEvents":[{"args":{"x":[1,{"y":null}],"stream":7,"correlation":5,"device":0,"op":"o","op_instance":1},)"
      R"("dur":0.25,"ts":10.5,"name":"gemm","cat":"kernel","ph":"X","extra":{"a":[true,false,null,1.5]}}],)"
      R"("baseTimeNanoseconds":1000000,"k3perf":{"commit":"c","format":7},"other":[{"k":"v"}]})");
  // Repeated keys: name, args, and top-level traceEvents and k3perf (a bad first value is overwritten).
  expect_readers_agree(
      R"({"k3perf":{"commit":5},"traceEvents":[{"ph":"X"}],"k3perf":{"commit":"b","commit":"c"},"traceEvents":[)"
      R"({"ph":"X","cat":"kernel","name":"first","name":"gemm","ts":1,"dur":2,"args":{"device":9},)"
      R"("args":{"device":0,"stream":1,"correlation":1}}]})");
  expect_readers_agree(R"({"traceEvents":[],"traceEvents":{}})");
  expect_readers_agree(R"({"traceEvents":[],"k3perf":{},"k3perf":[]})");
}

TEST(StreamingReader, ForeignEventsAreSkipped) {
  expect_readers_agree(trace_with(
      R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1.0,"dur":2.0,"args":{"device":"cpu"}},)"
      R"({"ph":"s","id":1,"cat":"ac2g","name":"flow","pid":1,"tid":1,"ts":1.5},)"
      R"({"ph":"C","name":"mem","pid":1,"ts":1.0,"args":{"v":1}},)"
      R"({"ph":"M","name":"process_name","pid":0,"args":{"name":"GPU 0"}},)"
      R"({"ph":"X","name":"no category","ts":"bad"},)"
      R"({"ph":"i","cat":"kernel","name":"instant","ts":[]},)" +
      std::string(kKernel)));
  EXPECT_EQ(parse_chrome_json(trace_with(R"({"ph":"X","cat":"cpu_op","name":"aten::mm"})"), "m").size(), 0u);
}

TEST(StreamingReader, BadEventsGiveTheDomReadersMessages) {
  const std::string head = R"({"ph":"M","name":"process_name","pid":0},)";
  for (
      const std::string& event : std::vector<std::string>{
          "3",
          "[1,{\"a\":2}]",
          "null",
          "\"s\"",
          R"({"cat":"kernel"})",
          R"({"ph":1})",
          R"({"ph":"X","cat":null})",
          R"({"ph":"X","cat":["kernel"]})",
          R"({"ph":"X","cat":"kernel","name":{"x":[1,2]},"ts":1})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":[1,2],"dur":1})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":-2})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":9e12})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":9.1e12})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":true,"dur":1})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":[]})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":null})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":1.0,"stream":1,"correlation":1}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":1000,"stream":1,"correlation":1}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":-1,"correlation":1}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":2147483648,"correlation":1}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":9223372036854775808,"correlation":1}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":1,"correlation":-1}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":1,"correlation":"1"}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":1,"correlation":1,"graph_node":null}})",
          R"({"ph":"X","cat":"memcpy","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":1,"correlation":1}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":1,"correlation":1,"op":""}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":1,"correlation":1,"op":{"a":1}}})",
          R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":0,"stream":1,"correlation":1,"op":"o"}})",
          R"({"ph":"X","cat":"cuda_api","name":"cudaLaunchKernel","ts":1,"dur":2,"tid":3,"args":{"correlation":-4}})",
          R"({"ph":"X","cat":"cuda_api","name":"cudaLaunchKernel","ts":1,"dur":2,"tid":-1,"args":{"correlation":4}})",
          R"({"ph":"X","cat":"nvtx","name":"r","ts":1,"dur":2,"tid":-3})",
          R"({"ph":"X","cat":"nvtx","name":7,"ts":1,"dur":2,"tid":1})",
      }) {
    expect_readers_agree(trace_with(head + event), {1, 4096});
  }
  // The first bad event is reported, after the top-level keys, whatever the order they come in.
  expect_readers_agree(trace_with(head + R"({"ph":1},{"ph":2})"));
  expect_readers_agree(trace_with(R"({"ph":1})", R"("baseTimeNanoseconds":1.5,)"));
  expect_readers_agree(R"({"traceEvents":[{"ph":1}],"k3perf":{"b":"x","a":[1]},"baseTimeNanoseconds":2})");
  expect_readers_agree(R"({"traceEvents":[{"ph":1}],"k3perf":"x"})");
  expect_readers_agree(R"({"traceEvents":[],"k3perf":{"":5}})");
  expect_readers_agree(R"({"traceEvents":[{"":1,"ph":"X","cat":"nvtx","name":"r","ts":1,"dur":2,"tid":1}],"":[]})");
  expect_readers_agree(R"({"traceEvents":[],"baseTimeNanoseconds":null})");
  expect_readers_agree(R"({"traceEvents":[],"baseTimeNanoseconds":{"a":1}})");
  expect_readers_agree(R"({"traceEvents":[],"baseTimeNanoseconds":-5})");
  expect_readers_agree(R"([1,2])");
  expect_readers_agree(R"("trace")");
  expect_readers_agree(R"({"k3perf":{}})");
  expect_readers_agree(R"({"traceEvents":5})");
}

TEST(StreamingReader, SyntaxErrorsAreMalformedJson) {
  for (const std::string& text : std::vector<std::string>{"",
                                                          " ",
                                                          "{",
                                                          "{\"traceEvents\":[",
                                                          "{\"traceEvents\":[]",
                                                          "{\"traceEvents\":[]}x",
                                                          "{\"traceEvents\":[]}{}",
                                                          "{\"traceEvents\":[],}",
                                                          "{\"traceEvents\":[1,]}",
                                                          "{\"traceEvents\" []}",
                                                          "{traceEvents:[]}",
                                                          "{\"traceEvents\":[01]}",
                                                          "{\"traceEvents\":[1.]}",
                                                          "{\"traceEvents\":[.5]}",
                                                          "{\"traceEvents\":[1e]}",
                                                          "{\"traceEvents\":[-]}",
                                                          "{\"traceEvents\":[+1]}",
                                                          "{\"traceEvents\":[tru]}",
                                                          "{\"traceEvents\":[nul]}",
                                                          "{\"traceEvents\":[\"\\x\"]}",
                                                          "{\"traceEvents\":[\"\\u12\"]}",
                                                          "{\"traceEvents\":[\"\\ud800\"]}",
                                                          "{\"traceEvents\":[\"\\udc00\"]}",
                                                          "{\"traceEvents\":[\"\\ud800\\u0041\"]}",
                                                          "{\"traceEvents\":[\"a\nb\"]}",
                                                          "{\"traceEvents\":[\"\xff\"]}",
                                                          "{\"traceEvents\":[\"\xc0\x80\"]}",
                                                          "{\"traceEvents\":[\"\xed\xa0\x80\"]}",
                                                          "{\"traceEvents\":[\"\xf4\x90\x80\x80\"]}",
                                                          "{\"traceEvents\":[\"\xe2\x82\"]}",
                                                          "{\"traceEvents\":[\"abc",
                                                          "{\"traceEvents\":[]]",
                                                          "{\"traceEvents\":[}",
                                                          "\xEF\xBB{}"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(dom::parse_chrome_json_dom(text, "bad.json"), InputError);
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{4096}}) {
      StringSource in(text, chunk);
      test::expect_input_error([&] { parse_chrome_json(in, "bad.json"); }, {"bad.json: malformed JSON at byte"});
    }
  }
}

TEST(StreamingReader, TruncatedJsonIsMalformedAtEveryLength) {
  Trace t;
  t.metadata["commit"] = "abc";
  t.add({EventKind::kernel, "gemm \"q\"", 1000, 2000, 0, 7, -1, 11, 3, 0, "L001.x", 0});
  t.add({EventKind::api, "cudaLaunchKernel", 900, 950, -1, -1, 4242, 11, 0, 0, "", -1});
  t.sort();
  const std::string text = to_chrome_json(t);
  const std::size_t last = text.find_last_of('}');
  for (std::size_t n = 0; n <= last; ++n) {
    StringSource in(std::string_view(text).substr(0, n), 3);
    test::expect_input_error([&] { parse_chrome_json(in, "cut.json"); }, {"cut.json: malformed JSON"});
  }
}

// Seeded random traces written as another tool might: keys shuffled, numbers in several forms, names
// with escapes and unicode, foreign events and unknown keys between ours.
std::string random_trace_json(std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint32_t>(n)); };
  const std::vector<std::string> names = {"\"gemm\"",
                                          "\"void k<\\\"q\\\">(int)\"",
                                          "\"\\u00e9t\\u00E9 \\ud83d\\ude00\"",
                                          "\"é€😀 raw\"",
                                          "\"tab\\tnew\\nline\\\\\"",
                                          "\"\\/slash\"",
                                          "\"nvjet_sm90_tst_64x8_64x16_2x1_v_bz_splitK_TNT\""};
  const std::vector<std::string> ops = {"\"L001.kda.recurrent\"", "\"head.lm_head\"", "\"\\u004c002.moe\""};
  const auto microseconds = [&](std::int64_t ns) {
    switch (pick(4)) {
      case 0: return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
      case 1: return fmt::format("{}e-3", ns);
      case 2: return ns % 1000 == 0 ? fmt::format("{}", ns / 1000) : fmt::format("{}E-3", ns);
      default: return fmt::format("{:.6e}", static_cast<double>(ns) / 1000.0);
    }
  };
  std::string out = "{";
  std::vector<std::string> top;
  top.push_back(fmt::format("\"baseTimeNanoseconds\":{}", 1'000'000'000 + pick(1000)));
  top.push_back("\"k3perf\":{\"format\":\"k3perf-trace-1\",\"commit\":\"c\",\"gpu\":\"H\\u0032\"}");
  top.push_back("\"displayTimeUnit\":\"ns\"");
  std::string events = "\"traceEvents\":[";
  const int count = 50 + pick(150);
  for (int i = 0; i < count; ++i) {
    if (i) events += ",";
    std::vector<std::string> keys;
    const int kind = pick(7);  // 5, 6: foreign
    if (kind == 5) {
      events += R"({"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1.0,"dur":2.0,"args":{"External id":3}})";
      continue;
    }
    if (kind == 6) {
      events += R"({"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7"}})";
      continue;
    }
    const char* const cats[] = {"kernel", "memcpy", "memset", "cuda_api", "nvtx"};
    keys.push_back("\"ph\":\"X\"");
    keys.push_back(fmt::format("\"cat\":\"{}\"", cats[kind]));
    keys.push_back("\"name\":" + names[pick(static_cast<int>(names.size()))]);
    keys.push_back("\"ts\":" + microseconds(pick(2'000'000)));
    keys.push_back("\"dur\":" + microseconds(pick(50'000)));
    keys.push_back(fmt::format("\"pid\":{}", pick(3)));
    std::vector<std::string> args;
    if (kind >= 3) {
      keys.push_back(fmt::format("\"tid\":{}", kind == 4 && pick(4) == 0 ? -2 : pick(5000)));
      if (kind == 3) args.push_back(fmt::format("\"correlation\":{}", pick(100000)));
    } else {
      args.push_back(fmt::format("\"device\":{}", pick(8)));
      args.push_back(fmt::format("\"stream\":{}", pick(40)));
      args.push_back(fmt::format("\"correlation\":{}", pick(100000)));
      if (pick(2)) args.push_back(fmt::format("\"graph_node\":{}", 1 + pick(1000)));
      if (kind != 0) args.push_back(fmt::format("\"bytes\":{}", pick(1 << 20)));
      if (pick(2)) {
        args.push_back("\"op\":" + ops[pick(static_cast<int>(ops.size()))]);
        args.push_back(fmt::format("\"op_instance\":{}", pick(100)));
      }
    }
    if (pick(3) == 0) args.push_back(R"("extra":[1,{"nested":[null,true]}])");
    std::shuffle(args.begin(), args.end(), rng);
    std::string a = "{";
    for (std::size_t j = 0; j < args.size(); ++j) a += (j ? "," : "") + args[j];
    keys.push_back("\"args\":" + a + "}");
    std::shuffle(keys.begin(), keys.end(), rng);
    events += "{";
    for (std::size_t j = 0; j < keys.size(); ++j) events += (j ? (pick(5) ? "," : " ,\n ") : "") + keys[j];
    events += "}";
  }
  top.push_back(events + "]");
  std::shuffle(top.begin(), top.end(), rng);
  for (std::size_t j = 0; j < top.size(); ++j) out += (j ? "," : "") + top[j];
  return out + "}";
}

TEST(StreamingReader, RandomTracesReadAsTheDomReadsThem) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    const std::string text = random_trace_json(seed);
    const Trace t = dom::parse_chrome_json_dom(text, "chunked.json");
    EXPECT_GT(t.size(), 20u);
    expect_readers_agree(text, {1, 13, 1 << 16});
  }
}

TEST(StreamingReader, GzipInTinyChunksAndTruncatedGzipNameTheFile) {
  const std::string text = random_trace_json(7);
  const Trace expected = dom::parse_chrome_json_dom(text, "x");
  const std::string gz = gzip_compress(text, 1);
  StringSource one_byte(gz, 1);
  GzipSource inflated(one_byte, "tiny.json.gz");
  expect_identical(expected, parse_chrome_json(inflated, "tiny.json.gz"));

  const auto dir = std::filesystem::temp_directory_path() / "k3perf_streaming_reader_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.json.gz").string();
  write_file_atomically(path, gz);
  expect_identical(expected, read_trace(path));
  // (A 1-byte file lacks the 2 magic bytes: it is read as JSON.)
  for (const std::size_t n : {std::size_t{2}, std::size_t{10}, gz.size() / 3, gz.size() - 9, gz.size() - 1}) {
    write_file_atomically(path, gz.substr(0, n));
    test::expect_input_error([&] { read_trace(path); }, {path, "truncated gzip"});
  }
  // Whole gzip, truncated JSON inside.
  write_file_atomically(path, gzip_compress(text.substr(0, text.size() / 2), 1));
  test::expect_input_error([&] { read_trace(path); }, {path, "malformed JSON"});
  std::filesystem::remove_all(dir);
}

TEST(StreamingReader, CommittedEngineTracesReadAsTheDomReadsThem) {
  const std::string folder = std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-12-01-h200-engine-traces-9/";
  for (const char* file :
       {"trace_decode_b1_ctx8192.json.gz", "trace_decode_b1_ctx131072.json.gz", "trace_decode_b1_ctx1048512.json.gz"}) {
    SCOPED_TRACE(file);
    const std::string path = folder + file;
    const Trace t = read_trace(path);
    expect_identical(dom::parse_chrome_json_dom(gzip_decompress(read_file(path), path), path), t);
    // The run's own count of kernels, in its metadata, against the kernel events read.
    std::size_t kernels = 0;
    for (const EventKind k : t.kind) kernels += k == EventKind::kernel;
    EXPECT_EQ(std::to_string(kernels), t.metadata.at("kernels"));
    EXPECT_GT(kernels, 2000u);
  }
}

}  // namespace
}  // namespace k3::profiler
