// Attribution of synthetic activity records to ops: nested ranges (innermost wins), several steps
// (instances in time order), CUDA-graph replays through captured and cloned node ids, two host
// threads launching onto overlapping streams, start/end ranges ended on another thread, dropped
// and unmatched records counted, and a brute-force check of the innermost-range search.
#include "profiler/attribution/attribute.h"
#include "profiler/trace/chrome_json.h"

#include "activity_markers.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>

namespace k3::profiler {
namespace {

// A launch API call at t on `thread` and its kernel at t + 1000 on `stream`, 500 ns long.
void launch(ActivityRecords& r, std::int64_t t, std::int64_t thread, std::uint64_t corr, int stream = 7,
            const std::string& kernel = "k") {
  r.api_calls.push_back({"cudaLaunchKernel", t, t + 50, thread, corr});
  r.kernels.push_back({kernel, t + 1000, t + 1500, 0, stream, corr, 0});
}

// The op and instance of the kernel with this correlation id (and graph node, for replays).
std::pair<std::string, std::int64_t> op_of_kernel(const Trace& t, std::uint64_t corr, std::uint64_t node = 0) {
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] == EventKind::kernel && t.correlation[i] == corr && t.graph_node[i] == node) {
      return {t.op_of(i), t.op_instance[i]};
    }
  }
  ADD_FAILURE() << "no kernel with correlation " << corr << " node " << node;
  return {"", -2};
}

TEST(Attribution, InnermostEnclosingRangeOnTheLaunchingThread) {
  ActivityRecords r;
  push(r, 0, 1, "decode.step");
  push(r, 10, 1, "L001.kda.recurrent");
  launch(r, 20, 1, 1);
  pop(r, 30, 1);
  push(r, 40, 1, "L001.moe.experts");
  launch(r, 50, 1, 2);
  launch(r, 60, 1, 3);
  pop(r, 70, 1);
  launch(r, 80, 1, 4);  // only decode.step is open
  pop(r, 90, 1);
  launch(r, 100, 1, 5);  // nothing open
  const Attribution a = attribute(r);
  EXPECT_EQ(op_of_kernel(a.trace, 1), std::make_pair(std::string("L001.kda.recurrent"), std::int64_t{0}));
  EXPECT_EQ(op_of_kernel(a.trace, 2), std::make_pair(std::string("L001.moe.experts"), std::int64_t{0}));
  EXPECT_EQ(op_of_kernel(a.trace, 3), std::make_pair(std::string("L001.moe.experts"), std::int64_t{0}));
  EXPECT_EQ(op_of_kernel(a.trace, 4), std::make_pair(std::string("decode.step"), std::int64_t{0}));
  EXPECT_EQ(op_of_kernel(a.trace, 5), std::make_pair(std::string(""), std::int64_t{-1}));
  EXPECT_EQ(a.report.kernels, 5u);
  EXPECT_EQ(a.report.attributed_through_ranges, 4u);
  EXPECT_EQ(a.report.outside_op_ranges, 1u);
  EXPECT_EQ(a.report.unattributed(), 1u);
  // A launch exactly at a range's end is outside it; at its start, inside.
  ActivityRecords edge;
  push(edge, 100, 1, "head.lm_head");
  launch(edge, 100, 1, 1);
  pop(edge, 200, 1);
  launch(edge, 200, 1, 2);
  const Attribution e = attribute(edge);
  EXPECT_EQ(op_of_kernel(e.trace, 1).first, "head.lm_head");
  EXPECT_EQ(op_of_kernel(e.trace, 2).first, "");
}

