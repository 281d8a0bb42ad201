// Sampling against the CPU: greedy replayed in a CUDA graph (its comparisons against a CPU argmax with planted ties
// are cases of the op table, tests/gpu/op_cases/sampling_cases.cpp); top-p with a tiny
// top_p against greedy; the empirical distribution of many (seed, step, row) draws against the renormalised nucleus by
// a chi-square bound (a tie group split by the nucleus boundary, and a temperature ≠ 1 over a whole vocabulary); draws
// over K3's vocabulary staying inside a nucleus computed on the CPU; replay determinism, and the step read from device
// memory inside a CUDA graph.
#include "gpu_harness.h"
#include "kernels/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace k3::gpu_test {
namespace {

constexpr int kK3Vocab = 163840;

// Lowest id of the largest value, NaN as −∞.
int32_t cpu_argmax(const float* row, int vocab) {
  int32_t best = 0;
  float best_value = -INFINITY;
  for (int i = 0; i < vocab; ++i) {
    const float v = std::isnan(row[i]) ? -INFINITY : row[i];
    if (v > best_value) {
      best_value = v;
      best = i;
    }
  }
  return best;
}

// Probabilities of the nucleus (in fp64 from x = logit / temperature as the kernel forms it), zero outside it:
// tokens by decreasing x, ties by lower id, the shortest prefix reaching top_p.
std::vector<double> nucleus_probabilities(const std::vector<float>& logits, float temperature, float top_p) {
  const int vocab = int(logits.size());
  std::vector<float> x(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) x[size_t(i)] = logits[size_t(i)] / temperature;
  std::vector<int> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[size_t(a)] > x[size_t(b)]; });
  const float x_max = x[size_t(order[0])];
  std::vector<double> p(static_cast<size_t>(vocab));
  double total = 0;
  for (int i = 0; i < vocab; ++i) total += p[size_t(i)] = std::exp(double(x[size_t(i)]) - x_max);
  std::vector<double> nucleus(size_t(vocab), 0.0);
  double cumulative = 0;
  for (const int i : order) {
    nucleus[size_t(i)] = p[size_t(i)];
    cumulative += p[size_t(i)];
    if (cumulative >= double(top_p) * total) break;
  }
  for (double& v : nucleus) v /= cumulative;
  return nucleus;
}

// Upper bound of a chi-square statistic with `df` degrees of freedom at z = 5 (one-sided p ≈ 3e-7), by the
// Wilson–Hilferty approximation.
double chi_square_bound(int df) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + 5.0 * std::sqrt(a), 3.0);
}

