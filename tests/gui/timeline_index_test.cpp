// The timeline index against brute-force scans of the trace it indexes: tracks, op spans, level-of-detail
// queries (every span that meets a window in exactly one drawn span), range statistics, search, the predicted
// lane and op duration distributions; and against a recorded H200 trace's own attribution counts.
#include "gui/model/timeline_index.h"
#include "core/op_names.h"
#include "gui/model/timeline_stats.h"
#include "profiler/trace/chrome_json.h"

#include <QTest>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>

using k3::gui::DrawSpan;
using k3::gui::TimelineIndex;
using k3::gui::TimelineTrack;
using k3::gui::TrackKind;
using k3::profiler::Event;
using k3::profiler::EventKind;
using k3::profiler::Trace;

namespace {

const std::string kRun = std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-12-01-h200-engine-traces-9";
const char* kOps[] = {"L001.mla.q_proj", "L001.mla.attn_decode", "L001.moe.experts", "head.lm_head"};

// Steps of back-to-back ops on two streams; sub-microsecond kernels in bursts, microsecond ones between, some
// overlapping across streams; memcpys; host API calls that the timeline ignores. With `step_ranges` false the
// steps come from op instances.
std::shared_ptr<Trace> synthetic_trace(int steps, bool step_ranges) {
  auto trace = std::make_shared<Trace>();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> tiny(0, 900), big(1000, 20000), gap(0, 3000), burst(1, 40);
  std::int64_t t = 1'000'000;
  for (int s = 0; s < steps; ++s) {
    const std::int64_t step_start = t;
    for (int o = 0; o < 4; ++o) {
      const int kernels = o == 0 ? 1 : burst(rng);  // the first op: one kernel of known duration
      for (int k = 0; k < kernels; ++k) {
        Event e;
        e.kind = k % 11 == 5 ? EventKind::memcpy : EventKind::kernel;
        e.name = e.kind == EventKind::memcpy ? "memcpy_dtod" : (k % 3 ? "gemm_bf16_tn" : "rmsnorm_warp_per_row");
        e.device = 0;
        e.stream = k % 4 == 3 ? 9 : 7;
        e.start_ns = t;
        e.end_ns = t + (k % 5 == 0 ? big(rng) : tiny(rng));
        // The first kernel of the first op is the one of known duration (the distribution test).
        if (o == 0 && k == 0) e.end_ns = t + 1000 * (s < 10 ? s + 1 : 100);
        e.op = o == 3 && k == 0 ? "" : kOps[o];
        e.op_instance = e.op.empty() ? k3::profiler::kNone : s;
        trace->add(e);
        t = (e.stream == 9 ? e.start_ns + 100 : e.end_ns) + gap(rng);
      }
    }
    Event api;
    api.kind = EventKind::api;
    api.name = "cudaGraphLaunch";
    api.thread = 42;
    api.start_ns = step_start - 500;
    api.end_ns = step_start + 100;
    trace->add(api);
    if (step_ranges) {
      Event step;
      step.kind = EventKind::range;
      step.name = "step " + std::to_string(s);
      step.thread = k3::profiler::kStepTrackThread;
      step.start_ns = step_start;
      step.end_ns = t;
      trace->add(step);
    }
    t += 5000;
  }
  trace->sort();
  return trace;
}

// Kernels at random starts on one stream, overlapping (as programmatic dependent launches do), many nested in
// longer ones.
std::shared_ptr<Trace> overlapping_trace() {
  auto trace = std::make_shared<Trace>();
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int64_t> start(0, 1'000'000), tiny(0, 2000), big(0, 20'000);
  for (int k = 0; k < 3000; ++k) {
    Event e;
    e.name = "k" + std::to_string(k % 7);
    e.device = 0;
    e.stream = 7;
    e.start_ns = start(rng);
    e.end_ns = e.start_ns + (k % 500 == 0 ? big(rng) : tiny(rng));
    trace->add(e);
  }
  trace->sort();
  return trace;
}

bool is_gpu(EventKind k) { return k == EventKind::kernel || k == EventKind::memcpy || k == EventKind::memset; }

// Checks one query against the track's spans: runs cover consecutive spans, counts add up to the spans that meet
// the window, every drawn span holds its spans, lone spans are the spans themselves.
void check_query(const TimelineIndex& index, int track, std::int64_t t0, std::int64_t t1, double width_px) {
  const TimelineTrack& t = index.tracks()[static_cast<std::size_t>(track)];
  std::vector<DrawSpan> drawn;
  index.query(track, t0, t1, width_px, &drawn);
  std::vector<std::size_t> meeting;
  for (std::size_t k = 0; k < t.size(); ++k) {
    if (t.start_ns[k] < t1 && t.end_ns[k] >= t0) meeting.push_back(k);
  }
  std::size_t total = 0;
  std::size_t m = 0;  // next meeting span
  const std::int64_t min_ns = std::max<std::int64_t>(1, std::llround((t1 - t0) / width_px));
  for (std::size_t d = 0; d < drawn.size(); ++d) {
    const std::size_t next_first = d + 1 < drawn.size() ? drawn[d + 1].first : t.size();
    QVERIFY(drawn[d].first < next_first);
    QVERIFY(m < meeting.size());
    QCOMPARE(meeting[m], static_cast<std::size_t>(drawn[d].first));
    std::uint32_t inside = 0;
    for (; m < meeting.size() && meeting[m] < next_first; ++m, ++inside) {
      QVERIFY(t.start_ns[meeting[m]] >= drawn[d].start_ns);
      QVERIFY(t.end_ns[meeting[m]] <= drawn[d].end_ns);
    }
    QCOMPARE(inside, drawn[d].count);
    if (drawn[d].count == 1) {
      QCOMPARE(drawn[d].start_ns, t.start_ns[drawn[d].first]);
      QCOMPARE(drawn[d].end_ns, t.end_ns[drawn[d].first]);
    } else {
      QVERIFY2(drawn[d].end_ns - drawn[d].start_ns < min_ns * static_cast<std::int64_t>(2 * drawn[d].count + 2),
               "a run spans no more than its spans and the pixel gaps between them");
    }
    total += drawn[d].count;
  }
  QCOMPARE(total, meeting.size());
}

}  // namespace

class TimelineIndexTest : public QObject {
  Q_OBJECT

