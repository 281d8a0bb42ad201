// The serving simulation's schedule as a trace: every iteration on its replica's "iterations" track, each request's
// span and phases at the times the simulation reports (queue, prefill, decode; transfer and decode queue when
// disaggregated), packed onto request tracks without overlap, and nothing Perfetto would drop.
#include "profiler/trace/serving_trace.h"

#include "core/scenario.h"

#include "perfetto_drop_rule.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

namespace k3::profiler {
namespace {

const serving::ReplicaModel& replica() {
  static const serving::ReplicaModel m(load_scenario(K3PERF_SOURCE_DIR "/scenarios/k3-h200x16-decode-128k.yaml",
                                                     DataPaths::resolve(K3PERF_SOURCE_DIR "/scenarios")),
                                       4096);
  return m;
}

std::vector<workload::Request> requests() {
  std::vector<workload::Request> out;
  // Bursts that overlap on one replica and queue behind each other (prompts of 3,000 to 9,000 tokens).
  for (int i = 0; i < 12; ++i) {
    workload::Request r;
    r.id = 100 + i;
    r.arrival_ms = 2.0 * (i / 4) * 40 + 0.5 * i;
    r.input_tokens = 3000 + 500 * i;
    r.output_tokens = 1 + 3 * (i % 5);
    out.push_back(r);
  }
  return out;
}

long long ns(const nlohmann::json& us) { return std::llround(us.get<double>() * 1000); }
long long ms_ns(double ms) { return std::llround(ms * 1e6); }

struct Drawn {
  std::map<std::string, std::pair<long long, long long>> phases;  // name -> (start, end) ns
  long long start = 0, end = 0;
  long long pid = -1, tid = -1;
};

// Per (request id, replica): its span and phases as written.
std::map<std::pair<long long, long long>, Drawn> drawn(const nlohmann::json& doc) {
  std::map<std::pair<long long, long long>, Drawn> out;
  std::map<std::pair<long long, long long>, std::vector<std::pair<long long, long long>>> spans;  // track -> span
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("cat") != "request") continue;
    Drawn& d = out[{e.at("args").at("id").get<long long>(), e.at("pid").get<long long>()}];
    d.start = ns(e.at("ts"));
    d.end = d.start + ns(e.at("dur"));
    d.pid = e.at("pid");
    d.tid = e.at("tid");
  }
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("cat") != "request_phase") continue;
    const long long start = ns(e.at("ts"));
    for (auto& [key, d] : out) {
      if (d.pid == e.at("pid") && d.tid == e.at("tid") && d.start <= start && start < d.end) {
        d.phases[e.at("name")] = {start, start + ns(e.at("dur"))};
      }
    }
  }
  return out;
}