TEST(Attribution, InstancesNumberTheStepsInTimeOrder) {
  ActivityRecords r;
  for (int step = 0; step < 3; ++step) {
    const std::int64_t t0 = step * 10'000;
    push(r, t0, 1, "L001.kda.recurrent");
    launch(r, t0 + 10, 1, 100 + step);
    launch(r, t0 + 20, 1, 200 + step);
    pop(r, t0 + 30, 1);
    push(r, t0 + 40, 1, "head.lm_head");
    pop(r, t0 + 50, 1);  // an empty range is no instance
    push(r, t0 + 60, 1, "head.lm_head");
    launch(r, t0 + 70, 1, 300 + step);
    pop(r, t0 + 80, 1);
  }
  const Attribution a = attribute(r);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(op_of_kernel(a.trace, 100 + step).second, step);
    EXPECT_EQ(op_of_kernel(a.trace, 200 + step).second, step);
    EXPECT_EQ(op_of_kernel(a.trace, 300 + step), std::make_pair(std::string("head.lm_head"), std::int64_t{step}));
  }
  // The attributed trace survives its JSON form unchanged.
  const Trace back = parse_chrome_json(to_chrome_json(a.trace), "mem");
  ASSERT_EQ(back.size(), a.trace.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back.op_of(i), a.trace.op_of(i));
    EXPECT_EQ(back.op_instance[i], a.trace.op_instance[i]);
  }
  EXPECT_EQ(back.metadata.at("kernels"), "9");
}

TEST(Attribution, GraphReplaysThroughCapturedAndClonedNodes) {
  ActivityRecords r;
  // Capture: the launches inside op ranges create graph nodes 100 and 101 (no kernels run).
  r.api_calls.push_back({"cudaStreamBeginCapture", 0, 5, 1, 1});
  push(r, 10, 1, "L002.mla.attn_decode");
  r.api_calls.push_back({"cudaLaunchKernel", 20, 25, 1, 10});
  r.graph_node_captures.push_back({100, 10});
  pop(r, 30, 1);
  push(r, 40, 1, "head.lm_head");
  r.api_calls.push_back({"cudaLaunchKernel", 50, 55, 1, 11});
  r.graph_node_captures.push_back({101, 11});
  r.api_calls.push_back({"cudaLaunchKernel", 56, 58, 1, 12});
  r.graph_node_captures.push_back({102, 12});
  pop(r, 60, 1);
  r.graph_node_captures.push_back({103, 999});  // its launch record was dropped: no op
  // Instantiation clones the nodes; a clone of a clone inherits too.
  r.graph_node_clones.push_back({100, 200});
  r.graph_node_clones.push_back({101, 201});
  r.graph_node_clones.push_back({102, 202});
  r.graph_node_clones.push_back({202, 302});
  // Two replays, inside an unrelated range on the replaying thread: graph nodes take precedence.
  for (int step = 0; step < 2; ++step) {
    const std::int64_t t0 = 1000 + step * 1000;
    const std::uint64_t corr = 20 + step;
    push(r, t0, 1, "decode.step");
    r.api_calls.push_back({"cudaGraphLaunch", t0 + 10, t0 + 20, 1, corr});
    pop(r, t0 + 30, 1);
    r.kernels.push_back({"attn", t0 + 100, t0 + 200, 0, 7, corr, 200});
    r.kernels.push_back({"gemv", t0 + 200, t0 + 300, 0, 7, corr, 201});
    r.kernels.push_back({"argmax", t0 + 300, t0 + 350, 0, 7, corr, step == 0 ? 202u : 302u});
    r.kernels.push_back({"mystery", t0 + 350, t0 + 360, 0, 7, corr, 203});
  }
  const Attribution a = attribute(r);
  EXPECT_EQ(a.graph_node_ops.at(200), "L002.mla.attn_decode");
  EXPECT_EQ(a.graph_node_ops.at(201), "head.lm_head");
  EXPECT_EQ(a.graph_node_ops.at(302), "head.lm_head");
  EXPECT_EQ(a.graph_node_ops.count(103), 0u);
  for (int step = 0; step < 2; ++step) {
    const std::uint64_t corr = 20 + step;
    EXPECT_EQ(op_of_kernel(a.trace, corr, 200),
              std::make_pair(std::string("L002.mla.attn_decode"), std::int64_t{step}));
    EXPECT_EQ(op_of_kernel(a.trace, corr, 201), std::make_pair(std::string("head.lm_head"), std::int64_t{step}));
    EXPECT_EQ(op_of_kernel(a.trace, corr, 203), std::make_pair(std::string(""), std::int64_t{-1}));
  }
  EXPECT_EQ(op_of_kernel(a.trace, 21, 302), std::make_pair(std::string("head.lm_head"), std::int64_t{1}));
  EXPECT_EQ(a.report.kernels, 8u);
  EXPECT_EQ(a.report.attributed_through_graph_nodes, 6u);
  EXPECT_EQ(a.report.graph_node_not_captured, 2u);
  EXPECT_EQ(a.trace.metadata.at("unattributed_kernels_graph_node_not_captured"), "2");
}

