// The serving simulator against hand-computed timelines built from the step-time model, and its
// invariants (tokens conserved, time monotone, memory within capacity, determinism).
#include "sim/serving/simulator.h"
#include "core/scenario.h"

#include <gtest/gtest.h>

namespace k3::serving {
namespace {

// K3 needs two H200 nodes: tp 8 inside each, one attention group per node, experts over all 16.
Scenario k3_on_16_h200() {
  return load_scenario(K3PERF_SOURCE_DIR "/scenarios/k3-h200x16-decode-128k.yaml",
                       DataPaths::resolve(K3PERF_SOURCE_DIR "/scenarios"));
}

const ReplicaModel& replica() {
  static const ReplicaModel m(k3_on_16_h200(), 4096);
  return m;
}

workload::Request request(int64_t id, double arrival_ms, int64_t input, int64_t output) {
  workload::Request r;
  r.id = id;
  r.arrival_ms = arrival_ms;
  r.input_tokens = input;
  r.output_tokens = output;
  return r;
}

ServingOptions options(int64_t max_sequences = 64, int64_t max_batched_tokens = 4096) {
  ServingOptions o;
  o.limits = {max_sequences, max_batched_tokens};
  o.decode_limits = o.limits;
  return o;
}

double prefill_us(double n, double p) {
  BatchShape b;
  b.add_prefill(n, p);
  return replica().step.step_us(b);
}

double decode_us(double context) {
  BatchShape b;
  b.add_decode(context);
  return replica().step.step_us(b);
}

TEST(ServingSimulator, OneRequestFollowsItsChunksAndDecodeSteps) {
  // 10,000 prompt tokens in chunks of 4096, 4096, 1808; then 4 decode steps.
  const ServingResult r = simulate({request(0, 5.0, 10000, 5)}, {}, replica(), options());
  double t = 5000.0 + prefill_us(4096, 0) + prefill_us(4096, 4096) + prefill_us(1808, 8192);
  EXPECT_NEAR(r.requests[0].first_token_ms, t / 1000, 1e-9);
  for (int k = 1; k < 5; ++k) t += decode_us(10000 + k - 1);
  EXPECT_NEAR(r.requests[0].finish_ms, t / 1000, 1e-9);
  EXPECT_EQ(r.iterations, 3 + 4);
  EXPECT_EQ(r.prefill_tokens, 10000);
  EXPECT_EQ(r.decode_tokens, 4);
  EXPECT_EQ(r.completed, 1);
}

TEST(ServingSimulator, CachedPrefixIsNotRecomputed) {
  const ServingResult r = simulate({request(0, 0, 3000, 1)}, {2048}, replica(), options());
  EXPECT_NEAR(r.requests[0].first_token_ms, prefill_us(952, 2048) / 1000, 1e-9);
  EXPECT_EQ(r.prefill_tokens, 952);
  EXPECT_EQ(r.requests[0].finish_ms, r.requests[0].first_token_ms);  // one-token answer
}

TEST(ServingSimulator, ADecodeRidesAlongWithTheNextPrompt) {
  // B arrives while A's prefill runs; A's first decode and B's prefill share the next iteration.
  const double a_prefill = prefill_us(1000, 0);
  const ServingResult r =
      simulate({request(0, 0, 1000, 2), request(1, a_prefill / 2000, 500, 1)}, {}, replica(), options());
  BatchShape mixed;
  mixed.add_decode(1000);
  mixed.add_prefill(500, 0);
  const double end = (a_prefill + replica().step.step_us(mixed)) / 1000;
  EXPECT_NEAR(r.requests[0].finish_ms, end, 1e-9);
  EXPECT_NEAR(r.requests[1].first_token_ms, end, 1e-9);
  EXPECT_EQ(r.iterations, 2);
}

TEST(ServingSimulator, DisaggregatedHandOffCostsTheTransfer) {
  ServingOptions o = options();
  o.disaggregated = true;
  const ServingResult r = simulate({request(0, 0, 2000, 3)}, {}, replica(), replica(), o);
  const ReplicaModel& m = replica();
  double t = prefill_us(2000, 0);
  EXPECT_NEAR(r.requests[0].first_token_ms, t / 1000, 1e-9);
  t += m.transfer_latency_us + m.sequence_bytes(2000) * m.transfer_us_per_byte;
  t += decode_us(2000) + decode_us(2001);
  EXPECT_NEAR(r.requests[0].finish_ms, t / 1000, 1e-9);
  EXPECT_EQ(r.gpus, 32);
  EXPECT_EQ(r.utilisation.size(), 2u);
}

std::vector<workload::Request> burst(int n, double spacing_ms, int64_t input, int64_t output) {
  std::vector<workload::Request> out;
  for (int i = 0; i < n; ++i) out.push_back(request(i, i * spacing_ms, input + 37 * (i % 7), output + 3 * (i % 5)));
  return out;
}

TEST(ServingSimulator, ConservesTokensAndStaysWithinMemory) {
  // Squeeze the memory so that only a few sequences fit: admission must wait for space.
  ReplicaModel small = replica();
  small.capacity_bytes = small.sequence_bytes(3 * (6000 + 300));
  const std::vector<workload::Request> reqs = burst(40, 10, 6000, 200);
  const ServingResult r = simulate(reqs, {}, small, options());
  int64_t prompt = 0, decoded = 0;
  for (const workload::Request& q : reqs) {
    prompt += q.input_tokens;
    decoded += q.output_tokens - 1;
  }
  EXPECT_EQ(r.completed, 40);
  EXPECT_EQ(r.prefill_tokens, prompt);
  EXPECT_EQ(r.decode_tokens, decoded);
  EXPECT_LE(r.max_memory_fraction, 1.0);
  EXPECT_GT(r.max_memory_fraction, 0.5);
  // Never more than fit: 3 per attention group (the largest request is a little above the mean).
  for (const QueueSample& q : r.queue) EXPECT_LE(q.running, 3 * small.attention_dp);
  for (std::size_t i = 1; i < r.queue.size(); ++i) EXPECT_GT(r.queue[i].time_ms, r.queue[i - 1].time_ms);
  for (const RequestOutcome& q : r.requests) {
    EXPECT_GE(q.first_token_ms, q.arrival_ms);
    EXPECT_GE(q.finish_ms, q.first_token_ms);
  }
}

TEST(ServingSimulator, RejectsWhatCanNeverFit) {
  ReplicaModel small = replica();
  small.capacity_bytes = small.sequence_bytes(1000);
  const ServingResult r = simulate({request(0, 0, 5000, 10), request(1, 1, 500, 10)}, {}, small, options());
  EXPECT_TRUE(r.requests[0].rejected);
  EXPECT_EQ(r.requests[0].rejection, Rejection::memory);
  EXPECT_FALSE(r.requests[1].rejected);
  EXPECT_EQ(r.requests[1].rejection, Rejection::none);
  EXPECT_EQ(r.rejected, 1);
  EXPECT_EQ(r.rejected_by[static_cast<int>(Rejection::memory)], 1);
}

// A prompt and answer beyond the model's positions are turned away as such (before memory is asked), and counted
// apart from the rest: K3's 1,048,576 positions, a request one token over them and one exactly at them.
TEST(ServingSimulator, RejectsWhatExceedsTheModelsPositions) {
  ReplicaModel roomy = replica();
  ASSERT_EQ(roomy.max_positions, k3_on_16_h200().model.max_position_embeddings);
  ASSERT_GT(roomy.max_positions, 0);
  roomy.capacity_bytes = roomy.sequence_bytes(double(roomy.max_positions) + 4);  // memory is not what binds
  const int64_t positions = roomy.max_positions;
  const ServingResult r =
      simulate({request(0, 0, positions - 9, 10), request(1, 1, positions - 10, 10)}, {}, roomy, options());
  EXPECT_TRUE(r.requests[0].rejected);
  EXPECT_EQ(r.requests[0].rejection, Rejection::beyond_positions);
  EXPECT_FALSE(r.requests[1].rejected);
  EXPECT_EQ(r.rejected_by[static_cast<int>(Rejection::beyond_positions)], 1);
  EXPECT_EQ(r.rejected_by[static_cast<int>(Rejection::memory)], 0);
}

TEST(ServingSimulator, IsDeterministic) {
  const std::vector<workload::Request> reqs = burst(60, 40, 3000, 100);
  const ServingResult a = simulate(reqs, {}, replica(), options(16));
  const ServingResult b = simulate(reqs, {}, replica(), options(16));
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].first_token_ms, b.requests[i].first_token_ms);
    EXPECT_EQ(a.requests[i].finish_ms, b.requests[i].finish_ms);
  }
  EXPECT_EQ(a.iterations, b.iterations);
}

