// Capacity planning: the Pareto front against a brute-force dominance check; a trace's burst dealt
// out over the replicas; the one-command question; refusals, their histogram and the binding limit.
#include "sim/plan/plan.h"
#include "sim/plan/plan_report.h"
#include "sim/serving/simulator.h"

#include "expect_input_error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace k3::plan {
namespace {

using test::expect_input_error;

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
    test::expect_input_error([&, set = set] { plan_space(set); },  // Clang 14 captures no structured bindings
                             {"k3-h200x16-chat.yaml", set.substr(0, set.find('=')), message});
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

const DataPaths& data() {
  static const DataPaths d = DataPaths::resolve(K3PERF_SOURCE_DIR "/scenarios");
  return d;
}

// The question's flags become --set edits of plan-defaults.yaml; what the scenario reads back is what was asked.
TEST(PlanQuestion, EditsTheDefaultsFileAsSetWould) {
  PlanQuestion q;
  q.model = "kimi-linear-48b-a3b";
  q.hardware = {"b200", "h200-sxm"};
  q.input_tokens = 32768;
  q.output_tokens = 1024;
  q.rate_per_s = 50;
  q.prefix_hit = 0.3;
  q.tpot_ms = 50;
  q.max_gpus = 96;
  const serving::ServingScenario s = serving::load_serving_scenario(plan_defaults_file(data()), data(), q.sets());
  EXPECT_EQ(plan_defaults_file(data()), K3PERF_SOURCE_DIR "/scenarios/serving/plan-defaults.yaml");
  EXPECT_EQ(s.deployment.model.name, "kimi-linear-48b-a3b");
  EXPECT_EQ(s.deployment.hardware.name, "B200 (HGX)");
  EXPECT_EQ(s.requests.input_tokens, 32768);
  EXPECT_EQ(s.requests.output_tokens, 1024);
  EXPECT_EQ(s.requests.rate_per_s, 50);
  EXPECT_EQ(s.requests.cached_tokens, 9830);  // floor(0.3 * 32768 = 9830.4)
  EXPECT_EQ(s.options.slo.ttft_ms, 0);        // not asked: no TTFT objective
  EXPECT_EQ(s.options.slo.tpot_ms, 50);
  const PlanSpace space = read_plan_space(*s.plan, s);
  EXPECT_EQ(space.hardware, (std::vector<std::string>{"b200", "h200-sxm"}));
  EXPECT_EQ(space.max_gpus, 96);
  EXPECT_EQ(space.kv_cache, (std::vector<StorageFormat>{StorageFormat::bf16, StorageFormat::fp8}));
}

// One layout, K3 on 16 H200s, chat-sized requests at a rate given by the test.
serving::ServingScenario chat(double rate, const std::string& plan) {
  const std::string text = fmt::format(
      "name: t\nmodel: kimi-k3\nhardware: h200-sxm\ngpus: 16\nparallelism: {{tp: 8, attention_dp: 2, ep: 16}}\n"
      "serving:\n  max_sequences: 64\n  max_batched_tokens: 8192\n  slo: {{ttft_ms: 3000, tpot_ms: 80}}\n"
      "  requests: {{count: 60, rate_per_s: {}, input_tokens: 4000, output_tokens: 100}}\n"
      "plan: {{hardware: [h200-sxm], sample_requests: 60, {}}}\n",
      rate, plan);
  return serving::parse_serving_scenario(text, "t.yaml", data());
}

PlanResult plan_of(const serving::ServingScenario& s) {
  return run_plan(s, read_plan_space(*s.plan, s), serving::fixed_rate_workload(s.requests), s.requests.rate_per_s,
                  Prices{}, data());
}

// `needed` is the threshold the first estimate sets: one replica fewer allowed refuses the candidate before any
// simulation (no TTFT or TPOT reported), exactly `needed` lets it be simulated.
TEST(PlanRefusals, TheFirstEstimateAgainstMaxReplicas) {
  const PlanResult refused = plan_of(chat(40, "max_replicas: 1"));
  ASSERT_EQ(refused.candidates.size(), 1u);
  const Candidate& c = refused.candidates[0];
  ASSERT_EQ(c.refusal, Refusal::estimate_replicas) << c.reason;
  ASSERT_GT(c.needed, 1);
  EXPECT_EQ(c.trials, 0);
  EXPECT_EQ(c.reason, fmt::format("the first estimate needs {} replicas > plan.max_replicas 1", c.needed));
  EXPECT_EQ(plan_of(chat(40, fmt::format("max_replicas: {}", c.needed - 1))).candidates[0].refusal,
            Refusal::estimate_replicas);
  const Candidate simulated = plan_of(chat(40, fmt::format("max_replicas: {}", c.needed))).candidates[0];
  EXPECT_GT(simulated.trials, 0) << simulated.reason;
  EXPECT_NE(simulated.refusal, Refusal::estimate_replicas);
  // A GPU budget below one 16-GPU replica refuses it the same way, in GPUs.
  const Candidate gpus = plan_of(chat(0.5, "max_gpus: 8")).candidates[0];
  EXPECT_EQ(gpus.refusal, Refusal::estimate_gpus) << gpus.reason;
  EXPECT_EQ(gpus.needed, 16);
}

// The report of a search with nothing feasible: the header echoes the question, the histogram counts each
// refusal (counted here from the candidates), the binding limit is the closest candidate's, and no row of a
// candidate never simulated reports a TTFT.
TEST(PlanRefusals, HistogramAndBindingLimitWhenNothingIsFeasible) {
  const serving::ServingScenario s = chat(40, "max_replicas: 2, ep: [8, 16], max_sequences: [16, 64]");
  const PlanSpace space = read_plan_space(*s.plan, s);
  const PlanResult r = plan_of(s);
  ASSERT_EQ(r.candidates.size(), 4u);
  ASSERT_TRUE(r.ranked.empty());
  std::map<Refusal, int> count;
  int closest = 1 << 30;
  for (const Candidate& c : r.candidates) {
    count[c.refusal] += 1;
    if (c.refusal == Refusal::estimate_replicas) closest = std::min(closest, c.needed);
  }
  ASSERT_GT(count[Refusal::estimate_replicas], 0);
  const std::string report = format_plan(r, space, s, 10);
  for (const std::string& line :
       {std::string("plan       kimi-k3 on h200-sxm"), std::string("4000-token prompts (0 cached) and 100-token"),
        std::string("SLOs       p90 TTFT <= 3000 ms, TPOT <= 80 ms"),
        std::string("4 configurations at 40 requests/s")}) {
    EXPECT_NE(report.find(line), std::string::npos) << line << "\n" << report;
  }
  for (const auto& [why, n] : count) {
    EXPECT_NE(report.find(fmt::format("{:>5}  {}", n, to_string(why))), std::string::npos) << report;
  }
  EXPECT_NE(
      report.find(fmt::format("binding limit: the first estimate needs {} replicas > plan.max_replicas 2", closest)),
      std::string::npos)
      << report;
  EXPECT_NE(report.find(fmt::format("--set plan.max_replicas={}", closest)), std::string::npos) << report;
  EXPECT_EQ(report.find("TTFT 0 ms"), std::string::npos) << report;
  EXPECT_EQ(report.find("SLOs missed"), std::string::npos) << "none was simulated:\n" << report;
  EXPECT_EQ(report.find("best by"), std::string::npos) << "no empty tables:\n" << report;
  // CSV: empty TTFT/TPOT cells for the never simulated; JSON: null.
  const std::string csv = plan_csv(r);
  EXPECT_NE(csv.find(",0,0,0,0.0000,,,"), std::string::npos) << csv;
  EXPECT_TRUE(to_json(r, space)["candidates"][0]["ttft_ms"].is_null());
  EXPECT_EQ(to_json(r, space).begin().key(), "format");  // core/output_header.h
  EXPECT_EQ(to_json(r, space)["format"], "k3perf-plan");
}

// KV and state formats are searched like any other dimension: each layout twice, the fp8 one labelled, and its
// smaller cache holds more sequences of the same length (so the largest batch that fits grows).
TEST(PlanSpace, SearchesKvAndStateFormats) {
  const serving::ServingScenario s = chat(0.5, "kv_cache: [bf16, fp8], kda_state: [fp32, bf16]");
  const PlanResult r = plan_of(s);
  ASSERT_EQ(r.candidates.size(), 4u);
  EXPECT_EQ(r.candidates[0].label(), "h200-sxm tp8 dp2 ep16 b64 t8192 agg");
  EXPECT_EQ(r.candidates[1].label(), "h200-sxm tp8 dp2 ep16 b64 t8192 state bf16 agg");
  EXPECT_EQ(r.candidates[2].label(), "h200-sxm tp8 dp2 ep16 b64 t8192 kv fp8 agg");
  EXPECT_EQ(r.candidates[3].label(), "h200-sxm tp8 dp2 ep16 b64 t8192 kv fp8 state bf16 agg");
  Scenario bf16 = s.deployment, fp8 = s.deployment;
  fp8.precision.kv_cache = StorageFormat::fp8;
  const serving::ReplicaModel a(bf16, 8192), b(fp8, 8192);
  EXPECT_LT(b.sequence_bytes(4100), a.sequence_bytes(4100));
  expect_input_error([&] { (void)read_plan_space(*chat(1, "kv_cache: [int4]").plan, s); }, {"kv_cache", "int4"});
}

}  // namespace
}  // namespace k3::plan
