// The serving step-time model against direct roofline evaluation of the op graph
// (time_step(build_op_graph)), which it must reproduce for every batch the op graph can describe.
#include "sim/serving/step_time_model.h"
#include "core/op_graph.h"
#include "core/scenario.h"
#include "sim/roofline.h"

#include <gtest/gtest.h>

#include <cmath>

namespace k3::serving {
namespace {

Scenario deployment(int tp, int attention_dp, int ep, const std::string& hardware = "h200-sxm") {
  const DataPaths data = DataPaths::resolve(K3PERF_SOURCE_DIR "/scenarios");
  Scenario s = load_scenario(
      K3PERF_SOURCE_DIR "/scenarios/k3-h200x16-decode-128k.yaml", data,
      {"hardware=" + hardware, "gpus=" + std::to_string(tp * attention_dp), "parallelism.tp=" + std::to_string(tp),
       "parallelism.attention_dp=" + std::to_string(attention_dp), "parallelism.ep=" + std::to_string(ep)});
  return s;
}

double direct_us(const Scenario& s, const Phase& ph) {
  return time_step(build_op_graph(s.model, ph, s.parallelism, s.precision), s.hardware, s.runtime).step_us;
}

// Relative error of the model against the op graph, over decode and single-chunk prefill shapes.
void expect_matches_op_graph(const Scenario& s) {
  const StepTimeModel model(s);
  const long long dp = s.parallelism.attention_dp;
  for (long long batch : {1LL, 2LL, 3LL, 7LL, 16LL, 61LL, 256LL}) {
    if (batch < dp) continue;
    for (long long ctx : {0LL, 1LL, 777LL, 8192LL, 131072LL, 1000000LL}) {
      BatchShape b;
      // Sequences of different contexts with the same sum: the op graph is linear in it.
      for (long long i = 0; i < batch; ++i) b.add_decode(double(ctx) + (i % 2 == 0 ? 5.0 : -5.0) * (batch % 2 == 0));
      const double want = direct_us(s, Phase::decode(batch, ctx));
      EXPECT_NEAR(model.step_us(b), want, 1e-9 * want) << "decode batch " << batch << " context " << ctx;
    }
  }
  for (long long seqs : {1LL, 2LL, 5LL}) {
    if (seqs < dp) continue;
    for (long long n : {1LL, 63LL, 64LL, 65LL, 1000LL, 8192LL}) {
      for (long long p : {0LL, 512LL, 50000LL}) {
        BatchShape b;
        for (long long i = 0; i < seqs; ++i) b.add_prefill(double(n), double(p));
        const double want = direct_us(s, Phase::prefill(seqs, n, p, n));
        EXPECT_NEAR(model.step_us(b), want, 1e-9 * want) << "prefill " << seqs << " x " << n << " after " << p;
      }
    }
  }
}

TEST(ServingStepTimeModel, MatchesTheOpGraphOnOneNode) { expect_matches_op_graph(deployment(8, 1, 8)); }

TEST(ServingStepTimeModel, MatchesTheOpGraphWithAttentionDataParallelAcrossNodes) {
  expect_matches_op_graph(deployment(8, 2, 16));
}

TEST(ServingStepTimeModel, MatchesTheOpGraphWithExpertsSplitInsideExperts) {
  expect_matches_op_graph(deployment(4, 1, 2, "b200"));
}

TEST(ServingStepTimeModel, IdenticalLayersAreEvaluatedOnce) {
  const Scenario s = deployment(8, 1, 8);
  const StepTimeModel model(s);
  const std::size_t ops = build_op_graph(s.model, Phase::decode(1, 0), s.parallelism, s.precision).ops.size();
  EXPECT_LT(model.unit_count() * 10, ops);  // 93 layers collapse to a few kinds of layer
}

TEST(ServingStepTimeModel, MixedBatchReadsWeightsOnce) {
  const Scenario s = deployment(8, 1, 8);
  const StepTimeModel model(s);
  BatchShape decode, prefill, mixed;
  for (int i = 0; i < 32; ++i) {
    decode.add_decode(4000);
    mixed.add_decode(4000);
  }
  prefill.add_prefill(2048, 1024);
  mixed.add_prefill(2048, 1024);
  const double d = model.step_us(decode), p = model.step_us(prefill), m = model.step_us(mixed);
  // Sharing the weight reads makes the mixed step cheaper than the two apart, never cheaper than either.
  EXPECT_LT(m, d + p);
  EXPECT_GT(m, std::max(d, p));
}

// The KDA state pass walks each chunk's 64-token steps in order, the chunks of a step beside each other: the
// chain term of a step is its longest chunk's, however many shorter chunks run with it.
TEST(ServingStepTimeModel, TheLongestPrefillChunkSetsTheChain) {
  Scenario with = deployment(8, 1, 8);
  with.hardware.serial_step_us[OpKind::kda_chunk] = 100.0;
  Scenario without = with;
  without.hardware.serial_step_us.clear();
  const StepTimeModel chained(with), plain(without);
  const double kda_layers = with.model.count_layers(AttentionKind::kda);
  ASSERT_GT(kda_layers, 0);
  for (const std::vector<double>& chunks : {std::vector<double>{1000}, {1000, 64}, {64, 1000, 65, 129}}) {
    BatchShape b;
    for (double n : chunks) b.add_prefill(n, 0);
    EXPECT_NEAR(chained.step_us(b) - plain.step_us(b), kda_layers * 16 * 100.0, 1e-6) << chunks.size() << " chunks";
  }
  BatchShape decode;
  decode.add_decode(4000);
  EXPECT_EQ(chained.step_us(decode), plain.step_us(decode));  // the recurrent step has no chain
}

TEST(ServingStepTimeModel, EmptyBatchTakesNoTime) {
  const StepTimeModel model(deployment(8, 1, 8));
  EXPECT_EQ(model.step_us(BatchShape{}), 0.0);
}

}  // namespace
}  // namespace k3::serving