TEST(GpuSampling, GreedyClusterPerRowReplaysInAGraph) {
  std::mt19937 rng(20261215);
  const int batch = 8;
  std::vector<float> logits = to_f32(random_matrix(batch, kK3Vocab, rng, -10.0f, 10.0f));
  K3_REQUIRE_GPU();
  DeviceBuffer<float> dlogits(logits);
  DeviceBuffer<int32_t> out(static_cast<size_t>(batch));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(kernels::sample_greedy(dlogits.get(), batch, kK3Vocab, out.get(), stream,
                                    kernels::SampleGreedyAlgorithm::cluster_per_row));
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    // New logits between replays: the maximum moves to a different part of each row every time.
    for (int b = 0; b < batch; ++b) logits[size_t(b) * kK3Vocab + size_t(replay * 50000 + b * 997)] = 50.0f + replay;
    dlogits.upload(logits);
    std::vector<int32_t> expected(static_cast<size_t>(batch));
    for (int b = 0; b < batch; ++b) expected[size_t(b)] = cpu_argmax(logits.data() + size_t(b) * kK3Vocab, kK3Vocab);
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(out.download(), expected) << "replay " << replay;
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// Runs sample_top_p for `steps` consecutive steps; all draws, step-major.
std::vector<int32_t> draw(const std::vector<float>& logits, int batch, int vocab, float temperature, float top_p,
                          uint64_t seed, int64_t first_step, int steps) {
  DeviceBuffer<float> dlogits(logits);
  DeviceBuffer<int64_t> step(1);
  DeviceBuffer<int32_t> out(static_cast<size_t>(batch));
  std::vector<int32_t> all;
  for (int s = 0; s < steps; ++s) {
    step.upload({first_step + s});
    CUDA_CHECK(kernels::sample_top_p(dlogits.get(), batch, vocab, temperature, top_p, seed, step.get(), nullptr, 0,
                                     out.get(), nullptr));
    const std::vector<int32_t> tokens = out.download();
    all.insert(all.end(), tokens.begin(), tokens.end());
  }
  return all;
}

std::vector<float> repeat_rows(const std::vector<float>& row, int batch) {
  std::vector<float> all;
  for (int b = 0; b < batch; ++b) all.insert(all.end(), row.begin(), row.end());
  return all;
}

TEST(GpuSampling, TinyTopPIsGreedy) {
  std::mt19937 rng(20261211);
  const int batch = 8;
  std::vector<float> logits = to_f32(random_matrix(batch, kK3Vocab, rng, -10.0f, 10.0f));
  logits[size_t(3) * kK3Vocab + 500] = logits[size_t(3) * kK3Vocab + 90000] = 15.0f;  // tied maxima: id 500
  std::vector<int32_t> expected(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b) expected[size_t(b)] = cpu_argmax(logits.data() + size_t(b) * kK3Vocab, kK3Vocab);
  ASSERT_EQ(expected[3], 500);
  K3_REQUIRE_GPU();
  const std::vector<int32_t> tokens = draw(logits, batch, kK3Vocab, 0.8f, 1e-6f, 7, 0, 4);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(tokens[i], expected[i % batch]) << "draw " << i;
}

// Counts of `tokens` over the vocabulary against `expected` probabilities: nothing outside the support, and the
// chi-square statistic over the support within the bound.
void check_distribution(const std::vector<int32_t>& tokens, const std::vector<double>& expected,
                        const std::string& label) {
  std::vector<double> count(expected.size(), 0.0);
  for (const int32_t t : tokens) {
    ASSERT_GE(t, 0) << label;
    ASSERT_LT(size_t(t), expected.size()) << label;
    ASSERT_GT(expected[size_t(t)], 0.0) << label << ": token " << t << " is outside the nucleus";
    ++count[size_t(t)];
  }
  double chi_square = 0;
  int support = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0.0) continue;
    ++support;
    const double e = expected[i] * double(tokens.size());
    chi_square += (count[i] - e) * (count[i] - e) / e;
  }
  EXPECT_LE(chi_square, chi_square_bound(support - 1)) << label << " over " << support << " tokens";
}

TEST(GpuSampling, TopPDistributionMatchesTheNucleus) {
  // Probabilities by id; the four 0.1s tie exactly, and top_p = 0.65 takes the two lowest-id ones of them
  // (cumulative 0.3, 0.5, 0.6, 0.7): nucleus {2, 4, 0, 3} with 3/7, 2/7, 1/7, 1/7.
  const std::vector<double> p = {0.1, 0.05, 0.3, 0.1, 0.2, 0.1, 0.05, 0.1};
  std::vector<float> tie_logits;
  for (const double v : p) tie_logits.push_back(float(std::log(v)));
  const std::vector<double> tie_nucleus = nucleus_probabilities(tie_logits, 1.0f, 0.65f);
  ASSERT_NEAR(tie_nucleus[2], 3.0 / 7, 1e-6);
  ASSERT_NEAR(tie_nucleus[0], 1.0 / 7, 1e-6);
  ASSERT_NEAR(tie_nucleus[3], 1.0 / 7, 1e-6);
  ASSERT_EQ(tie_nucleus[5], 0.0);
  ASSERT_EQ(tie_nucleus[7], 0.0);
  // A whole small vocabulary at temperature 2.
  std::mt19937 rng(20261212);
  const std::vector<float> flat_logits = to_f32(random_matrix(1, 37, rng, -2.0f, 2.0f));
  const std::vector<double> flat = nucleus_probabilities(flat_logits, 2.0f, 1.0f);
  K3_REQUIRE_GPU();
  const int batch = 512, steps = 64;
  check_distribution(draw(repeat_rows(tie_logits, batch), batch, int(p.size()), 1.0f, 0.65f, 11, 100, steps),
                     tie_nucleus, "tie group at the boundary");
  check_distribution(draw(repeat_rows(flat_logits, batch), batch, 37, 2.0f, 1.0f, 12, 0, steps), flat,
                     "temperature 2, top_p 1");
}

