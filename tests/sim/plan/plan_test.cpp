// Capacity planning: the Pareto front against a brute-force dominance check; a trace's burst dealt
// out over the replicas.
#include "sim/plan/plan.h"
#include "expect_input_error.h"
#include "sim/serving/simulator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace k3::plan {
namespace {

TEST(PlanPareto, KeepsExactlyTheUndominatedPoints) {
  std::vector<std::pair<double, double>> pts;
  uint64_t x = 12345;
  for (int i = 0; i < 300; ++i) {  // a seeded LCG: no clock, no unseeded randomness
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const double a = double(x >> 40 & 1023), b = double(x >> 20 & 1023);
    pts.emplace_back(a, 1023 - a * a / 1023 + b / 8);
  }
  std::vector<std::size_t> want;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    bool dominated = false;
    for (std::size_t j = 0; j < pts.size() && !dominated; ++j) {
      dominated = j != i && pts[j].first >= pts[i].first && pts[j].second >= pts[i].second && pts[j] != pts[i];
    }
    if (!dominated) want.push_back(i);
  }
  std::vector<std::size_t> got = pareto_front(pts);
  // Duplicates of a front point count once; compare the points themselves.
  std::vector<std::pair<double, double>> got_pts, want_pts;
  for (std::size_t i : got) got_pts.push_back(pts[i]);
  for (std::size_t i : want) want_pts.push_back(pts[i]);
  std::sort(want_pts.begin(), want_pts.end());
  want_pts.erase(std::unique(want_pts.begin(), want_pts.end()), want_pts.end());
  EXPECT_EQ(got_pts, want_pts);  // sorted by x, as promised
}

// Two bursts of eight 8192-token prompts, each burst at one instant, a minute apart. With 8192 tokens
// per iteration a replica prefills one prompt per iteration, so k prompts at once give TTFTs of about
// 1, 2, ..., k chunks, and an SLO of 2.5 chunks holds for k <= 2. Dealt out in turn over R replicas,
// replica 0 gets requests 0, R, 2R, ...: ceil(8 / R) of each burst, so R = 1, 2, 3 fail and R = 4
// (the fourth trial) is the answer. Stretching the arrivals instead keeps each burst at one instant
// on the one simulated replica: never feasible.
TEST(PlanTrace, DealsABurstOutOverTheReplicas) {
  const DataPaths data = DataPaths::resolve(K3PERF_SOURCE_DIR "/scenarios");
  const std::string text =
      "name: t\nmodel: kimi-k3\nhardware: h200-sxm\ngpus: 16\nparallelism: {tp: 8, attention_dp: 2, ep: 16}\n"
      "serving:\n  max_sequences: 64\n  max_batched_tokens: 8192\n  slo: {ttft_ms: SLO}\n"
      "  requests: {count: 16, rate_per_s: 1, input_tokens: 8192, output_tokens: 2}\n"
      "plan: {hardware: [h200-sxm], max_replicas: 8, slo_percentile: 90}\n";
  const serving::ServingScenario probe =
      serving::parse_serving_scenario(std::string(text).replace(text.find("SLO"), 3, "1000"), "t.yaml", data);
  const serving::ReplicaModel model(probe.deployment, 8192);
  serving::BatchShape chunk;
  chunk.add_prefill(8192, 0);
  const double chunk_ms = model.step.step_us(chunk) / 1000;
  const serving::ServingScenario s = serving::parse_serving_scenario(
      std::string(text).replace(text.find("SLO"), 3, fmt::format("{}", 2.5 * chunk_ms)), "t.yaml", data);
  const PlanSpace space = read_plan_space(*s.plan, s);
  serving::Workload burst = serving::fixed_rate_workload(s.requests);
  for (workload::Request& r : burst.requests) r.arrival_ms = r.id < 8 ? 0.0 : 60000.0;
  burst.from_trace = true;
  const PlanResult dealt = run_plan(s, space, burst, 1.0, Prices{}, data);
  ASSERT_EQ(dealt.candidates.size(), 1u);
  EXPECT_TRUE(dealt.candidates[0].feasible) << dealt.candidates[0].reason;
  EXPECT_EQ(dealt.candidates[0].replicas, 4);
  EXPECT_EQ(dealt.candidates[0].trials, 4);
  burst.from_trace = false;
  const PlanResult stretched = run_plan(s, space, burst, 1.0, Prices{}, data);
  EXPECT_FALSE(stretched.candidates[0].feasible);
}

// Serving and plan integers are read within their limits: replicas 2^31 was a failed internal check, count 10^8
// ran out of memory, a tp of 2^32 in the plan space narrowed to 0.
TEST(PlanLimits, ServingAndPlanIntegersBeyondTheirLimits) {
  const DataPaths data = DataPaths::resolve(K3PERF_SOURCE_DIR "/scenarios");
  const std::string file = K3PERF_SOURCE_DIR "/scenarios/serving/k3-h200x16-chat.yaml";
  auto plan_space = [&](const std::string& set) {
    const serving::ServingScenario s = serving::load_serving_scenario(file, data, {set});
    read_plan_space(*s.plan, s);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"serving.replicas=2147483648", "2147483648 exceeds 65536"},
      {"serving.decode_replicas=4294967296", "4294967296 exceeds 65536"},
      {"serving.requests.count=100000000", "100000000 exceeds 10000000"},
      {"serving.max_sequences=9223372036854775807", "9223372036854775807 exceeds 1048576"},
      {"plan.tp=[8, 4294967296]", "4294967296 exceeds 65536"},
      {"plan.max_replicas=2147483648", "2147483648 exceeds 65536"},
      {"plan.pd_ratios=[\"4294967297:1\"]", "4294967297 exceeds 65536"},
      {"serving.queue_sample_interval_ms=1e-300", "below 0.001 ms"},
  };
  for (const auto& [set, message] : cases) {
    SCOPED_TRACE(set);
    test::expect_input_error([&] { plan_space(set); }, {"k3-h200x16-chat.yaml", set.substr(0, set.find('=')), message});
  }
}

// A stream so slow that its last request comes 10^300 s in: the queue series would need samples without end (the
// loop never finished, then ran out of memory). It stops at limit::queue_samples with an input error.
TEST(PlanLimits, QueueSamplesAreBounded) {
  const DataPaths data = DataPaths::resolve(K3PERF_SOURCE_DIR "/scenarios");
  const serving::ServingScenario s =
      serving::load_serving_scenario(K3PERF_SOURCE_DIR "/scenarios/serving/k3-h200x16-chat.yaml", data,
                                     {"serving.requests.rate_per_s=1e-300", "serving.requests.count=3"});
  const serving::Workload w = serving::fixed_rate_workload(s.requests);
  const serving::ReplicaModel model(s.deployment, s.options.limits.max_batched_tokens);
  test::expect_input_error([&] { serving::simulate(w.requests, {}, model, s.options); },
                           {"serving.queue_sample_interval_ms", "more than 1000000 queue samples"});
}

}  // namespace
}  // namespace k3::plan