TEST(ServingTrace, AggregatedReplicasIterationsAndRequestPhases) {
  serving::ServingOptions o;
  o.replicas = 2;
  o.limits = {4, 4096};
  o.decode_limits = o.limits;
  o.record_schedule = true;
  const serving::ServingResult r = serving::simulate(requests(), {}, replica(), o);
  ASSERT_EQ(r.completed, 12);
  ASSERT_EQ(r.schedule.size(), static_cast<std::size_t>(r.iterations));
  const std::string text = serving_trace_json(r, "test");
  const nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_TRUE(test::perfetto_would_drop(text).empty());
  EXPECT_EQ(doc.at("k3perf").at("iterations"), r.iterations);
  EXPECT_EQ(doc.at("k3perf").at("completed"), 12);
  // Iterations: one event each, on track 0 of its replica, never overlapping there.
  std::map<long long, std::vector<std::pair<long long, long long>>> iterations;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "iteration") {
      EXPECT_EQ(e.at("tid"), 0);
      iterations[e.at("pid")].push_back({ns(e.at("ts")), ns(e.at("ts")) + ns(e.at("dur"))});
    }
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      EXPECT_EQ(e.at("args").at("name"), fmt::format("replica {}", e.at("pid").get<int>()));
    }
  }
  std::size_t total = 0;
  for (auto& [pid, spans] : iterations) {
    total += spans.size();
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
  }
  EXPECT_EQ(total, r.schedule.size());
  EXPECT_EQ(iterations.size(), 2u);  // both replicas ran
  // Requests: the phases the simulation reports, contiguous, on the replica that ran them.
  const auto d = drawn(doc);
  EXPECT_EQ(d.size(), 12u);
  int on_second_track = 0;
  for (const serving::RequestOutcome& q : r.requests) {
    const Drawn& x = d.at({q.id, q.replica});
    EXPECT_EQ(x.start, ms_ns(q.arrival_ms));
    EXPECT_EQ(x.end, ms_ns(q.finish_ms));
    EXPECT_GE(q.admitted_ms, q.arrival_ms);
    EXPECT_LE(q.admitted_ms, q.first_token_ms);
    if (ms_ns(q.admitted_ms) > ms_ns(q.arrival_ms)) {
      EXPECT_EQ(x.phases.at("queue"), std::make_pair(ms_ns(q.arrival_ms), ms_ns(q.admitted_ms)));
    }
    EXPECT_EQ(x.phases.at("prefill"), std::make_pair(ms_ns(q.admitted_ms), ms_ns(q.first_token_ms)));
    if (q.output_tokens > 1) {
      EXPECT_EQ(x.phases.at("decode"), std::make_pair(ms_ns(q.first_token_ms), ms_ns(q.finish_ms)));
    } else {
      EXPECT_EQ(x.phases.count("decode"), 0u);
    }
    on_second_track += x.tid > 1;
  }
  EXPECT_GT(on_second_track, 0);  // requests in flight together go to tracks of their own
}

TEST(ServingTrace, DisaggregatedRequestsMoveFromPrefillToDecodeReplicas) {
  serving::ServingOptions o;
  o.disaggregated = true;
  o.prefill_replicas = 1;
  o.decode_replicas = 2;
  o.limits = {8, 4096};
  o.decode_limits = o.limits;
  o.record_schedule = true;
  const serving::ServingResult r = serving::simulate(requests(), {}, replica(), replica(), o);
  ASSERT_EQ(r.completed, 12);
  EXPECT_EQ(r.replica_roles, (std::vector<std::string>{"prefill", "decode", "decode"}));
  const std::string text = serving_trace_json(r, "disaggregated");
  EXPECT_TRUE(test::perfetto_would_drop(text).empty());
  const nlohmann::json doc = nlohmann::json::parse(text);
  std::map<long long, std::string> names;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") names[e.at("pid")] = e.at("args").at("name");
  }
  EXPECT_EQ(names, (std::map<long long, std::string>{
                       {0, "prefill replica 0"}, {1, "decode replica 0"}, {2, "decode replica 1"}}));
  const auto d = drawn(doc);
  for (const serving::RequestOutcome& q : r.requests) {
    const Drawn& p = d.at({q.id, 0});
    if (q.output_tokens == 1) {
      EXPECT_LT(q.handoff_ms, 0);
      EXPECT_EQ(p.end, ms_ns(q.finish_ms));
      continue;
    }
    ASSERT_GE(q.decode_replica, 1);
    EXPECT_EQ(p.end, ms_ns(q.handoff_ms));
    EXPECT_EQ(p.phases.at("transfer"), std::make_pair(ms_ns(q.first_token_ms), ms_ns(q.handoff_ms)));
    const Drawn& x = d.at({q.id, q.decode_replica});
    EXPECT_EQ(x.start, ms_ns(q.handoff_ms));
    EXPECT_EQ(x.end, ms_ns(q.finish_ms));
    EXPECT_EQ(x.phases.at("decode"), std::make_pair(ms_ns(q.decode_admitted_ms), ms_ns(q.finish_ms)));
  }
}

}  // namespace
}  // namespace k3::profiler