 private slots:
  void tracks_hold_every_gpu_event_once_in_start_order() {
    const auto trace = synthetic_trace(30, true);
    const TimelineIndex index(trace, nullptr);
    std::vector<std::string> labels;
    for (const TimelineTrack& t : index.tracks()) labels.push_back(t.label);
    QCOMPARE(labels, (std::vector<std::string>{"steps", "predicted", "GPU 0 ops", "GPU 0 stream 7", "GPU 0 stream 9"}));
    std::map<int, std::size_t> per_stream;
    for (std::size_t i = 0; i < trace->size(); ++i) per_stream[trace->stream[i]] += is_gpu(trace->kind[i]);
    QCOMPARE(index.tracks()[3].size(), per_stream[7]);
    QCOMPARE(index.tracks()[4].size(), per_stream[9]);
    for (const TimelineTrack& t : index.tracks()) {
      QVERIFY(std::is_sorted(t.start_ns.begin(), t.start_ns.end()));
      for (std::size_t k = 0; k < t.size(); ++k) {
        QVERIFY(t.max_end_ns[k] >= t.end_ns[k]);
        if (k) QVERIFY(t.max_end_ns[k] >= t.max_end_ns[k - 1]);
      }
    }
    QCOMPARE(index.tracks()[0].size(), std::size_t{30});
    QCOMPARE(index.info(0, 3).name, std::string("step 3"));
  }