TEST(GpuSampling, TopPStaysInsideTheNucleusOverK3Vocabulary) {
  std::mt19937 rng(20261213);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(kK3Vocab);
  for (float& v : logits) v = normal(rng);
  // top_p halfway between the mass of the top 199 and the top 200 tokens: the nucleus is exactly the top 200.
  std::vector<int> order(kK3Vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
  double total = 0, top199 = 0;
  for (int i = 0; i < kK3Vocab; ++i) total += std::exp(double(logits[size_t(order[size_t(i)])]) - logits[size_t(order[0])]);
  for (int i = 0; i < 199; ++i) top199 += std::exp(double(logits[size_t(order[size_t(i)])]) - logits[size_t(order[0])]);
  const double p200 = std::exp(double(logits[size_t(order[199])]) - logits[size_t(order[0])]);
  const float top_p = float((top199 + 0.5 * p200) / total);
  const std::set<int> nucleus(order.begin(), order.begin() + 200);
  ASSERT_GT(p200 / total, 1e-5);  // the margin on each side is far above fp32 rounding of the masses
  K3_REQUIRE_GPU();
  const int batch = 64;
  const std::vector<int32_t> tokens = draw(repeat_rows(logits, batch), batch, kK3Vocab, 1.0f, top_p, 99, 0, 8);
  std::set<int> distinct;
  for (const int32_t t : tokens) {
    ASSERT_TRUE(nucleus.count(t) == 1) << "token " << t << " is outside the top 200";
    distinct.insert(t);
  }
  EXPECT_GT(distinct.size(), 20u);
}

TEST(GpuSampling, TopPIsDeterministicForSeedAndStepAndReplaysInAGraph) {
  std::mt19937 rng(20261214);
  const int batch = 64;
  const std::vector<float> logits = to_f32(random_matrix(batch, kK3Vocab, rng, -4.0f, 4.0f));
  K3_REQUIRE_GPU();
  const std::vector<int32_t> first = draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 5, 42, 1);
  EXPECT_EQ(draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 5, 42, 1), first);
  EXPECT_NE(draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 5, 43, 1), first);
  EXPECT_NE(draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 6, 42, 1), first);

  // Captured once; the step advances in device memory between replays.
  DeviceBuffer<float> dlogits(logits);
  DeviceBuffer<int64_t> step(1);
  DeviceBuffer<int32_t> out(static_cast<size_t>(batch));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(kernels::sample_top_p(dlogits.get(), batch, kK3Vocab, 1.0f, 0.9f, 5, step.get(),
                                   nullptr, 0, out.get(), stream));
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (const int64_t s : {int64_t(42), int64_t(43), int64_t(7)}) {
    step.upload({s});
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(out.download(), draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 5, s, 1)) << "step " << s;
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(GpuSampling, RejectsInvalidArguments) {
  K3_REQUIRE_GPU();
  DeviceBuffer<float> logits(16);
  DeviceBuffer<int64_t> step(std::vector<int64_t>{0});
  DeviceBuffer<int32_t> out(1);
  for (const auto& [temperature, top_p] : {std::pair{0.0f, 0.9f}, std::pair{1.0f, 0.0f}, std::pair{1.0f, 1.5f},
                                           std::pair{-1.0f, 0.5f}, std::pair{1.0f, NAN}}) {
    EXPECT_EQ(kernels::sample_top_p(logits.get(), 1, 16, temperature, top_p, 0, step.get(), nullptr, 0, out.get(),
                                    nullptr),
              cudaErrorInvalidValue)
        << temperature << " " << top_p;
  }
  EXPECT_EQ(kernels::sample_greedy(logits.get(), 1, 0, out.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::sample_top_p_workspace_bytes(64, kK3Vocab), 0u);
}

}  // namespace
}  // namespace k3::gpu_test
