// What a written trace shows beside its events: the op ranges projected onto the GPU (eager steps and CUDA-graph
// replays alike), launch -> kernel flows, named and ordered tracks, counts as numbers; and the Kineto flavour,
// checked against the fields HolisticTraceAnalysis reads. Built from synthetic activity records through
// attribute(), as the CUPTI collector hands them over, and from the committed H200 traces.
#include "profiler/attribution/attribute.h"
#include "profiler/trace/chrome_json.h"

#include "activity_markers.h"
#include "perfetto_drop_rule.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace k3::profiler {
namespace {

// Step 0 eager: two ops, the first with two kernels (the second starts 30 ns before the first ends: programmatic
// dependent launch), then a copy of the second op. The graph is captured from ranges of the same two ops; steps 1
// and 2 replay it (one cudaGraphLaunch each, its kernels carrying the clones' node ids) inside a range
// "decode.graph_replay" that is not an op of the graph.
ActivityRecords two_ops_eager_then_replayed() {
  ActivityRecords r;
  r.metadata["commit"] = "abc1234";
  push(r, 0, 1, "L001.kda.recurrent");
  r.api_calls.push_back({"cudaLaunchKernel_v7000", 10, 20, 1, 1});
  r.api_calls.push_back({"cudaLaunchKernel_v7000", 30, 40, 1, 2});
  pop(r, 50, 1);
  push(r, 60, 1, "L001.moe.experts");
  r.api_calls.push_back({"cuLaunchKernelEx", 70, 80, 1, 3});
  r.api_calls.push_back({"cudaMemcpyAsync_v3020", 90, 95, 1, 4});
  pop(r, 100, 1);
  r.kernels.push_back({"recurrent_a", 1000, 1500, 0, 7, 1, 0});
  r.kernels.push_back({"recurrent_b", 1470, 1800, 0, 7, 2, 0});
  r.kernels.push_back({"experts", 1800, 2600, 0, 7, 3, 0});
  r.memory.push_back({false, "memcpy_dtod", 2600, 2700, 0, 7, 4, 0, 4096});
  for (std::uint64_t c : {1, 2, 3, 4}) r.external_correlations.push_back({c, 0});
  // Capture.
  push(r, 3000, 1, "L001.kda.recurrent");
  r.api_calls.push_back({"cudaLaunchKernel_v7000", 3010, 3020, 1, 10});
  r.graph_node_captures.push_back({100, 10});
  r.api_calls.push_back({"cudaLaunchKernel_v7000", 3030, 3040, 1, 11});
  r.graph_node_captures.push_back({101, 11});
  pop(r, 3050, 1);
  push(r, 3060, 1, "L001.moe.experts");
  r.api_calls.push_back({"cuLaunchKernelEx", 3070, 3080, 1, 12});
  r.graph_node_captures.push_back({102, 12});
  pop(r, 3090, 1);
  for (std::uint64_t n : {100, 101, 102}) r.graph_node_clones.push_back({n, n + 100});
  for (int step = 1; step <= 2; ++step) {
    const std::int64_t t0 = step * 10'000;
    const std::uint64_t corr = 20 + step;
    push(r, t0, 1, "decode.graph_replay");
    r.api_calls.push_back({"cudaGraphLaunch_v10000", t0 + 10, t0 + 30, 1, corr});
    pop(r, t0 + 40, 1);
    r.kernels.push_back({"recurrent_a", t0 + 500, t0 + 1000, 0, 7, corr, 200});
    r.kernels.push_back({"recurrent_b", t0 + 1000, t0 + 1300, 0, 7, corr, 201});
    r.kernels.push_back({"experts", t0 + 1300, t0 + 2100, 0, 7, corr, 202});
    r.external_correlations.push_back({corr, std::uint64_t(step)});
  }
  return r;
}

struct Span {
  std::string name;
  long long pid, tid, ts_ns, end_ns;
  nlohmann::json args;
  bool operator<(const Span& o) const { return std::tie(ts_ns, name, tid) < std::tie(o.ts_ns, o.name, o.tid); }
};
long long ns(const nlohmann::json& us) { return std::llround(us.get<double>() * 1000); }

std::vector<Span> events_of(const nlohmann::json& doc, const std::string& cat) {
  std::vector<Span> out;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == cat) {
      out.push_back({e.at("name"), e.at("pid"), e.at("tid"), ns(e.at("ts")), ns(e.at("ts")) + ns(e.at("dur")),
                     e.value("args", nlohmann::json::object())});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TraceViews, OpRangesProjectedOntoTheGpuForEagerStepsAndGraphReplays) {
  const Attribution a = attribute(two_ops_eager_then_replayed());
  const std::string json = to_chrome_json(a.trace);
  const nlohmann::json doc = nlohmann::json::parse(json);
  const long long base = doc.at("baseTimeNanoseconds");
  const std::vector<Span> spans = events_of(doc, "gpu_user_annotation");
  // Step 0: recurrent_b overlaps recurrent_a, so it is on lane 2 of stream 7 with a span of its own; the experts
  // kernel and the copy of one op instance make one span. Steps 1 and 2 (replays): the captured ops, never the
  // range around the replay.
  const long long lane = 7 + kLaneTidStride;
  const std::vector<std::tuple<std::string, long long, long long, long long, long long>> want = {
      {"L001.kda.recurrent", 7, 1000, 1500, 0},   {"L001.kda.recurrent", lane, 1470, 1800, 0},
      {"L001.moe.experts", 7, 1800, 2700, 0},     {"L001.kda.recurrent", 7, 10'500, 11'300, 1},
      {"L001.moe.experts", 7, 11'300, 12'100, 1}, {"L001.kda.recurrent", 7, 20'500, 21'300, 2},
      {"L001.moe.experts", 7, 21'300, 22'100, 2}};
  ASSERT_EQ(spans.size(), want.size()) << json;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& [name, tid, start, end, instance] = want[i];
    EXPECT_EQ(spans[i].name, name) << i;
    EXPECT_EQ(spans[i].pid, 0) << i;
    EXPECT_EQ(spans[i].tid, tid) << i;
    EXPECT_EQ(spans[i].ts_ns + base, start) << i;
    EXPECT_EQ(spans[i].end_ns + base, end) << i;
    EXPECT_EQ(spans[i].args.at("op_instance"), instance) << i;
    EXPECT_EQ(spans[i].args.at("stream"), 7) << i;
  }
  EXPECT_EQ(spans[2].args.at("events"), 2);  // the experts kernel and the copy
  for (const Span& s : spans) EXPECT_NE(s.name, "decode.graph_replay");
  EXPECT_TRUE(test::perfetto_would_drop(json).empty());
  // The reader skips the spans: the trace comes back as it was written.
  const Trace back = parse_chrome_json(json, "spans.json");
  EXPECT_EQ(back.size(), a.trace.size());
}