  void op_spans_run_from_first_to_last_kernel_of_each_instance() {
    const auto trace = synthetic_trace(30, true);
    const TimelineIndex index(trace, nullptr);
    std::map<std::pair<std::string, std::int64_t>, std::pair<std::int64_t, std::int64_t>> brute;
    std::map<std::pair<std::string, std::int64_t>, std::size_t> kernels;
    for (std::size_t i = 0; i < trace->size(); ++i) {
      if (!is_gpu(trace->kind[i]) || trace->op[i] == k3::profiler::kNone) continue;
      const auto key = std::make_pair(trace->op_of(i), trace->op_instance[i]);
      auto [it, added] = brute.emplace(key, std::make_pair(trace->start_ns[i], trace->end_ns[i]));
      if (!added) it->second.second = std::max(it->second.second, trace->end_ns[i]);
      ++kernels[key];
    }
    const int ops = index.track_of(TrackKind::ops);
    const TimelineTrack& t = index.tracks()[static_cast<std::size_t>(ops)];
    QCOMPARE(t.size(), brute.size());
    for (std::uint32_t k = 0; k < t.size(); ++k) {
      const auto s = index.info(ops, k);
      const auto key = std::make_pair(s.op, s.instance);
      QCOMPARE(s.start_ns, brute.at(key).first);
      QCOMPARE(s.end_ns, brute.at(key).second);
      const auto span = t.ref[k];
      QCOMPARE(static_cast<std::size_t>(index.span_rows_end(span) - index.span_rows_begin(span)), kernels.at(key));
      for (auto* r = index.span_rows_begin(span); r != index.span_rows_end(span); ++r) {
        QCOMPARE(trace->op_of(*r), s.op);
      }
    }
  }

  void queries_account_for_every_span_in_the_window_once() {
    const auto trace = synthetic_trace(40, true);
    const TimelineIndex index(trace, nullptr);
    std::mt19937 rng(3);
    const std::int64_t a = index.begin_ns(), b = index.end_ns();
    std::uniform_int_distribution<std::int64_t> at(a - 10000, b + 10000);
    for (int track = 0; track < static_cast<int>(index.tracks().size()); ++track) {
      check_query(index, track, a, b, 1600);  // fully zoomed out
      check_query(index, track, a, b, 50);
      for (int q = 0; q < 60; ++q) {
        std::int64_t t0 = at(rng), t1 = at(rng);
        if (q % 3 == 0) t1 = t0 + (q + 1) * 2000;  // deep zoom
        if (t1 < t0) std::swap(t0, t1);
        if (t1 == t0) ++t1;
        check_query(index, track, t0, t1, 100 + 37 * q);
      }
    }
  }