TEST(ServingSimulator, SloAdmissionRejectsEarlyInsteadOfQueueing) {
  const std::vector<workload::Request> reqs = burst(200, 20, 8000, 50);  // far more prefill than one replica does
  ServingOptions all = options();
  all.slo = {2000, 0};
  ServingOptions slo = all;
  slo.admission = Admission::slo;
  const ServingResult a = simulate(reqs, {}, replica(), all);
  const ServingResult s = simulate(reqs, {}, replica(), slo);
  EXPECT_EQ(a.rejected, 0);
  EXPECT_GT(a.ttft_ms.p90, 2000);
  EXPECT_GT(s.rejected, 0);
  EXPECT_EQ(s.rejected_by[static_cast<int>(Rejection::ttft_admission)], s.rejected);
  EXPECT_LT(s.ttft_ms.p90, a.ttft_ms.p90);
  EXPECT_GT(double(s.met_slo) / double(s.completed), double(a.met_slo) / double(a.completed));
}

TEST(ServingPercentiles, NearestRank) {
  const Percentiles p = percentiles({5, 1, 4, 2, 3, 6, 7, 8, 9, 10});
  EXPECT_EQ(p.p50, 5);
  EXPECT_EQ(p.p90, 9);
  EXPECT_EQ(p.p99, 10);
  EXPECT_EQ(p.mean, 5.5);
  EXPECT_EQ(p.count, 10);
}

}  // namespace
}  // namespace k3::serving