TEST(Attribution, ExternalCorrelationIdsBecomeStepRanges) {
  ActivityRecords r;
  // Step 0 eager (two launches), steps 1 and 2 graph replays (one launch each, three kernels); a launch
  // outside any step and an external id of another launch whose records were dropped.
  push(r, 0, 1, "L001.kda.recurrent");
  launch(r, 10, 1, 1);
  launch(r, 20, 1, 2);
  pop(r, 30, 1);
  r.external_correlations.push_back({1, 0});
  r.external_correlations.push_back({2, 0});
  for (int step = 1; step <= 2; ++step) {
    const std::int64_t t0 = step * 10'000;
    const std::uint64_t corr = 10 + step;
    r.api_calls.push_back({"cudaGraphLaunch", t0, t0 + 20, 1, corr});
    r.kernels.push_back({"a", t0 + 100, t0 + 200, 0, 7, corr, 0});
    r.kernels.push_back({"b", t0 + 250, t0 + 400, 0, 7, corr, 0});
    r.kernels.push_back({"c", t0 + 400, t0 + 900, 0, 8, corr, 0});
    r.external_correlations.push_back({corr, std::uint64_t(step)});
  }
  launch(r, 50'000, 1, 99);
  r.external_correlations.push_back({12345, 7});
  const Attribution a = attribute(r);
  EXPECT_EQ(a.report.steps, 3u);
  EXPECT_EQ(a.report.kernels_in_steps, 8u);
  EXPECT_EQ(a.trace.metadata.at("steps"), "3");
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> steps;
  for (std::size_t i = 0; i < a.trace.size(); ++i) {
    if (a.trace.kind[i] == EventKind::range && a.trace.thread[i] == kStepTrackThread) {
      steps[a.trace.name_of(i)] = {a.trace.start_ns[i], a.trace.end_ns[i]};
    }
  }
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps.at("step 0"), std::make_pair(std::int64_t{1010}, std::int64_t{1520}));  // the two kernels
  EXPECT_EQ(steps.at("step 1"), std::make_pair(std::int64_t{10'100}, std::int64_t{10'900}));
  EXPECT_EQ(steps.at("step 2"), std::make_pair(std::int64_t{20'100}, std::int64_t{20'900}));
  // The step track survives the Chrome JSON round trip with its name.
  const std::string json = to_chrome_json(a.trace);
  EXPECT_NE(json.find("{\"name\":\"steps\"}"), std::string::npos);
  const Trace back = parse_chrome_json(json, "test");
  std::size_t step_ranges = 0;
  for (std::size_t i = 0; i < back.size(); ++i) {
    step_ranges += back.kind[i] == EventKind::range && back.thread[i] == kStepTrackThread;
  }
  EXPECT_EQ(step_ranges, 3u);
}

// The step ranges of each "step N" range on the step track, by name.
std::map<std::string, std::pair<std::int64_t, std::int64_t>> step_track(const Trace& t) {
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> steps;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] == EventKind::range && t.thread[i] == kStepTrackThread)
      steps[t.name_of(i)] = {t.start_ns[i], t.end_ns[i]};
  }
  return steps;
}