  void queries_of_overlapping_spans_count_only_those_that_reach_the_window() {
    const TimelineIndex index(overlapping_trace(), nullptr);
    const int stream = index.track_of(TrackKind::stream);
    std::mt19937 rng(5);
    std::uniform_int_distribution<std::int64_t> at(0, 1'000'000), length(100, 400'000);
    for (int q = 0; q < 300; ++q) {
      const std::int64_t t0 = at(rng);
      check_query(index, stream, t0, t0 + length(rng), 40 + q);
    }
  }

  void a_zoomed_out_query_draws_about_one_span_per_pixel() {
    const auto trace = synthetic_trace(400, true);
    const TimelineIndex index(trace, nullptr);
    const int stream = index.track_of(TrackKind::stream);
    std::vector<DrawSpan> drawn;
    index.query(stream, index.begin_ns(), index.end_ns(), 800, &drawn);
    QVERIFY2(index.tracks()[static_cast<std::size_t>(stream)].size() > 8000, "the trace outnumbers the pixels");
    QVERIFY(drawn.size() <= 2 * 800 + 2);
    QVERIFY(std::any_of(drawn.begin(), drawn.end(), [](const DrawSpan& d) { return d.collapsed(); }));
  }

  void range_statistics_equal_a_direct_sum() {
    const auto trace = synthetic_trace(30, true);
    const TimelineIndex index(trace, nullptr);
    const std::int64_t t0 = index.begin_ns() + (index.end_ns() - index.begin_ns()) / 5;
    const std::int64_t t1 = index.begin_ns() + (index.end_ns() - index.begin_ns()) * 3 / 5;
    const auto r = k3::gui::range_stats(index, t0, t1);
    std::size_t kernels = 0, memcpys = 0;
    std::int64_t gpu_ns = 0;
    std::map<std::string, std::int64_t> by_kind;
    std::vector<std::pair<std::int64_t, int>> edges;  // sweep: +1 at a start, -1 at an end
    for (std::size_t i = 0; i < trace->size(); ++i) {
      if (!is_gpu(trace->kind[i]) || trace->start_ns[i] >= t1 || trace->end_ns[i] < t0) continue;
      kernels += trace->kind[i] == EventKind::kernel;
      memcpys += trace->kind[i] == EventKind::memcpy;
      const std::int64_t a = std::max(trace->start_ns[i], t0), b = std::min(trace->end_ns[i], t1);
      gpu_ns += b - a;
      const auto ref = k3::parse_op_name(trace->op_of(i));
      by_kind[ref ? k3::to_string(k3::op_info(ref->id).kind) : "unattributed"] += b - a;
      edges.push_back({a, +1});
      edges.push_back({b, -1});
    }
    std::sort(edges.begin(), edges.end());
    std::int64_t busy = 0, open_since = 0;
    int open = 0;
    for (const auto& [time, delta] : edges) {
      if (open == 0 && delta > 0) open_since = time;
      open += delta;
      if (open == 0) busy += time - open_since;
    }
    QVERIFY(kernels > 100);
    QCOMPARE(r.kernels, kernels);
    QCOMPARE(r.memcpys, memcpys);
    QCOMPARE(r.gpu_ns, gpu_ns);
    QCOMPARE(r.busy_ns, busy);
    QCOMPARE(r.idle_ns, (t1 - t0) - busy);
    QVERIFY(r.idle_ns > 0);
    std::map<std::string, std::int64_t> got;
    for (const auto& k : r.by_kind) got[k.kind] = k.gpu_ns;
    QCOMPARE(got, by_kind);
    QVERIFY(got.count("gemm") && got.count("mla_attention") && got.count("moe_experts") && got.count("unattributed"));
  }

  void search_finds_kernels_and_ops_by_substring() {
    const auto trace = synthetic_trace(10, true);
    const TimelineIndex index(trace, nullptr);
    const auto r = k3::gui::search(index, "RMSNORM");
    std::size_t brute = 0;
    for (std::size_t i = 0; i < trace->size(); ++i)
      brute += is_gpu(trace->kind[i]) && trace->name_of(i) == "rmsnorm_warp_per_row";
    QCOMPARE(r.total, brute);
    const auto ops = k3::gui::search(index, "attn_decode", 5);
    std::size_t attn = 10;  // one op span per step, plus its GPU events
    for (std::size_t i = 0; i < trace->size(); ++i) attn += trace->op_of(i) == "L001.mla.attn_decode";
    QCOMPARE(ops.total, attn);
    QCOMPARE(ops.hits.size(), std::size_t{5});
    QVERIFY(k3::gui::search(index, "no such kernel").hits.empty());
  }

  void the_predicted_lane_lays_ops_back_to_back_from_each_step() {
    const auto trace = synthetic_trace(5, true);
    k3::gui::PredictionData p;
    for (const auto& [name, kind, us] :
         {std::tuple{"L001.mla.q_proj", "gemm", 3.0}, std::tuple{"L001.mla.attn_decode", "mla_attention", 0.0},
          std::tuple{"L001.moe.experts", "moe_experts", 12.5}}) {
      k3::gui::PredictedOpRow row;
      row.name = name;
      row.kind = kind;
      row.exposed_us = us;
      p.ops.push_back(row);
    }
    TimelineIndex index(trace, &p);
    const int lane = index.track_of(TrackKind::predicted);
    const TimelineTrack& steps = index.tracks()[0];
    const TimelineTrack& t = index.tracks()[static_cast<std::size_t>(lane)];
    QCOMPARE(t.size(), std::size_t{10});  // the zero-exposed op adds nothing
    for (std::size_t s = 0; s < 5; ++s) {
      QCOMPARE(t.start_ns[2 * s], steps.start_ns[s]);
      QCOMPARE(t.end_ns[2 * s], steps.start_ns[s] + 3000);
      QCOMPARE(t.start_ns[2 * s + 1], steps.start_ns[s] + 3000);
      QCOMPARE(t.end_ns[2 * s + 1], steps.start_ns[s] + 15500);
      QCOMPARE(index.info(lane, static_cast<std::uint32_t>(2 * s + 1)).op, std::string("L001.moe.experts"));
    }
    QCOMPARE(index.kind_of(index.find_name("L001.moe.experts")), std::string("moe_experts"));
    const std::size_t spans = index.spans().size();
    index.set_prediction(nullptr);
    QCOMPARE(index.tracks()[static_cast<std::size_t>(lane)].size(), std::size_t{0});
    QCOMPARE(index.spans().size(), spans - 10);
  }

  void without_step_ranges_op_instances_make_the_steps() {
    const auto trace = synthetic_trace(6, false);
    const TimelineIndex index(trace, nullptr);
    const TimelineTrack& steps = index.tracks()[0];
    QCOMPARE(steps.size(), std::size_t{6});
    for (std::uint32_t s = 0; s < 6; ++s) {
      std::int64_t first = INT64_MAX, last = INT64_MIN;
      for (std::size_t i = 0; i < trace->size(); ++i) {
        if (trace->op_instance[i] == s)
          first = std::min(first, trace->start_ns[i]), last = std::max(last, trace->end_ns[i]);
      }
      QCOMPARE(steps.start_ns[s], first);
      QCOMPARE(steps.end_ns[s], last);
      QCOMPARE(index.info(0, s).name, "instance " + std::to_string(s));
    }
  }

  void the_distribution_is_the_sorted_durations_with_outliers_past_the_fence() {
    const auto trace = synthetic_trace(11, true);
    const TimelineIndex index(trace, nullptr);
    const auto d = k3::gui::op_distribution(index, "L001.mla.q_proj");
    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> extent;  // instance -> span
    for (std::size_t i = 0; i < trace->size(); ++i) {
      if (trace->op_of(i) != "L001.mla.q_proj") continue;
      auto [it, added] = extent.emplace(trace->op_instance[i], std::make_pair(trace->start_ns[i], trace->end_ns[i]));
      if (!added) it->second.second = std::max(it->second.second, trace->end_ns[i]);
    }
    std::vector<std::int64_t> sorted;
    for (const auto& [instance, e] : extent) sorted.push_back(e.second - e.first);
    std::sort(sorted.begin(), sorted.end());
    QCOMPARE(d.sorted_ns, sorted);
    QCOMPARE(d.min_ns, static_cast<double>(sorted.front()));
    QCOMPARE(d.max_ns, static_cast<double>(sorted.back()));
    QCOMPARE(d.median_ns, static_cast<double>(sorted[5]));  // 11 instances
    QCOMPARE(d.p90_ns, static_cast<double>(sorted[9]));     // rank 0.9 · 10 = 9
    QCOMPARE(d.p25_ns, 0.5 * static_cast<double>(sorted[2] + sorted[3]));
    // Instance 10 runs 100 µs where the others run at most ~tens: the one outlier.
    QCOMPARE(d.outliers.size(), std::size_t{1});
    QCOMPARE(index.info(d.outliers[0].track, d.outliers[0].span).instance, std::int64_t{10});
    QVERIFY(k3::gui::op_distribution(index, "L009.no.op").empty());
  }

  void a_recorded_trace_indexes_as_its_attribution_counted() {
    const auto trace =
        std::make_shared<const Trace>(k3::profiler::read_trace(kRun + "/trace_decode_b1_ctx131072.json.gz"));
    const TimelineIndex index(trace, nullptr);
    QCOMPARE(index.tracks()[0].size(), std::stoul(trace->metadata.at("steps")));
    const auto r = k3::gui::range_stats(index, index.begin_ns(), index.end_ns());
    QCOMPARE(r.kernels, std::stoul(trace->metadata.at("kernels")));
    QCOMPARE(r.devices, 1);
    // 24 decode steps of the same ops: the selected op has one instance per step.
    const auto d = k3::gui::op_distribution(index, "L004.mla.attn_decode");
    QCOMPARE(d.instances.size(), std::size_t{24});
    QVERIFY(d.median_ns > 1000 && d.median_ns < 1e6);
  }
};

QTEST_GUILESS_MAIN(TimelineIndexTest)
#include "timeline_index_test.moc"