TEST(TraceViews, GpuOpSpansAreRunsOfOneOpInstancePerTrack) {
  // Two ops interleaved on one stream (A B A), an unattributed kernel inside a run of A: four runs, never merged
  // across the other op or the unattributed kernel.
  Trace t;
  t.add({EventKind::kernel, "a1", 0, 10, 0, 1, kNone, 1, 0, 0, "A", 0});
  t.add({EventKind::kernel, "b1", 10, 20, 0, 1, kNone, 2, 0, 0, "B", 0});
  t.add({EventKind::kernel, "a2", 20, 30, 0, 1, kNone, 3, 0, 0, "A", 0});
  t.add({EventKind::kernel, "x", 30, 40, 0, 1, kNone, 4, 0, 0, "", kNone});
  t.add({EventKind::kernel, "a3", 40, 50, 0, 1, kNone, 5, 0, 0, "A", 0});
  t.add({EventKind::kernel, "a4", 50, 60, 0, 1, kNone, 6, 0, 0, "A", 1});  // the next instance
  t.add({EventKind::kernel, "a5", 55, 65, 0, 2, kNone, 7, 0, 0, "A", 1});  // another stream
  t.sort();
  const std::vector<GpuOpSpan> spans = gpu_op_spans(t, trace_lanes(t));
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t, int>> got;
  for (const GpuOpSpan& s : spans) got.push_back({t.names()[s.op], s.op_instance, s.start_ns, s.end_ns, s.stream});
  const decltype(got) want = {{"A", 0, 0, 10, 1},  {"B", 0, 10, 20, 1}, {"A", 0, 20, 30, 1},
                              {"A", 0, 40, 50, 1}, {"A", 1, 50, 60, 1}, {"A", 1, 55, 65, 2}};
  EXPECT_EQ(got, want);
}

