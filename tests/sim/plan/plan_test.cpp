// Capacity planning: the Pareto front against a brute-force dominance check; a trace's burst dealt
// out over the replicas; the one-command question; refusals, their histogram and the binding limit;
// P:D sized from the per-side rates against hand-computed rates and whole-deployment simulations.
#include "sim/plan/plan.h"
#include "sim/plan/plan_report.h"
#include "sim/serving/simulator.h"

#include "expect_input_error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
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
serving::ServingScenario chat(double rate, const std::string& plan, double tpot_ms = 80) {
  const std::string text = fmt::format(
      "name: t\nmodel: kimi-k3\nhardware: h200-sxm\ngpus: 16\nparallelism: {{tp: 8, attention_dp: 2, ep: 16}}\n"
      "serving:\n  max_sequences: 64\n  max_batched_tokens: 8192\n  slo: {{ttft_ms: 3000, tpot_ms: {}}}\n"
      "  requests: {{count: 60, rate_per_s: {}, input_tokens: 4000, output_tokens: 100}}\n"
      "plan: {{hardware: [h200-sxm], sample_requests: 60, {}}}\n",
      tpot_ms, rate, plan);
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

// Prefill replicas serving 10 requests/s and decode replicas 4 requests/s carry 40 requests/s as 4 + 10: each side's
// rate times its count reaches the target exactly, and one fewer on either side falls short (36 or 40 - 4).
TEST(PlanSizedPd, FewestReplicasFromThePerSideRates) {
  EXPECT_EQ(size_pd(40, 10, 4), (std::pair<int, int>{4, 10}));
  EXPECT_EQ(size_pd(41, 10, 4), (std::pair<int, int>{5, 11}));         // just past a multiple: one more each
  EXPECT_EQ(size_pd(0.3, 10, 4), (std::pair<int, int>{1, 1}));         // a light load still needs one of each
  EXPECT_EQ(size_pd(0.7 * 3, 0.7, 0.3), (std::pair<int, int>{3, 7}));  // 2.1 / 0.7 and 2.1 / 0.3 round to 3 and 7
  constexpr int most = std::numeric_limits<int>::max();
  EXPECT_EQ(size_pd(40, 0, 4).first, most);
  EXPECT_EQ(size_pd(1e300, 1e-300, 4), (std::pair<int, int>{most, most}));
}

// The chat load at 8 requests/s on one 16-GPU layout, P:D sized: the per-side rates are the step-time model's, computed
// here by hand (prefill: 4000 tokens at the 8192-token budget's throughput; decode: the largest batch, found by a
// linear scan, whose step meets the TPOT SLO, over 100 steps per request), x:y start from them, and the whole
// deployment x:y simulated at the full rate meets both SLOs. At 80 ms the batch limit (64) binds, at 42 ms the SLO.
TEST(PlanSizedPd, RatesFromTheStepModelAndTheDeploymentMeetsTheSlos) {
  for (const double tpot_ms : {80.0, 42.0}) {
    SCOPED_TRACE(tpot_ms);
    const serving::ServingScenario s = chat(8, "modes: [disaggregated]", tpot_ms);
    const PlanResult r = plan_of(s);
    ASSERT_EQ(r.candidates.size(), 1u);
    const Candidate& c = r.candidates[0];
    ASSERT_TRUE(c.pd_sized);
    ASSERT_TRUE(c.feasible) << c.reason;
    const serving::ReplicaModel model(s.deployment, 8192);
    serving::BatchShape chunk;
    chunk.add_prefill(8192, 0);
    const double prefill_rate = 1e6 / (4000 * model.step.step_us(chunk) / 8192);
    auto decode_us = [&](int b) {
      serving::BatchShape d;
      for (int i = 0; i < b; ++i) d.add_decode(4000 + 100 / 2.0);
      return model.step.step_us(d);
    };
    const int fit =
        static_cast<int>(std::floor(model.capacity_bytes * model.attention_dp / model.sequence_bytes(4100)));
    int batch = 0;
    for (int b = 1; b <= std::min(64, fit); ++b) {
      if (decode_us(b) <= tpot_ms * 1000) batch = b;
    }
    ASSERT_GT(batch, 0);
    if (tpot_ms < 80) {
      ASSERT_LT(batch, std::min(64, fit));  // the SLO, not the limit, sets the batch
    }
    const double decode_rate = batch / (100 * decode_us(batch) / 1e6);
    EXPECT_NEAR(c.prefill_rate_per_s, prefill_rate, 1e-9 * prefill_rate);
    EXPECT_EQ(c.decode_batch, batch);
    EXPECT_NEAR(c.decode_rate_per_s, decode_rate, 1e-9 * decode_rate);
    EXPECT_EQ(c.rated_prefill, static_cast<int>(std::ceil(8 / prefill_rate)));
    EXPECT_EQ(c.rated_decode, static_cast<int>(std::ceil(8 / decode_rate)));
    EXPECT_GE(c.prefill_per_unit, c.rated_prefill);
    EXPECT_GE(c.decode_per_unit, c.rated_decode);
    EXPECT_EQ(c.replicas, 1);
    EXPECT_EQ(c.gpus, (c.prefill_per_unit + c.decode_per_unit) * 16);
    EXPECT_EQ(c.label(),
              fmt::format("h200-sxm tp8 dp2 ep16 b64 t8192 disagg {}:{}", c.prefill_per_unit, c.decode_per_unit));
    // The whole deployment, every replica, at 8 requests/s on a stream long enough to load each of them.
    serving::RequestSource long_stream = s.requests;
    long_stream.count = 60 * (c.prefill_per_unit + c.decode_per_unit);
    serving::ServingOptions o = s.options;
    o.disaggregated = true;
    o.prefill_replicas = c.prefill_per_unit;
    o.decode_replicas = c.decode_per_unit;
    o.queue_sample_interval_ms = 0;
    const serving::ServingResult whole =
        serving::simulate(serving::fixed_rate_workload(long_stream).requests, {}, model, o);
    EXPECT_EQ(whole.completed, long_stream.count);
    EXPECT_LE(whole.ttft_ms.p90, 3000);
    EXPECT_LE(whole.tpot_ms.p90, tpot_ms);
    const std::string report = format_plan(r, read_plan_space(*s.plan, s), s, 10);
    EXPECT_NE(report.find(fmt::format("best sized ({}): prefill {:.3g}/s, decode {:.3g}/s (batch {}) give {}:{}",
                                      c.label(), prefill_rate, decode_rate, batch, c.rated_prefill, c.rated_decode)),
              std::string::npos)
        << report;
  }
}

// An explicit list keeps its fixed ratios (replicas are P:D units), `auto` may stand beside them, and a value that is
// neither is refused naming the key and the value.
TEST(PlanSizedPd, AnExplicitListStillWorks) {
  const PlanResult fixed = plan_of(chat(8, "modes: [disaggregated], pd_ratios: ['1:2']"));
  ASSERT_EQ(fixed.candidates.size(), 1u);
  const Candidate& c = fixed.candidates[0];
  EXPECT_FALSE(c.pd_sized);
  ASSERT_TRUE(c.feasible) << c.reason;
  EXPECT_EQ(c.label(), "h200-sxm tp8 dp2 ep16 b64 t8192 disagg 1:2");
  EXPECT_EQ(c.prefill_per_unit, 1);
  EXPECT_EQ(c.decode_per_unit, 2);
  EXPECT_EQ(c.gpus, c.replicas * 3 * 16);
  EXPECT_EQ(c.rated_prefill, 0);  // never sized
  const serving::ServingScenario both = chat(8, "modes: [disaggregated], pd_ratios: ['1:2', auto]");
  EXPECT_EQ(read_plan_space(*both.plan, both).pd_ratios, (std::vector<std::pair<int, int>>{{1, 2}, {0, 0}}));
  EXPECT_EQ(read_plan_space(*chat(8, "pd_ratios: auto").plan, both).pd_ratios,
            (std::vector<std::pair<int, int>>{{0, 0}}));
  expect_input_error([&] { (void)read_plan_space(*chat(8, "pd_ratios: [fast]").plan, both); },
                     {"pd_ratios", "expected auto or a prefill:decode ratio", "'fast'"});
}

// At 10 requests/s of 100-token answers prefill needs about five replicas per decode replica: the sized x:y needs fewer
// GPUs than every ratio of the old fixed list (1:2, 1:1, 2:1, 4:1), whose units round the side that needs less up
// with the side that needs more.
TEST(PlanSizedPd, SizedBeatsEveryRatioOfTheOldFixedList) {
  const serving::ServingScenario s = chat(10, "modes: [disaggregated], pd_ratios: [auto, '1:2', '1:1', '2:1', '4:1']");
  const PlanResult r = plan_of(s);
  ASSERT_EQ(r.candidates.size(), 5u);
  const Candidate& sized = r.candidates[0];
  ASSERT_TRUE(sized.pd_sized);
  ASSERT_TRUE(sized.feasible) << sized.reason;
  for (std::size_t i = 1; i < r.candidates.size(); ++i) {
    const Candidate& c = r.candidates[i];
    SCOPED_TRACE(c.label());
    EXPECT_FALSE(c.pd_sized);
    ASSERT_TRUE(c.feasible) << c.reason;
    EXPECT_GT(c.gpus, sized.gpus);
  }
  EXPECT_EQ(r.ranked.front(), 0u);
  const std::string report = format_plan(r, read_plan_space(*s.plan, s), s, 10);
  EXPECT_NE(report.find("disaggregated P:D sized, 1:2, 1:1, 2:1, 4:1;"), std::string::npos) << report;
}

}  // namespace
}  // namespace k3::plan