// A program traced from outside (k3perf profile) pushes no external ids: its NVTX step ranges mark the steps.
TEST(Attribution, NvtxStepRangesBecomeStepRangesAndNoOps) {
  ActivityRecords r;
  push(r, 0, 1, "step 0");  // eager: two op ranges and a launch between them
  push(r, 10, 1, "L001.kda.recurrent");
  launch(r, 20, 1, 1);
  pop(r, 30, 1);
  launch(r, 40, 1, 2);  // inside the step, outside any op
  pop(r, 50, 1);
  push(r, 10'000, 1, "step 1");  // a graph replay: one launch, two kernels
  r.api_calls.push_back({"cudaGraphLaunch", 10'010, 10'030, 1, 11});
  r.kernels.push_back({"a", 10'100, 10'200, 0, 7, 11, 0});
  r.kernels.push_back({"b", 10'250, 10'900, 0, 8, 11, 0});
  pop(r, 10'040, 1);
  push(r, 20'000, 2, "ProfilerStep#5");  // PyTorch's name, another thread
  launch(r, 20'010, 2, 21);
  pop(r, 20'100, 2);
  push(r, 30'000, 1, "step 2b");  // not a step's name: an op
  launch(r, 30'010, 1, 31);
  pop(r, 30'100, 1);
  launch(r, 40'000, 1, 41);  // after every step
  const Attribution a = attribute(r);
  EXPECT_EQ(a.report.steps, 3u);
  EXPECT_EQ(a.report.kernels_in_steps, 5u);
  const auto steps = step_track(a.trace);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps.at("step 0"), std::make_pair(std::int64_t{1020}, std::int64_t{1540}));
  EXPECT_EQ(steps.at("step 1"), std::make_pair(std::int64_t{10'100}, std::int64_t{10'900}));
  EXPECT_EQ(steps.at("step 5"), std::make_pair(std::int64_t{21'010}, std::int64_t{21'510}));
  EXPECT_EQ(op_of_kernel(a.trace, 1).first, "L001.kda.recurrent");
  EXPECT_EQ(op_of_kernel(a.trace, 2), std::make_pair(std::string(""), std::int64_t{-1}));  // a step is no op
  EXPECT_EQ(op_of_kernel(a.trace, 21), std::make_pair(std::string(""), std::int64_t{-1}));
  EXPECT_EQ(op_of_kernel(a.trace, 31).first, "step 2b");
  EXPECT_EQ(a.report.outside_op_ranges, 5u);  // 2, the replay's two, 21, 41
  // The step ranges are drawn once, on the step track, not also as host ranges of their threads.
  for (std::size_t i = 0; i < a.trace.size(); ++i) {
    if (a.trace.kind[i] == EventKind::range && a.trace.thread[i] != kStepTrackThread) {
      EXPECT_TRUE(a.trace.name_of(i) == "L001.kda.recurrent" || a.trace.name_of(i) == "step 2b") << a.trace.name_of(i);
    }
  }
}

// External correlation ids, where the program pushes them, decide the steps; its step ranges are then only marks.
TEST(Attribution, ExternalCorrelationIdsWinOverStepRanges) {
  ActivityRecords r;
  push(r, 0, 1, "step 3");
  launch(r, 10, 1, 1);
  launch(r, 20, 1, 2);
  pop(r, 30, 1);
  r.external_correlations.push_back({1, 8});
  const Attribution a = attribute(r);
  EXPECT_EQ(a.report.steps, 1u);
  EXPECT_EQ(a.report.kernels_in_steps, 1u);
  EXPECT_EQ(step_track(a.trace).count("step 8"), 1u);
}

TEST(Attribution, SynchronisationsAreDrawnOnTheWaitingThread) {
  ActivityRecords r;
  launch(r, 0, 5, 1);
  r.api_calls.push_back({"cudaStreamSynchronize", 100, 2000, 5, 2});
  r.synchronizations.push_back({"sync: stream", 120, 1990, 2});
  r.synchronizations.push_back({"sync: event", 3000, 3100, 77});  // its API record was dropped: thread 0
  const Attribution a = attribute(r);
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>> waits;
  for (std::size_t i = 0; i < a.trace.size(); ++i) {
    if (a.trace.kind[i] == EventKind::api && a.trace.name_of(i).rfind("sync: ", 0) == 0) {
      waits.emplace_back(a.trace.name_of(i), a.trace.start_ns[i], a.trace.end_ns[i], a.trace.thread[i]);
    }
  }
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(waits[0],
            std::make_tuple(std::string("sync: stream"), std::int64_t{120}, std::int64_t{1990}, std::int64_t{5}));
  EXPECT_EQ(waits[1],
            std::make_tuple(std::string("sync: event"), std::int64_t{3000}, std::int64_t{3100}, std::int64_t{0}));
  EXPECT_EQ(a.report.kernels, 1u);  // waits are not kernels
}

TEST(Attribution, TwoThreadsOverlappingStreamsAndRanges) {
  // Thread 1 runs an MLA op on stream 7 while thread 2 runs an all-to-all on stream 8; their
  // ranges and kernels overlap in time, so only the launching thread decides.
  ActivityRecords r;
  push(r, 0, 1, "L004.mla.attn_decode");
  push(r, 5, 2, "L004.moe.all_to_all");
  launch(r, 10, 1, 1, 7);
  launch(r, 12, 2, 2, 8);
  launch(r, 14, 1, 3, 7);
  pop(r, 20, 2);
  launch(r, 22, 1, 4, 8);  // thread 1 onto stream 8: still its own op
  pop(r, 30, 1);
  const Attribution a = attribute(r);
  EXPECT_EQ(op_of_kernel(a.trace, 1).first, "L004.mla.attn_decode");
  EXPECT_EQ(op_of_kernel(a.trace, 2).first, "L004.moe.all_to_all");
  EXPECT_EQ(op_of_kernel(a.trace, 3).first, "L004.mla.attn_decode");
  EXPECT_EQ(op_of_kernel(a.trace, 4).first, "L004.mla.attn_decode");
  EXPECT_EQ(a.report.unattributed(), 0u);
}

TEST(Attribution, StartEndRangesPairById) {
  ActivityRecords r;
  r.markers.push_back({MarkerPhase::start, 0, 1, 77, "L001.kda.chunk"});
  launch(r, 10, 1, 1);
  r.markers.push_back({MarkerPhase::end, 20, 3, 77, ""});  // ended from another thread
  launch(r, 30, 1, 2);
  r.markers.push_back({MarkerPhase::end, 40, 1, 78, ""});  // never started
  const Attribution a = attribute(r);
  EXPECT_EQ(op_of_kernel(a.trace, 1).first, "L001.kda.chunk");
  EXPECT_EQ(op_of_kernel(a.trace, 2).first, "");
  EXPECT_EQ(a.report.unmatched_markers, 1u);
}

TEST(Attribution, DroppedAndUnmatchedRecordsAreCountedAndCarried) {
  ActivityRecords r;
  r.dropped_records = 5;
  r.metadata["commit"] = "abc";
  pop(r, 1, 1);  // its push was dropped
  push(r, 10, 1, "L001.kda.recurrent");
  launch(r, 20, 1, 1);
  r.api_calls.push_back({"cudaMemcpyAsync", 25, 26, 1, 3});
  pop(r, 30, 1);
  r.kernels.push_back({"orphan", 40, 60, 0, 7, 2, 0});  // its launch record was dropped
  r.memory.push_back({false, "memcpy_dtoh", 70, 90, 0, 7, 3, 0, 4096});
  push(r, 100, 1, "head.lm_head");  // never popped: closed at the trace's end
  launch(r, 110, 1, 4);
  const Attribution a = attribute(r);
  EXPECT_EQ(a.report.dropped_records, 5u);
  EXPECT_EQ(a.report.without_launch_record, 1u);
  EXPECT_EQ(a.report.unmatched_markers, 1u);
  EXPECT_EQ(a.report.unclosed_ranges, 1u);
  EXPECT_EQ(a.report.kernels, 3u);
  EXPECT_EQ(op_of_kernel(a.trace, 4).first, "head.lm_head");
  const Trace& t = a.trace;
  EXPECT_EQ(t.metadata.at("dropped_records"), "5");
  EXPECT_EQ(t.metadata.at("unattributed_kernels_without_launch_record"), "1");
  EXPECT_EQ(t.metadata.at("commit"), "abc");
  bool saw_copy = false, saw_open_range = false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.kind[i] == EventKind::memcpy) {
      saw_copy = true;
      EXPECT_EQ(t.op_of(i), "L001.kda.recurrent");  // copies are attributed like kernels
      EXPECT_EQ(t.bytes[i], 4096);
    }
    if (t.kind[i] == EventKind::range && t.name_of(i) == "head.lm_head") {
      saw_open_range = true;
      EXPECT_EQ(t.end_ns[i], 110 + 1500);  // the last event's end
    }
  }
  EXPECT_TRUE(saw_copy);
  EXPECT_TRUE(saw_open_range);
}

TEST(Attribution, RecordedSourceHandsBackItsRecords) {
  ActivityRecords r;
  launch(r, 0, 1, 1);
  RecordedActivitySource source(r);
  source.start();
  EXPECT_EQ(source.stop().kernels.size(), 1u);
}

// Random properly nested push/pop ranges on three threads, launches at random times: the op must
// be the latest-started range open on the thread at the launch (a brute-force scan).
TEST(Attribution, InnermostMatchesBruteForce) {
  std::mt19937_64 rng(20261130);
  ActivityRecords r;
  struct Open {
    std::string name;
    std::int64_t start;
  };
  struct Closed {
    std::string name;
    std::int64_t start, end, thread;
  };
  std::vector<Closed> closed;
  std::vector<std::vector<Open>> stacks(3);
  std::vector<std::tuple<std::int64_t, std::int64_t, std::uint64_t>> launches;  // time, thread, corr
  std::int64_t t = 0;
  std::uint64_t corr = 1;
  for (int i = 0; i < 3000; ++i) {
    t += 1 + static_cast<std::int64_t>(rng() % 5);
    const std::int64_t th = static_cast<std::int64_t>(rng() % 3);
    const int action = static_cast<int>(rng() % 3);
    if (action == 0 && stacks[th].size() < 6) {
      const std::string name = "op" + std::to_string(rng() % 20);
      push(r, t, th, name);
      stacks[th].push_back({name, t});
    } else if (action == 1 && !stacks[th].empty()) {
      pop(r, t, th);
      closed.push_back({stacks[th].back().name, stacks[th].back().start, t, th});
      stacks[th].pop_back();
    } else {
      r.api_calls.push_back({"cudaLaunchKernel", t, t, th, corr});
      r.kernels.push_back({"k", t + 3, t + 4, 0, 7, corr, 0});
      launches.push_back({t, th, corr++});
    }
  }
  for (std::int64_t th = 0; th < 3; ++th) {
    for (const Open& o : stacks[th]) closed.push_back({o.name, o.start, INT64_MAX, th});
  }
  const Attribution a = attribute(r);
  for (const auto& [when, th, c] : launches) {
    std::string expect;
    std::int64_t best = -1;
    for (const Closed& cr : closed) {
      if (cr.thread == th && cr.start <= when && when < cr.end && cr.start > best) {
        best = cr.start;
        expect = cr.name;
      }
    }
    ASSERT_EQ(op_of_kernel(a.trace, c).first, expect) << "launch at " << when << " on thread " << th;
  }
}

}  // namespace
}  // namespace k3::profiler