TEST(TraceViews, EveryLaunchIsTiedToItsGpuWorkByAFlow) {
  const Attribution a = attribute(two_ops_eager_then_replayed());
  const nlohmann::json doc = nlohmann::json::parse(to_chrome_json(a.trace));
  const long long base = doc.at("baseTimeNanoseconds");
  std::map<long long, nlohmann::json> starts, finishes;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "s") {
      EXPECT_TRUE(starts.emplace(e.at("id").get<long long>(), e).second) << e;
    }
    if (e.at("ph") == "f") {
      EXPECT_TRUE(finishes.emplace(e.at("id").get<long long>(), e).second) << e;
    }
  }
  // 4 eager pieces of GPU work (3 kernels and a copy) and 3 replayed kernels per replay, each with its launch.
  EXPECT_EQ(starts.size(), 10u);
  ASSERT_EQ(finishes.size(), starts.size());
  // Each pair: s at the launch's start on its host track, f with "bp":"e" at the work's start on its GPU track.
  std::map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> api_start;  // correlation -> (start, thread)
  for (std::size_t i = 0; i < a.trace.size(); ++i) {
    if (a.trace.kind[i] == EventKind::api) api_start[a.trace.correlation[i]] = {a.trace.start_ns[i], a.trace.thread[i]};
  }
  std::multiset<std::pair<long long, long long>> expected, seen;  // (launch start, work start)
  for (std::size_t i = 0; i < a.trace.size(); ++i) {
    if (a.trace.kind[i] == EventKind::api || a.trace.kind[i] == EventKind::range) continue;
    expected.insert({api_start.at(a.trace.correlation[i]).first, a.trace.start_ns[i]});
  }
  for (const auto& [id, s] : starts) {
    const nlohmann::json& f = finishes.at(id);
    EXPECT_EQ(s.at("cat"), "ac2g");
    EXPECT_EQ(f.at("cat"), "ac2g");
    EXPECT_EQ(s.at("pid"), kHostPid);
    EXPECT_EQ(s.at("tid"), 1);
    EXPECT_EQ(f.at("pid"), 0);
    EXPECT_EQ(f.at("bp"), "e");
    seen.insert({ns(s.at("ts")) + base, ns(f.at("ts")) + base});
  }
  EXPECT_EQ(seen, expected);
}

