// sample_top_p: top-p (nucleus) sampling with temperature from fp32 logits [batch, vocab] dense (K3: vocab
// 163840; any vocab up to 2^23), one 1024-thread block per row. The engine samples greedily (kernels/sampling.h), so
// this version lives outside the library.
//   x = logits / temperature; the nucleus is the shortest prefix of the tokens ordered by decreasing x (ties: lower
//   id first) whose probability mass reaches top_p; out[b] is drawn from the nucleus renormalised, with the uniform
//   number taken from a counter-based hash of (seed, *step, b) (uniform_bits), so a replay with the same
//   (seed, step) gives the same tokens and the step can advance in device memory between replays of a CUDA graph.
//   temperature > 0, top_p in (0, 1]. Where the largest x is not finite (every logit NaN or −∞, or x overflows),
//   out[b] is the token of largest x (ties: lowest id).
// Probability masses are fixed-point integers, m_i = ⌊exp(x_i − max x) · 2^40⌋ (the largest token has exactly 2^40),
// so every sum is exact and independent of the order of summation: the result is deterministic, and a token's
// probability is off by less than 2^-40 / Σm of the total. The nucleus reaches ⌈top_p · Σm⌉ (at least 1), so
// top_p → 0 gives the greedy token.
// sample_top_p_radix_select: max; masses and their sum; the threshold value of the nucleus found by a 4-pass radix
// select over the 32-bit order-preserving key of x (a 256-bin mass histogram per byte, integer atomics); then
// per-thread contiguous id ranges: nucleus mass and ties at the threshold, block scans, and the thread whose range
// holds the drawn point walks it. Seven passes over the row, all from L2 after the first. Faster (not done): split a
// row over several blocks (batch 1 uses one SM).
// The checks: a tiny top_p gives the CPU argmax (planted tie); the empirical distribution of many (seed, step, row)
// draws against the renormalised nucleus by a chi-square bound (a tie group split by the nucleus boundary, and a
// temperature ≠ 1 over a whole small vocabulary); draws over K3's vocabulary staying inside a nucleus computed on the
// CPU; replay determinism, and the step read from device memory inside a CUDA graph; invalid arguments refused.
// Then the time of one call at batch 1 and 64 over K3's vocabulary. Needs a CUDA device (exit 77 without one).
#include "bench/lab/lab_common.h"
#include "kernels/sampling_block.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace k3::lab {
namespace {

using namespace kernels::sampling_block;

constexpr int kBins = 256;                      // one byte of the key per radix pass
constexpr float kMassScale = 1099511627776.0f;  // 2^40: the fixed-point unit of probability mass
constexpr int kMaxTopPVocab = 1 << 23;          // so the sum of masses, < vocab · 2^40, fits in 64 bits
constexpr int kK3Vocab = 163840;

// SplitMix64's finaliser (a bijective 64-bit mix).
__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The 64 random bits of batch row `sequence` at `step`: the finaliser chained over (seed, step, sequence). The
// drawn point in the nucleus is ⌊bits · nucleus_mass / 2^64⌋.
__host__ __device__ inline uint64_t uniform_bits(uint64_t seed, int64_t step, int64_t sequence) {
  return mix64(mix64(mix64(seed) ^ static_cast<uint64_t>(step)) ^ static_cast<uint64_t>(sequence));
}

struct Sum {
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const { return a + b; }
};

// Exclusive prefix sum over the block in thread order; *total gets the sum of all values.
__device__ uint64_t block_exclusive_sum(uint64_t v, uint64_t* total) {
  __shared__ uint64_t warp_sums[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint64_t inclusive = v;
  for (int offset = 1; offset < 32; offset *= 2) {
    const uint64_t up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    uint64_t w = warp_sums[lane];
    for (int offset = 1; offset < 32; offset *= 2) {
      const uint64_t up = __shfl_up_sync(0xffffffffu, w, offset);
      if (lane >= offset) w += up;
    }
    warp_sums[lane] = w;
  }
  __syncthreads();
  const uint64_t before = warp > 0 ? warp_sums[warp - 1] : 0;
  *total = warp_sums[kWarps - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return before + inclusive - v;
}

// x = logit / temperature, NaN as −∞.
__device__ float scaled(const float* row, int i, float temperature) {
  const float x = row[i] / temperature;
  return isnan(x) ? -INFINITY : x;
}
// Fixed-point mass ⌊exp(x − x_max) · 2^40⌋ (x ≤ x_max, x_max finite).
__device__ uint64_t mass_of(float x, float x_max) { return __float2ull_rz(expf(x - x_max) * kMassScale); }

__global__ void sample_top_p_radix_select(const float* logits, int vocab, float temperature, float top_p, uint64_t seed,
                                          const int64_t* step, int32_t* out_tokens) {
  __shared__ unsigned long long histogram[kBins];
  __shared__ uint32_t chosen_bin;
  __shared__ uint64_t chosen_above;
  const float* row = logits + int64_t(blockIdx.x) * vocab;
  const int tid = threadIdx.x;

  // Pass 1: the largest x (and its lowest id).
  uint64_t best = 0;
  for (int i = tid; i < vocab; i += kThreads) {
    const uint64_t candidate = pack_key_id(order_key(scaled(row, i, temperature)), i);
    best = candidate > best ? candidate : best;
  }
  best = block_reduce(best, Max{});
  const float x_max = key_value(static_cast<uint32_t>(best >> 32));
  if (!isfinite(x_max)) {  // block-uniform: no distribution to draw from
    if (tid == 0) out_tokens[blockIdx.x] = packed_id(best);
    return;
  }

  // Pass 2: the masses, their sum and the histogram of the key's top byte.
  for (int b = tid; b < kBins; b += kThreads) histogram[b] = 0;
  __syncthreads();
  uint64_t total_mass = 0;
  for (int i = tid; i < vocab; i += kThreads) {
    const float x = scaled(row, i, temperature);
    const uint64_t m = mass_of(x, x_max);
    total_mass += m;
    if (m != 0) atomicAdd(&histogram[order_key(x) >> 24], static_cast<unsigned long long>(m));
  }
  total_mass = block_reduce(total_mass, Sum{});  // also orders the histogram updates before the reads below
  // The nucleus must reach this much mass; ≥ 1, ≤ the total.
  uint64_t target = static_cast<uint64_t>(ceil(double(top_p) * double(total_mass)));
  target = target < 1 ? 1 : (target > total_mass ? total_mass : target);

  // Passes 3-5 (and the selection after pass 2): the threshold key, one byte at a time from the top. Invariant:
  // `above` = mass of the keys greater than every key with this prefix, above < target ≤ above + mass(prefix).
  uint32_t prefix = 0, prefix_mask = 0;
  uint64_t above = 0;
  for (int digit = 0; digit < 4; ++digit) {
    const int shift = 24 - 8 * digit;
    if (digit > 0) {
      for (int i = tid; i < vocab; i += kThreads) {
        const float x = scaled(row, i, temperature);
        const uint32_t key = order_key(x);
        if ((key & prefix_mask) != prefix) continue;
        const uint64_t m = mass_of(x, x_max);
        if (m != 0) atomicAdd(&histogram[(key >> shift) & 0xFFu], static_cast<unsigned long long>(m));
      }
      __syncthreads();
    }
    if (tid == 0) {
      uint64_t cumulative = above;
      uint32_t bin = kBins - 1;
      for (; bin > 0; --bin) {
        if (cumulative + histogram[bin] >= target) break;
        cumulative += histogram[bin];
      }
      chosen_bin = bin;  // bin 0 when no higher bin reached the target: the invariant says it does
      chosen_above = cumulative;
    }
    __syncthreads();
    prefix |= chosen_bin << shift;
    prefix_mask |= 0xFFu << shift;
    above = chosen_above;
    for (int b = tid; b < kBins; b += kThreads) histogram[b] = 0;
    __syncthreads();  // chosen_* read and the histogram cleared before the next pass writes them
  }
  const uint32_t threshold_key = prefix;
  const uint64_t threshold_mass = mass_of(key_value(threshold_key), x_max);  // > 0 by the invariant
  const uint64_t ties_needed = (target - above + threshold_mass - 1) / threshold_mass;

  // Pass 6: per contiguous id range, the mass above the threshold and the tokens at it; ties enter the nucleus
  // lowest id first.
  const int per_thread = (vocab + kThreads - 1) / kThreads;
  const int begin = min(vocab, tid * per_thread), end = min(vocab, begin + per_thread);
  uint64_t range_above = 0, range_ties = 0;
  for (int i = begin; i < end; ++i) {
    const float x = scaled(row, i, temperature);
    const uint32_t key = order_key(x);
    if (key > threshold_key) range_above += mass_of(x, x_max);
    if (key == threshold_key) ++range_ties;
  }
  uint64_t all_ties = 0;
  const uint64_t tie_rank = block_exclusive_sum(range_ties, &all_ties);
  const uint64_t ties_taken =
      tie_rank >= ties_needed ? 0 : (ties_needed - tie_rank < range_ties ? ties_needed - tie_rank : range_ties);
  const uint64_t range_nucleus = range_above + ties_taken * threshold_mass;
  uint64_t nucleus_mass = 0;
  const uint64_t range_start = block_exclusive_sum(range_nucleus, &nucleus_mass);

  // The draw: the point ⌊bits · nucleus / 2^64⌋ in [0, nucleus), ids in increasing order.
  const uint64_t point = __umul64hi(uniform_bits(seed, *step, blockIdx.x), nucleus_mass);
  if (range_nucleus == 0 || point < range_start || point >= range_start + range_nucleus) return;
  uint64_t cumulative = range_start, rank = tie_rank;
  for (int i = begin; i < end; ++i) {
    const float x = scaled(row, i, temperature);
    const uint32_t key = order_key(x);
    uint64_t m = 0;
    if (key > threshold_key) m = mass_of(x, x_max);
    if (key == threshold_key) m = rank++ < ties_needed ? threshold_mass : 0;
    if (point < cumulative + m) {
      out_tokens[blockIdx.x] = i;
      return;
    }
    cumulative += m;
  }
}

cudaError_t sample_top_p(const float* logits, int batch, int vocab, float temperature, float top_p, uint64_t seed,
                         const int64_t* step, int32_t* out_tokens, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  if (batch < 0 || vocab < 1 || vocab > kMaxTopPVocab || logits == nullptr || out_tokens == nullptr ||
      step == nullptr || !std::isfinite(temperature) || !(temperature > 0.0f) || !(top_p > 0.0f && top_p <= 1.0f)) {
    return cudaErrorInvalidValue;
  }
  sample_top_p_radix_select<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(logits, vocab, temperature, top_p,
                                                                                   seed, step, out_tokens);
  return cudaGetLastError();
}

// ---- The CPU side ----

int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("%-72s %s\n", what.c_str(), ok ? "ok" : "FAILED");
  failures += ok ? 0 : 1;
}

std::vector<float> uniform_logits(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

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

// Runs sample_top_p for `steps` consecutive steps; all draws, step-major.
std::vector<int32_t> draw(const std::vector<float>& logits, int batch, int vocab, float temperature, float top_p,
                          uint64_t seed, int64_t first_step, int steps) {
  float* dlogits = device_copy(logits);
  int64_t* step = device_copy(std::vector<int64_t>{0});
  int32_t* out = device_copy(std::vector<int32_t>(size_t(batch), -1));
  std::vector<int32_t> all;
  for (int s = 0; s < steps; ++s) {
    const int64_t value = first_step + s;
    LAB_CUDA(cudaMemcpy(step, &value, sizeof value, cudaMemcpyHostToDevice));
    LAB_CUDA(sample_top_p(dlogits, batch, vocab, temperature, top_p, seed, step, out, nullptr));
    const std::vector<int32_t> tokens = host_copy(out, size_t(batch));
    all.insert(all.end(), tokens.begin(), tokens.end());
  }
  LAB_CUDA(cudaFree(dlogits));
  LAB_CUDA(cudaFree(step));
  LAB_CUDA(cudaFree(out));
  return all;
}

std::vector<float> repeat_rows(const std::vector<float>& row, int batch) {
  std::vector<float> all;
  for (int b = 0; b < batch; ++b) all.insert(all.end(), row.begin(), row.end());
  return all;
}

// Counts of `tokens` over the vocabulary against `expected` probabilities: nothing outside the support, and the
// chi-square statistic over the support within the bound.
void check_distribution(const std::vector<int32_t>& tokens, const std::vector<double>& expected,
                        const std::string& label) {
  std::vector<double> count(expected.size(), 0.0);
  bool inside = true;
  for (const int32_t t : tokens) {
    inside = inside && t >= 0 && size_t(t) < expected.size() && expected[size_t(t)] > 0.0;
    if (inside) ++count[size_t(t)];
  }
  check(inside, label + ": every draw inside the nucleus");
  double chi_square = 0;
  int support = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0.0) continue;
    ++support;
    const double e = expected[i] * double(tokens.size());
    chi_square += (count[i] - e) * (count[i] - e) / e;
  }
  check(inside && chi_square <= chi_square_bound(support - 1), label + ": chi-square within its bound");
}

void tiny_top_p_is_greedy() {
  std::mt19937 rng(20261211);
  const int batch = 8;
  std::vector<float> logits = uniform_logits(size_t(batch) * kK3Vocab, -10.0f, 10.0f, rng);
  logits[size_t(3) * kK3Vocab + 500] = logits[size_t(3) * kK3Vocab + 90000] = 15.0f;  // tied maxima: id 500
  std::vector<int32_t> expected(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b) expected[size_t(b)] = cpu_argmax(logits.data() + size_t(b) * kK3Vocab, kK3Vocab);
  check(expected[3] == 500, "reference: the tie's lowest id is the argmax");
  const std::vector<int32_t> tokens = draw(logits, batch, kK3Vocab, 0.8f, 1e-6f, 7, 0, 4);
  bool greedy = true;
  for (size_t i = 0; i < tokens.size(); ++i) greedy = greedy && tokens[i] == expected[i % batch];
  check(greedy, "top_p 1e-6 gives the argmax, 4 steps of batch 8 over K3's vocabulary");
}

void distribution_matches_the_nucleus() {
  // Probabilities by id; the four 0.1s tie exactly, and top_p = 0.65 takes the two lowest-id ones of them
  // (cumulative 0.3, 0.5, 0.6, 0.7): nucleus {2, 4, 0, 3} with 3/7, 2/7, 1/7, 1/7.
  const std::vector<double> p = {0.1, 0.05, 0.3, 0.1, 0.2, 0.1, 0.05, 0.1};
  std::vector<float> tie_logits;
  for (const double v : p) tie_logits.push_back(float(std::log(v)));
  const std::vector<double> tie_nucleus = nucleus_probabilities(tie_logits, 1.0f, 0.65f);
  check(std::abs(tie_nucleus[2] - 3.0 / 7) < 1e-6 && std::abs(tie_nucleus[0] - 1.0 / 7) < 1e-6 &&
            std::abs(tie_nucleus[3] - 1.0 / 7) < 1e-6 && tie_nucleus[5] == 0.0 && tie_nucleus[7] == 0.0,
        "reference: the nucleus splits the tie group by id");
  // A whole small vocabulary at temperature 2.
  std::mt19937 rng(20261212);
  const std::vector<float> flat_logits = uniform_logits(37, -2.0f, 2.0f, rng);
  const std::vector<double> flat = nucleus_probabilities(flat_logits, 2.0f, 1.0f);
  const int batch = 512, steps = 64;
  check_distribution(draw(repeat_rows(tie_logits, batch), batch, int(p.size()), 1.0f, 0.65f, 11, 100, steps),
                     tie_nucleus, "tie group at the boundary");
  check_distribution(draw(repeat_rows(flat_logits, batch), batch, 37, 2.0f, 1.0f, 12, 0, steps), flat,
                     "temperature 2, top_p 1");
}

void stays_inside_the_nucleus_over_k3_vocabulary() {
  std::mt19937 rng(20261213);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(kK3Vocab);
  for (float& v : logits) v = normal(rng);
  // top_p halfway between the mass of the top 199 and the top 200 tokens: the nucleus is exactly the top 200.
  std::vector<int> order(kK3Vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
  const auto mass = [&](int rank) {
    return std::exp(double(logits[size_t(order[size_t(rank)])]) - logits[size_t(order[0])]);
  };
  double total = 0, top199 = 0;
  for (int i = 0; i < kK3Vocab; ++i) total += mass(i);
  for (int i = 0; i < 199; ++i) top199 += mass(i);
  const double p200 = mass(199);
  const float top_p = float((top199 + 0.5 * p200) / total);
  const std::set<int> nucleus(order.begin(), order.begin() + 200);
  check(p200 / total > 1e-5, "reference: the margin on each side is far above fp32 rounding of the masses");
  const int batch = 64;
  const std::vector<int32_t> tokens = draw(repeat_rows(logits, batch), batch, kK3Vocab, 1.0f, top_p, 99, 0, 8);
  std::set<int> distinct;
  bool inside = true;
  for (const int32_t t : tokens) {
    inside = inside && nucleus.count(t) == 1;
    distinct.insert(t);
  }
  check(inside, "K3's vocabulary: every draw among the top 200");
  check(distinct.size() > 20u, "K3's vocabulary: more than 20 distinct tokens drawn");
}

void deterministic_for_seed_and_step_and_replays_in_a_graph() {
  std::mt19937 rng(20261214);
  const int batch = 64;
  const std::vector<float> logits = uniform_logits(size_t(batch) * kK3Vocab, -4.0f, 4.0f, rng);
  const std::vector<int32_t> first = draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 5, 42, 1);
  check(draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 5, 42, 1) == first, "the same (seed, step): the same tokens");
  check(draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 5, 43, 1) != first, "another step: other tokens");
  check(draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 6, 42, 1) != first, "another seed: other tokens");

  // Captured once; the step advances in device memory between replays.
  float* dlogits = device_copy(logits);
  int64_t* step = device_copy(std::vector<int64_t>{0});
  int32_t* out = device_copy(std::vector<int32_t>(size_t(batch), -1));
  cudaStream_t stream;
  LAB_CUDA(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  LAB_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  LAB_CUDA(sample_top_p(dlogits, batch, kK3Vocab, 1.0f, 0.9f, 5, step, out, stream));
  LAB_CUDA(cudaStreamEndCapture(stream, &graph));
  LAB_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (const int64_t s : {int64_t(42), int64_t(43), int64_t(7)}) {
    LAB_CUDA(cudaMemcpy(step, &s, sizeof s, cudaMemcpyHostToDevice));
    LAB_CUDA(cudaGraphLaunch(exec, stream));
    LAB_CUDA(cudaStreamSynchronize(stream));
    check(host_copy(out, size_t(batch)) == draw(logits, batch, kK3Vocab, 1.0f, 0.9f, 5, s, 1),
          "graph replay at step " + std::to_string(s) + " equals a direct call");
  }
  LAB_CUDA(cudaGraphExecDestroy(exec));
  LAB_CUDA(cudaGraphDestroy(graph));
  LAB_CUDA(cudaStreamDestroy(stream));
  LAB_CUDA(cudaFree(dlogits));
  LAB_CUDA(cudaFree(step));
  LAB_CUDA(cudaFree(out));
}