TEST(TraceViews, TracksAreNamedAndOrderedCountsAreNumbers) {
  const Attribution a = attribute(two_ops_eager_then_replayed());
  const nlohmann::json doc = nlohmann::json::parse(to_chrome_json(a.trace));
  std::map<long long, std::string> process_name;
  std::map<long long, long long> process_order;
  std::map<std::pair<long long, long long>, std::string> thread_name;
  std::map<std::pair<long long, long long>, long long> thread_order;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") != "M") continue;
    const long long pid = e.at("pid"), tid = e.at("tid");
    const nlohmann::json& args = e.at("args");
    if (e.at("name") == "process_name") process_name[pid] = args.at("name");
    if (e.at("name") == "process_sort_index") process_order[pid] = args.at("sort_index").get<long long>();
    if (e.at("name") == "thread_name") thread_name[{pid, tid}] = args.at("name");
    if (e.at("name") == "thread_sort_index") thread_order[{pid, tid}] = args.at("sort_index").get<long long>();
  }
  EXPECT_EQ(process_name, (std::map<long long, std::string>{
                              {0, "GPU 0"}, {kHostPid, "host: CUDA API"}, {kOpRangePid, "ops (NVTX ranges)"}}));
  ASSERT_EQ(process_order.size(), 3u);
  EXPECT_LT(process_order.at(kOpRangePid), process_order.at(kHostPid));  // the host first, ops on top
  EXPECT_LT(process_order.at(kHostPid), process_order.at(0));
  // Every track that holds an event is named and ordered; a stream's lane comes right after it.
  std::set<std::pair<long long, long long>> tracks;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X") tracks.insert({e.at("pid").get<long long>(), e.at("tid").get<long long>()});
  }
  for (const auto& track : tracks) {
    EXPECT_TRUE(thread_name.count(track)) << track.first << " " << track.second;
    EXPECT_TRUE(thread_order.count(track)) << track.first << " " << track.second;
  }
  EXPECT_EQ(thread_name.at({0, 7 + kLaneTidStride}), "stream 7 (overlapping, lane 2)");
  EXPECT_EQ(thread_order.at({0, 7 + kLaneTidStride}), thread_order.at({0, 7}) + 1);
  EXPECT_EQ(thread_name.at({kOpRangePid, kStepTrackThread}), "steps");
  // Counts as numbers, text as text; read back the same.
  const nlohmann::json& meta = doc.at("k3perf");
  EXPECT_TRUE(meta.at("kernels").is_number_integer());
  EXPECT_EQ(meta.at("kernels"), 9);
  EXPECT_EQ(meta.at("steps"), 3);
  EXPECT_EQ(meta.at("dropped_records"), 0);
  EXPECT_EQ(meta.at("commit"), "abc1234");
  const Trace back = parse_chrome_json(doc.dump(), "meta.json");
  EXPECT_EQ(back.metadata, a.trace.metadata);
  EXPECT_EQ(back.integer_keys, a.trace.integer_keys);
  EXPECT_EQ(back.metadata.at("kernels"), "9");
}