void rejects_invalid_arguments() {
  float* logits = device_copy(std::vector<float>(16, 0.0f));
  int64_t* step = device_copy(std::vector<int64_t>{0});
  int32_t* out = device_copy(std::vector<int32_t>{0});
  for (const auto& [temperature, top_p] : {std::pair{0.0f, 0.9f}, std::pair{1.0f, 0.0f}, std::pair{1.0f, 1.5f},
                                           std::pair{-1.0f, 0.5f}, std::pair{1.0f, NAN}}) {
    check(sample_top_p(logits, 1, 16, temperature, top_p, 0, step, out, nullptr) == cudaErrorInvalidValue,
          "refused: temperature " + std::to_string(temperature) + ", top_p " + std::to_string(top_p));
  }
  LAB_CUDA(cudaFree(logits));
  LAB_CUDA(cudaFree(step));
  LAB_CUDA(cudaFree(out));
}

// One call over K3's vocabulary, inputs rotated over more than the L2.
void time_calls() {
  for (const int batch : {1, 64}) {
    const size_t row_bytes = size_t(batch) * kK3Vocab * sizeof(float);
    const int sets = int(std::max<size_t>(2, (size_t(200) << 20) / row_bytes + 1));
    std::mt19937 rng(5);
    float* logits = device_copy(uniform_logits(size_t(sets) * batch * kK3Vocab, -8.0f, 8.0f, rng));
    int64_t* step = device_copy(std::vector<int64_t>{0});
    int32_t* out = device_copy(std::vector<int32_t>(size_t(batch), 0));
    int i = 0;
    const double us = time_us([&] {
      (void)sample_top_p(logits + size_t(i++ % sets) * batch * kK3Vocab, batch, kK3Vocab, 1.0f, 0.9f, 1234, step, out,
                         nullptr);
    });
    std::printf("sample_top_p 0.9 batch %d vocab %d: %.1f us per call\n", batch, kK3Vocab, us);
    LAB_CUDA(cudaFree(logits));
    LAB_CUDA(cudaFree(step));
    LAB_CUDA(cudaFree(out));
  }
}

int run() {
  if (device_capability() == 0) {
    std::printf("sample_top_p: needs a CUDA device; skipped\n");
    return kSkipped;
  }
  tiny_top_p_is_greedy();
  distribution_matches_the_nucleus();
  stays_inside_the_nucleus_over_k3_vocabulary();
  deterministic_for_seed_and_step_and_replays_in_a_graph();
  rejects_invalid_arguments();
  time_calls();
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace k3::lab

int main() { return k3::lab::run(); }