TEST(TraceViews, ApiNamesLoseCuptisVersionSuffix) {
  EXPECT_EQ(unversioned_api_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(unversioned_api_name("cudaLaunchKernelExC_v11060"), "cudaLaunchKernelExC");
  EXPECT_EQ(unversioned_api_name("cuLaunchKernelEx"), "cuLaunchKernelEx");
  EXPECT_EQ(unversioned_api_name("cudaGraphLaunch_v10000"), "cudaGraphLaunch");
  EXPECT_EQ(unversioned_api_name("cudaFoo_v"), "cudaFoo_v");      // no digits: not a version
  EXPECT_EQ(unversioned_api_name("cudaFoo_v2x"), "cudaFoo_v2x");  // not only digits
  EXPECT_EQ(unversioned_api_name("sync: event"), "sync: event");
  EXPECT_EQ(unversioned_api_name("my_v2"), "my_v2");  // not a CUDA call
}

// HolisticTraceAnalysis (facebookresearch/HolisticTraceAnalysis) reads a Kineto trace with these fields; each
// is listed with the file that reads it.
//   hta/common/trace_file.py (create_rank_to_trace_dict): the rank, by the pattern "rank":\s+(\d+) over the text
//     (distributedInfo.rank; a space after the colon);
//   hta/common/trace_parser.py (infer_gpu_type, _compress_df): distributedInfo.backend; every event's "cat" and
//     "dur" (rows without them are dropped), "name", "ph", "ts", "pid", "tid"; "cudaLaunchKernel" among the names
//     for an NVIDIA GPU;
//   hta/configs/event_args_formats/event_args_1.0.0.yaml (ARGS_MINIMUM, ARGS_DEFAULT): args "stream" and
//     "correlation" (Int), "External id" (Int), "device" (Int), "bytes" (Int);
//   hta/common/trace.py (transform_correlation_to_index, add_iteration): "correlation" shared by the host call
//     and its GPU work, GPU work with "stream" > 0, host events with no stream, "ProfilerStep#<n>" steps;
//   hta/common/trace_symbol_table.py (get_runtime_launch_events_mask, get_operator_or_cuda_runtime_mask):
//     categories "cuda_runtime" and "cuda_driver", launch names "cudaLaunchKernel", "cudaLaunchKernelExC",
//     "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync", "cudaMemsetAsync";
//   hta/analyzers/breakdown_analysis.py (temporal breakdown, gpu user annotation breakdown): GPU categories
//     "kernel", "gpu_memcpy", "gpu_memset"; "gpu_user_annotation" spans on the same pid and tid as the kernels
//     they hold; hta/common/trace_filter.py (MemCopyEventFilter): copies named "Memcpy HtoD", "Memcpy DtoH",
//     "Memcpy DtoD" in "gpu_memcpy"; hta/common/types.py: "cuda_sync" for waits.
TEST(TraceViews, KinetoFlavourHasTheFieldsHtaReads) {
  ActivityRecords records = two_ops_eager_then_replayed();
  records.api_calls.push_back({"cudaStreamSynchronize_v3020", 30'000, 30'500, 1, 50});
  records.synchronizations.push_back({"sync: stream", 30'010, 30'490, 50});
  const Attribution a = attribute(records);
  const std::string text = to_chrome_json(a.trace, TraceFormat::kineto);
  const nlohmann::json doc = nlohmann::json::parse(text);

  std::smatch rank;
  ASSERT_TRUE(std::regex_search(text, rank, std::regex(R"re("rank":\s+(\d+))re")));
  EXPECT_EQ(rank[1], "0");
  EXPECT_EQ(doc.at("distributedInfo").at("backend"), "nccl");
  EXPECT_EQ(doc.at("distributedInfo").at("world_size"), 1);

  const std::set<std::string> kinds = {"kernel",          "gpu_memcpy",          "gpu_memset",
                                       "cuda_runtime",    "cuda_driver",         "cuda_sync",
                                       "user_annotation", "gpu_user_annotation", "ac2g"};
  std::set<std::string> cats, names;
  std::map<long long, std::vector<const nlohmann::json*>> by_correlation;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M") continue;
    for (const char* key : {"ph", "cat", "name", "ts", "pid", "tid"}) ASSERT_TRUE(e.contains(key)) << key << " " << e;
    EXPECT_TRUE(kinds.count(e.at("cat"))) << e;
    cats.insert(e.at("cat"));
    names.insert(e.at("name"));
    if (e.at("ph") != "X") continue;
    ASSERT_TRUE(e.contains("dur")) << e;
    const nlohmann::json& args = e.at("args");
    const std::string cat = e.at("cat");
    for (const auto& [key, value] : args.items()) {
      if (key == "External id" || key == "correlation" || key == "stream" || key == "device" || key == "bytes") {
        EXPECT_TRUE(value.is_number_integer()) << key << " " << e;
      }
    }
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      EXPECT_GT(args.at("stream").get<long long>(), 0) << e;
      EXPECT_GE(args.at("device").get<long long>(), 0) << e;
      EXPECT_EQ(args.at("stream"), e.at("tid").get<long long>() % kLaneTidStride) << e;
      by_correlation[args.at("correlation")].push_back(&e);
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      EXPECT_FALSE(args.contains("stream")) << e;
      by_correlation[args.at("correlation")].push_back(&e);
    }
    if (cat == "cuda_driver") {
      EXPECT_EQ(e.at("name").get<std::string>().rfind("cu", 0), 0u) << e;
    }
    if (cat == "cuda_runtime") {
      EXPECT_EQ(e.at("name").get<std::string>().rfind("cuda", 0), 0u) << e;
    }
    EXPECT_EQ(e.at("name").get<std::string>().find("_v1"), std::string::npos) << e;
    EXPECT_EQ(e.at("name").get<std::string>().find("_v7"), std::string::npos) << e;
  }
  for (const char* cat : {"kernel", "gpu_memcpy", "cuda_runtime", "cuda_driver", "cuda_sync", "user_annotation",
                          "gpu_user_annotation", "ac2g"}) {
    EXPECT_TRUE(cats.count(cat)) << cat;
  }
  for (const char* name : {"cudaLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch", "cudaMemcpyAsync", "Memcpy DtoD",
                           "Stream Sync", "ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  // Each GPU event's correlation names exactly one host call; External id ties the call and its work to the
  // NVTX range around the call.
  std::map<std::string, long long> range_id;  // name@ts -> External id
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "user_annotation" && e.at("args").contains("External id")) {
      range_id[e.at("name").get<std::string>() + "@" + e.at("ts").dump()] = e.at("args").at("External id");
    }
  }
  EXPECT_EQ(range_id.size(), 6u);  // the NVTX ranges: 2 eager, 2 at capture, 2 around replays (steps have none)
  for (const auto& [correlation, events] : by_correlation) {
    int host = 0;
    for (const nlohmann::json* e : events) host += e->at("pid") == kHostPid;
    EXPECT_EQ(host, 1) << "correlation " << correlation;
    std::set<long long> ids;
    for (const nlohmann::json* e : events) ids.insert(e->at("args").value("External id", -1));
    EXPECT_EQ(ids.size(), 1u) << "correlation " << correlation;
  }
  // The replays' kernels carry the External id of the range around their cudaGraphLaunch (step 1's, the first).
  long long replay_range = -1;
  for (const Span& r : events_of(doc, "user_annotation")) {
    if (r.name == "decode.graph_replay" && replay_range < 0) replay_range = r.args.at("External id");
  }
  for (const nlohmann::json* e : by_correlation.at(21)) EXPECT_EQ(e->at("args").at("External id"), replay_range);
  // gpu_user_annotation on the same pid and tid as the kernels it holds (HTA matches them so).
  std::set<std::pair<long long, long long>> kernel_tracks;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "kernel")
      kernel_tracks.insert({e.at("pid").get<long long>(), e.at("tid").get<long long>()});
  }
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "gpu_user_annotation") {
      EXPECT_TRUE(kernel_tracks.count({e.at("pid").get<long long>(), e.at("tid").get<long long>()})) << e;
    }
  }
  // ProfilerStep#n spans the host calls that launched the step's work: step 1 is its cudaGraphLaunch.
  const long long base = doc.at("baseTimeNanoseconds");
  for (const Span& s : events_of(doc, "user_annotation")) {
    if (s.name == "ProfilerStep#1") {
      EXPECT_EQ(s.ts_ns + base, 10'010);
      EXPECT_EQ(s.end_ns + base, 10'030);
    }
    if (s.name == "ProfilerStep#0") {
      EXPECT_EQ(s.ts_ns + base, 10);
      EXPECT_EQ(s.end_ns + base, 95);
    }
  }
  EXPECT_TRUE(test::perfetto_would_drop(text).empty());
  // k3perf reads the kernels of a Kineto-flavoured file back with their ops (compare works on either format).
  const Trace back = parse_chrome_json(text, "kineto.json");
  std::size_t kernels = 0;
  for (std::size_t i = 0; i < back.size(); ++i) {
    if (back.kind[i] != EventKind::kernel) continue;
    ++kernels;
    EXPECT_FALSE(back.op_of(i).empty());
  }
  EXPECT_EQ(kernels, 9u);
}

TEST(TraceFormat, ParsesItsNames) {
  TraceFormat f = TraceFormat::k3perf;
  EXPECT_TRUE(parse_trace_format("kineto", &f));
  EXPECT_EQ(f, TraceFormat::kineto);
  EXPECT_TRUE(parse_trace_format("k3perf", &f));
  EXPECT_EQ(f, TraceFormat::k3perf);
  EXPECT_FALSE(parse_trace_format("nsys", &f));
}

}  // namespace
}  // namespace k3::profiler
