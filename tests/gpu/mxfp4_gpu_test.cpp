// MXFP4 grouped routed-expert products (kernels/mxfp4_grouped.h) against the CPU: random normal weights
// quantised with weights::mxfp4_quantize and decoded with weights::mxfp4_dequantize, y = x Wᵀ per slot in
// fp64, with the routing built on the CPU in the device bucketing's contract. Every algorithm (the GEMV
// and the two GEMMs) on odd sizes (one and several cp.async k-steps, a partial last step) and K3's
// expert shape, empty experts, one expert holding every slot, 1..300 slots per expert, a prefill-like
// routing with partial tiles in both dimensions, every E2M1 code at scales on both sides of the
// two-multiply threshold, NaN scales, invalid tokens, replay from a CUDA graph with a new routing, and
// argument rejection. The dequantise-then-cuBLASLt prefill path (kernels/mxfp4_grouped_dequantized.h): its decode
// bit for bit against the CPU's, its products on the same cases, and its argument rejection.
#include "core/error.h"
#include "engine/runtime/gemm_cublaslt.h"
#include "engine/weights/mx_format.h"
#include "gpu_harness.h"
#include "kernels/mxfp4_grouped.h"
#include "kernels/mxfp4_grouped_dequantized.h"
#include "kernels/mxfp4_tiled.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace k3::gpu_test {
namespace {

using kernels::Mxfp4GroupedAlgorithm;

// fp32 accumulation (tensor-core fp32 sums) against fp64.
constexpr double kF32Tolerance = 1e-5;

// All experts of one projection as the checkpoint stacks them (or in the tiled layout), and each expert's decoded
// weights.
struct ExpertBank {
  int experts = 0;
  int64_t out = 0, in = 0;
  std::vector<uint8_t> packed;           // [experts, out, in/2]
  std::vector<uint8_t> scales;           // [experts, out, in/32]
  std::vector<ref::MatrixD> dequantized;  // [out, in] per expert
  kernels::Mxfp4Layout layout = kernels::Mxfp4Layout::canonical;
};

// The same bank in the tiled layout (kernels/mxfp4_tiled.h), repacked on the host.
ExpertBank tiled_bank(const ExpertBank& bank) {
  ExpertBank tiled = bank;
  kernels::mxfp4_tiled_repack_host(bank.packed.data(), bank.scales.data(), bank.experts, bank.out, bank.in,
                                   tiled.packed.data(), tiled.scales.data());
  tiled.layout = kernels::Mxfp4Layout::tiled16;
  return tiled;
}

void decode_bank(ExpertBank& bank) {
  const int64_t n = bank.out * bank.in;
  bank.dequantized.clear();
  for (int e = 0; e < bank.experts; ++e) {
    ref::Matrix w(bank.out, bank.in);
    weights::mxfp4_dequantize(bank.packed.data() + e * n / 2, bank.scales.data() + e * n / 32, n, w.data());
    bank.dequantized.push_back(w.cast<double>());
  }
}

// Standard normal weights times a power of two per 32-element block (2^-6..2^6), so the scale bytes vary
// and some exceed 128 (the kernels' two-multiply path).
ExpertBank random_bank(int experts, int64_t out, int64_t in, std::mt19937& rng) {
  ExpertBank bank{experts, out, in, {}, {}, {}};
  const int64_t n = out * in;
  bank.packed.resize(size_t(experts * n / 2));
  bank.scales.resize(size_t(experts * n / 32));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-6, 6);
  std::vector<float> w(static_cast<size_t>(n));
  for (int e = 0; e < experts; ++e) {
    for (int64_t b = 0; b < n / 32; ++b) {
      const float block_scale = std::ldexp(1.0f, exponent(rng));
      for (int64_t i = 0; i < 32; ++i) w[size_t(b * 32 + i)] = normal(rng) * block_scale;
    }
    weights::mxfp4_quantize(w.data(), n, bank.packed.data() + e * n / 2, bank.scales.data() + e * n / 32);
  }
  decode_bank(bank);
  return bank;
}

// The device bucketing's contract, built on the CPU from (token, expert) pairs in (token, choice) order:
// slots expert-major (within an expert in pair order), offsets [experts + 1], active ids ascending.
struct HostRouting {
  std::vector<int32_t> offsets, slot_token, active;
  int32_t active_count = 0;
  int slots() const { return static_cast<int>(slot_token.size()); }
};

HostRouting bucket(const std::vector<std::pair<int, int>>& token_expert, int experts) {
  HostRouting r;
  r.offsets.assign(size_t(experts + 1), 0);
  for (const auto& [token, expert] : token_expert) ++r.offsets[size_t(expert + 1)];
  for (int e = 0; e < experts; ++e) r.offsets[size_t(e + 1)] += r.offsets[size_t(e)];
  r.slot_token.resize(token_expert.size());
  std::vector<int32_t> next(r.offsets.begin(), r.offsets.end() - 1);
  for (const auto& [token, expert] : token_expert) r.slot_token[size_t(next[size_t(expert)]++)] = token;
  for (int e = 0; e < experts; ++e) {
    if (r.offsets[size_t(e + 1)] > r.offsets[size_t(e)]) r.active.push_back(e);
  }
  r.active_count = static_cast<int32_t>(r.active.size());
  r.active.resize(size_t(experts), -1);  // the device array has room for every expert
  return r;
}

// Expert e receives counts[e] slots, from distinct random tokens of [0, x_rows).
HostRouting routing_with_counts(const std::vector<int>& counts, int x_rows, std::mt19937& rng) {
  std::vector<std::pair<int, int>> pairs;
  for (size_t e = 0; e < counts.size(); ++e) {
    std::vector<int> tokens(static_cast<size_t>(x_rows));
    std::iota(tokens.begin(), tokens.end(), 0);
    std::shuffle(tokens.begin(), tokens.end(), rng);
    for (int j = 0; j < counts[e]; ++j) pairs.emplace_back(tokens[size_t(j)], static_cast<int>(e));
  }
  std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return bucket(pairs, static_cast<int>(counts.size()));
}

// y[s] = x[slot_token[s]] · W_eᵀ for every slot, in fp64: each expert's gathered x rows times W_eᵀ.
ref::MatrixD reference(const ExpertBank& bank, const HostRouting& r, const ref::Matrix& x) {
  ref::MatrixD y(r.slots(), bank.out);
  for (int e = 0; e < bank.experts; ++e) {
    const int first = r.offsets[size_t(e)], count = r.offsets[size_t(e + 1)] - first;
    if (count == 0) continue;
    ref::MatrixD gathered(count, bank.in);
    for (int j = 0; j < count; ++j) {
      gathered.row(j) = x.row(r.slot_token[size_t(first + j)]).leftCols(bank.in).cast<double>();
    }
    y.middleRows(first, count) = gathered * bank.dequantized[size_t(e)].transpose();
  }
  return y;
}

struct DeviceBank {
  DeviceBuffer<uint8_t> packed, scales;
  kernels::Mxfp4ExpertWeights view;
  explicit DeviceBank(const ExpertBank& b)
      : packed(b.packed), scales(b.scales), view{packed.get(), scales.get(), b.experts, b.out, b.in, b.layout} {}
};

struct DeviceRouting {
  DeviceBuffer<int32_t> offsets, slot_token, active, count;
  int max_slots;
  explicit DeviceRouting(const HostRouting& h)
      : offsets(h.offsets), slot_token(h.slot_token), active(h.active), count(std::vector<int32_t>{h.active_count}),
        max_slots(h.slots()) {}
  void upload(const HostRouting& h) {
    offsets.upload(h.offsets);
    slot_token.upload(h.slot_token);
    active.upload(h.active);
    count.upload({h.active_count});
  }
  kernels::ExpertRouting view(int experts) {
    return {offsets.get(), slot_token.get(), active.get(), count.get(), max_slots, std::min(max_slots, experts)};
  }
};

cudaError_t run(const kernels::Mxfp4ExpertWeights& w, const kernels::ExpertRouting& r, const __nv_bfloat16* x,
                int64_t x_stride, int64_t x_rows, float* y, int64_t y_stride, Mxfp4GroupedAlgorithm a,
                cudaStream_t stream = nullptr) {
  return kernels::mxfp4_grouped_bf16_to_f32(w, r, x, x_stride, x_rows, y, y_stride, stream, a);
}
cudaError_t run(const kernels::Mxfp4ExpertWeights& w, const kernels::ExpertRouting& r, const __nv_bfloat16* x,
                int64_t x_stride, int64_t x_rows, __nv_bfloat16* y, int64_t y_stride, Mxfp4GroupedAlgorithm a,
                cudaStream_t stream = nullptr) {
  return kernels::mxfp4_grouped_bf16_to_bf16(w, r, x, x_stride, x_rows, y, y_stride, stream, a);
}

ref::Matrix download(const DeviceBuffer<float>& y, int64_t rows, int64_t stride) {
  return from_f32(y.download(), rows, stride);
}
ref::Matrix download(const DeviceBuffer<__nv_bfloat16>& y, int64_t rows, int64_t stride) {
  return from_bf16(y.download(), rows, stride);
}

const char* name(Mxfp4GroupedAlgorithm a) {
  switch (a) {
    case Mxfp4GroupedAlgorithm::gemv: return "gemv";
    case Mxfp4GroupedAlgorithm::gemm_pipelined: return "gemm_pipelined";
    case Mxfp4GroupedAlgorithm::automatic: return "automatic";
  }
  return "?";
}

constexpr Mxfp4GroupedAlgorithm kAlgorithms[] = {Mxfp4GroupedAlgorithm::gemv, Mxfp4GroupedAlgorithm::gemm_pipelined,
                                                 Mxfp4GroupedAlgorithm::automatic};

// What a reference case runs: every algorithm on the checkpoint's layout, and where the shape allows the tiled layout,
// the GEMV, the pipelined GEMM and the automatic choice on a tiled copy (kept in `tiled`).
std::vector<std::pair<const DeviceBank*, Mxfp4GroupedAlgorithm>> layout_runs(const ExpertBank& bank,
                                                                            const DeviceBank& canonical,
                                                                            std::unique_ptr<DeviceBank>& tiled) {
  std::vector<std::pair<const DeviceBank*, Mxfp4GroupedAlgorithm>> runs;
  for (const Mxfp4GroupedAlgorithm a : kAlgorithms) runs.emplace_back(&canonical, a);
  if (kernels::mxfp4_tiled_supported(bank.out, bank.in)) {
    tiled = std::make_unique<DeviceBank>(tiled_bank(bank));
    for (const Mxfp4GroupedAlgorithm a :
         {Mxfp4GroupedAlgorithm::gemv, Mxfp4GroupedAlgorithm::gemm_pipelined, Mxfp4GroupedAlgorithm::automatic})
      runs.emplace_back(tiled.get(), a);
  }
  return runs;
}

// Runs every algorithm with output type OutT on poisoned y (row stride out + 5) and checks the
// normalised error and that the padding columns stayed poisoned.
template <typename OutT>
void expect_matches(const ExpertBank& bank, const HostRouting& routing, const ref::Matrix& x, int64_t x_stride,
                    const std::string& label) {
  const ref::MatrixD expected = reference(bank, routing, x);
  ASSERT_TRUE(expected.allFinite()) << label;
  K3_REQUIRE_GPU();
  DeviceBank dbank(bank);
  DeviceRouting droute(routing);
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
  const int64_t y_stride = bank.out + 5, rows = routing.slots();
  std::unique_ptr<DeviceBank> tiled;
  for (const auto& [device_bank, a] : layout_runs(bank, dbank, tiled)) {
    const std::string run_label = label + " " + name(a) + (device_bank == &dbank ? "" : " tiled");
    DeviceBuffer<OutT> dy(size_t(rows * y_stride));
    CUDA_CHECK(run(device_bank->view, droute.view(bank.experts), dx.get(), x_stride, x.rows(), dy.get(), y_stride, a));
    const ref::Matrix got = download(dy, rows, y_stride);
    EXPECT_LE(normalized_error(got.leftCols(bank.out), expected.cast<float>()), tolerance_for<OutT>()) << run_label;
    EXPECT_TRUE(got.rightCols(5).array().isNaN().all()) << run_label << ": a padding column was written";
  }
}

// Both output types: `label` f32, then `label` bf16.
void expect_matches_f32_and_bf16(const ExpertBank& bank, const HostRouting& routing, const ref::Matrix& x,
                                 int64_t x_stride, const std::string& label) {
  expect_matches<float>(bank, routing, x, x_stride, label + " f32");
  expect_matches<__nv_bfloat16>(bank, routing, x, x_stride, label + " bf16");
}

// The dequantised path on the same case: x gathered into slot order on the host, y (row stride out + 4) poisoned.
void expect_dequantized_matches(const ExpertBank& bank, const HostRouting& routing, const ref::Matrix& x,
                                int64_t x_stride, const std::string& label) {
  const ref::MatrixD expected = reference(bank, routing, x);
  ASSERT_TRUE(expected.allFinite()) << label;
  K3_REQUIRE_GPU();
  ref::Matrix by_slot(routing.slots(), x_stride);
  for (int s = 0; s < routing.slots(); ++s) by_slot.row(s) = x.row(routing.slot_token[size_t(s)]);
  DeviceBank dbank(bank);
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(by_slot));
  DeviceBuffer<__nv_bfloat16> scratch(size_t(bank.out * bank.in));
  const int64_t y_stride = bank.out + 4, rows = routing.slots();
  DeviceBuffer<float> dy(size_t(rows * y_stride));
  runtime::GemmRunner gemm;
  ASSERT_EQ(kernels::mxfp4_grouped_dequantized_bf16_to_f32(gemm, dbank.view, routing.offsets.data(), dx.get(),
                                                           x_stride, dy.get(), y_stride, scratch.get(),
                                                           int64_t(scratch.size()), nullptr),
            cudaSuccess)
      << label << ": " << gemm.last_error();
  const ref::Matrix got = download(dy, rows, y_stride);
  EXPECT_LE(normalized_error(got.leftCols(bank.out), expected.cast<float>()), kF32Tolerance) << label << " dequantized";
  EXPECT_TRUE(got.rightCols(4).array().isNaN().all()) << label << " dequantized: a padding column was written";
  if (kernels::mxfp4_tiled_supported(bank.out, bank.in)) {  // the same on the tiled layout
    DeviceBank tiled(tiled_bank(bank));
    DeviceBuffer<float> dy_tiled(size_t(rows * y_stride));
    ASSERT_EQ(kernels::mxfp4_grouped_dequantized_bf16_to_f32(gemm, tiled.view, routing.offsets.data(), dx.get(),
                                                             x_stride, dy_tiled.get(), y_stride, scratch.get(),
                                                             int64_t(scratch.size()), nullptr),
              cudaSuccess)
        << label << " tiled: " << gemm.last_error();
    EXPECT_EQ(download(dy_tiled, rows, y_stride).leftCols(bank.out), got.leftCols(bank.out))
        << label << " dequantized from the tiled layout: not the same products";
  }
}

TEST(GpuMxfp4Grouped, BucketingContractOfTheTestRouting) {
  // Tokens 0..2 choose experts (4, 1), (1, 2), (4, 0) of 5.
  const HostRouting r = bucket({{0, 4}, {0, 1}, {1, 1}, {1, 2}, {2, 4}, {2, 0}}, 5);
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 1, 3, 4, 4, 6}));
  EXPECT_EQ(r.slot_token, (std::vector<int32_t>{2, 0, 1, 1, 0, 2}));
  EXPECT_EQ(r.active, (std::vector<int32_t>{0, 1, 2, 4, -1}));
  EXPECT_EQ(r.active_count, 4);
}

TEST(GpuMxfp4Grouped, MatchesFp64ReferenceAtOddSizes) {
  std::mt19937 rng(20261210);
  const ExpertBank bank = random_bank(7, 48, 96, rng);
  struct Case {
    std::string label;
    std::vector<int> counts;  // slots per expert
  };
  const Case cases[] = {
      {"expert 3 and 6 empty", {2, 1, 3, 0, 1, 2, 0}},
      {"one expert holds all slots", {0, 0, 0, 0, 0, 40, 0}},
      {"1..300 slots per expert", {1, 300, 0, 17, 8, 9, 64}},
  };
  for (const Case& c : cases) {
    const int x_rows = 300, x_stride = 96 + 16;
    const HostRouting routing = routing_with_counts(c.counts, x_rows, rng);
    const ref::Matrix x = round_to_bf16(random_matrix(x_rows, x_stride, rng));
    expect_matches_f32_and_bf16(bank, routing, x, x_stride, c.label);
    expect_dequantized_matches(bank, routing, x, x_stride, c.label);
  }
}

// in = 37 blocks of 32: five k-steps of 8 blocks for the GEMV (the last one partial), and 20 slots of one
// expert make three passes over them.
TEST(GpuMxfp4Grouped, MatchesFp64ReferenceOverSeveralKSteps) {
  std::mt19937 rng(20261215);
  const int64_t in = 37 * 32;
  const ExpertBank bank = random_bank(3, 80, in, rng);
  const int x_rows = 40, x_stride = int(in) + 8;
  const HostRouting routing = routing_with_counts({9, 0, 20}, x_rows, rng);
  const ref::Matrix x = round_to_bf16(random_matrix(x_rows, x_stride, rng));
  expect_matches_f32_and_bf16(bank, routing, x, x_stride, "80x1184");
}

TEST(GpuMxfp4Grouped, MatchesFp64ReferenceAtK3ExpertShape) {
  std::mt19937 rng(20261211);
  const ExpertBank bank = random_bank(2, 3072, 3584, rng);
  const HostRouting routing = routing_with_counts({3, 70}, 80, rng);
  const ref::Matrix x = round_to_bf16(random_matrix(80, 3584, rng));
  expect_matches_f32_and_bf16(bank, routing, x, 3584, "3072x3584");
  expect_dequantized_matches(bank, routing, x, 3584, "3072x3584");
}

// A prefill-like routing: each token chooses top_k distinct experts with odds 1 / (1 + e), so at 512 tokens and 4 of
// 16 the experts hold from a few dozen to several hundred slots (full and partial 64- and 128-slot tiles, several per
// expert).
HostRouting prefill_routing(int experts, int tokens, int top_k, std::mt19937& rng) {
  std::vector<double> odds;
  for (int e = 0; e < experts; ++e) odds.push_back(1.0 / (1 + e));
  std::discrete_distribution<int> pick(odds.begin(), odds.end());
  std::vector<std::pair<int, int>> pairs;
  for (int token = 0; token < tokens; ++token) {
    std::vector<int> chosen;
    while (static_cast<int>(chosen.size()) < top_k) {
      const int e = pick(rng);
      if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
    }
    for (const int e : chosen) pairs.emplace_back(token, e);
  }
  return bucket(pairs, experts);
}

// That routing with out = 400 (a 16-row last tile of 128 rows) and in = 1056 (33 blocks: a half-filled last
// 64-element k-step).
TEST(GpuMxfp4Grouped, MatchesFp64ReferenceAtAPrefillShape) {
  std::mt19937 rng(20261216);
  constexpr int kExperts = 16, kTokens = 512, kTopK = 4;
  const ExpertBank bank = random_bank(kExperts, 400, 1056, rng);
  const HostRouting routing = prefill_routing(kExperts, kTokens, kTopK, rng);
  int most = 0, fewest = kTokens;
  for (int e = 0; e < kExperts; ++e) {
    most = std::max(most, routing.offsets[size_t(e + 1)] - routing.offsets[size_t(e)]);
    fewest = std::min(fewest, routing.offsets[size_t(e + 1)] - routing.offsets[size_t(e)]);
  }
  ASSERT_GT(most, 256);   // three or more 128-slot tiles
  ASSERT_LT(fewest, 120);  // a single partial one
  const int x_stride = 1056 + 24;
  const ref::Matrix x = round_to_bf16(random_matrix(kTokens, x_stride, rng));
  expect_matches_f32_and_bf16(bank, routing, x, x_stride, "prefill 400x1056");
  expect_dequantized_matches(bank, routing, x, x_stride, "prefill 400x1056");
}

// Every nibble at scales 2^-125..2^125 (bytes on both sides of 128), x one-hot: y is W itself, exactly. in = 96
// (3 blocks: only the GEMV's checked last k-group), 544 (17 blocks: two whole groups of 8, then one more) and 768
// (24 blocks: whole groups only; also the tiled layout's GEMV).
class GpuMxfp4GroupedExact : public ::testing::TestWithParam<int64_t> {};

TEST_P(GpuMxfp4GroupedExact, DequantisesEveryCodeExactly) {
  const uint8_t scale_bytes[] = {2, 3, 64, 120, 126, 127, 128, 129, 130, 200, 252};
  ExpertBank bank{2, 48, GetParam(), {}, {}, {}};
  for (int e = 0; e < bank.experts; ++e) {
    for (int64_t o = 0; o < bank.out; ++o) {
      for (int64_t i = 0; i < bank.in; i += 2) {
        const auto nibble = [&](int64_t k) { return static_cast<uint8_t>((k + o + 3 * e) % 16); };
        bank.packed.push_back(static_cast<uint8_t>(nibble(i) | (nibble(i + 1) << 4)));
      }
      for (int64_t b = 0; b < bank.in / 32; ++b) {
        bank.scales.push_back(scale_bytes[size_t((e * bank.out * 3 + o * 3 + b) % std::size(scale_bytes))]);
      }
    }
  }
  decode_bank(bank);
  std::vector<std::pair<int, int>> pairs;
  for (int token = 0; token < bank.in; ++token) pairs.insert(pairs.end(), {{token, 0}, {token, 1}});
  const HostRouting routing = bucket(pairs, bank.experts);
  const ref::Matrix x = ref::Matrix::Identity(bank.in, bank.in);
  const ref::MatrixD expected = reference(bank, routing, x);
  ASSERT_TRUE(expected.allFinite());
  K3_REQUIRE_GPU();
  DeviceBank dbank(bank);
  DeviceRouting droute(routing);
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
  std::unique_ptr<DeviceBank> tiled;
  for (const auto& [device_bank, a] : layout_runs(bank, dbank, tiled)) {
    const std::string label = std::string(name(a)) + (device_bank == &dbank ? "" : " tiled");
    DeviceBuffer<float> dy(size_t(routing.slots() * bank.out));
    DeviceBuffer<__nv_bfloat16> dy16(size_t(routing.slots() * bank.out));
    CUDA_CHECK(run(device_bank->view, droute.view(bank.experts), dx.get(), bank.in, bank.in, dy.get(), bank.out, a));
    CUDA_CHECK(run(device_bank->view, droute.view(bank.experts), dx.get(), bank.in, bank.in, dy16.get(), bank.out, a));
    const ref::Matrix got = download(dy, routing.slots(), bank.out);
    const ref::Matrix got16 = download(dy16, routing.slots(), bank.out);
    int mismatches = 0;
    for (int s = 0; s < routing.slots(); ++s) {
      for (int64_t o = 0; o < bank.out; ++o) {
        const auto want = static_cast<float>(expected(s, o));
        if (got(s, o) != want || got16(s, o) != want) {
          if (++mismatches <= 5) {
            ADD_FAILURE() << label << " slot " << s << " row " << o << ": " << got(s, o) << " / " << got16(s, o)
                          << ", expected " << want;
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << label;
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, GpuMxfp4GroupedExact, ::testing::Values(int64_t{96}, int64_t{544}, int64_t{768}));

// A NaN scale (0xFF) makes its row NaN for that expert's slots only; a slot whose token is outside x
// gets NaN in every column. in = 96 (3 blocks: only the GEMV's checked last k-group), 288 (9 blocks: a whole
// k-group of 8, then one more) and 320 (10 blocks: also the tiled GEMV, a group of 4 block pairs and one pair); the
// bound on the other entries is 1e-5 relative plus fp32 summation's, in · 2^-23 · Σ |w · x| (the pipelined GEMM's
// order exceeded 1e-5 · in / 96 at in = 320: 4.6e-5 against 4.2e-5 on a sum of 0.25).
class GpuMxfp4GroupedNan : public ::testing::TestWithParam<int64_t> {};

TEST_P(GpuMxfp4GroupedNan, NanScalePoisonsOnlyItsRowAndInvalidTokensTheirSlot) {
  const int64_t in = GetParam(), blocks = in / 32;
  std::mt19937 rng(20261212);
  ExpertBank bank = random_bank(3, 48, in, rng);
  const int64_t poisoned_row = 5;
  bank.scales[size_t((1 * bank.out + poisoned_row) * blocks + 2)] = weights::kE8m0Nan;  // expert 1, row 5, block 2
  decode_bank(bank);
  HostRouting routing = routing_with_counts({4, 70, 9}, 100, rng);
  const int bad_slot = routing.offsets[2] + 3;  // an expert-2 slot
  const ref::Matrix x = round_to_bf16(random_matrix(100, in, rng));
  const ref::MatrixD expected = reference(bank, routing, x);
  // The fp32 sums' error bound: in · 2^-23 times the sum of the products' magnitudes (the NaN block aside).
  ExpertBank magnitudes = bank;
  for (ref::MatrixD& w : magnitudes.dequantized)
    w = w.unaryExpr([](double v) { return std::isnan(v) ? 0.0 : std::abs(v); });
  const ref::MatrixD magnitude = reference(magnitudes, routing, x.cwiseAbs());
  routing.slot_token[size_t(bad_slot)] = 100;  // x has 100 rows
  K3_REQUIRE_GPU();
  DeviceBank dbank(bank);
  DeviceRouting droute(routing);
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
  std::unique_ptr<DeviceBank> tiled;
  for (const auto& [device_bank, a] : layout_runs(bank, dbank, tiled)) {
    const std::string label = std::string(name(a)) + (device_bank == &dbank ? "" : " tiled");
    DeviceBuffer<float> dy(size_t(routing.slots() * bank.out));
    CUDA_CHECK(run(device_bank->view, droute.view(bank.experts), dx.get(), in, 100, dy.get(), bank.out, a));
    const ref::Matrix got = download(dy, routing.slots(), bank.out);
    for (int s = 0; s < routing.slots(); ++s) {
      const bool expert1 = s >= routing.offsets[1] && s < routing.offsets[2];
      for (int64_t o = 0; o < bank.out; ++o) {
        if (s == bad_slot || (expert1 && o == poisoned_row)) {
          EXPECT_TRUE(std::isnan(got(s, o))) << label << " slot " << s << " row " << o;
        } else {
          const double bound = 1e-5 * (1.0 + std::abs(expected(s, o))) + double(in) * 0x1p-23 * magnitude(s, o);
          EXPECT_NEAR(got(s, o), expected(s, o), bound) << label << " slot " << s << " row " << o;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, GpuMxfp4GroupedNan, ::testing::Values(int64_t{96}, int64_t{288}, int64_t{320}));

// The launch depends only on the host bounds: a graph captured with one routing replays another.
TEST(GpuMxfp4Grouped, GraphReplaysANewRouting) {
  std::mt19937 rng(20261213);
  const ExpertBank bank = random_bank(7, 48, 96, rng);
  const HostRouting first = routing_with_counts({5, 0, 3, 4, 0, 0, 0}, 20, rng);
  const HostRouting second = routing_with_counts({0, 1, 0, 2, 6, 1, 2}, 20, rng);  // same 12 slots
  const ref::Matrix x = round_to_bf16(random_matrix(20, 96, rng));
  const ref::MatrixD expected = reference(bank, second, x);
  K3_REQUIRE_GPU();
  DeviceBank dbank(bank);
  DeviceRouting droute(first);
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
  for (const Mxfp4GroupedAlgorithm a : {Mxfp4GroupedAlgorithm::gemv, Mxfp4GroupedAlgorithm::gemm_pipelined}) {
    droute.upload(first);
    DeviceBuffer<float> dy(size_t(second.slots() * bank.out));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(run(dbank.view, droute.view(bank.experts), dx.get(), 96, 20, dy.get(), bank.out, a, stream));
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    droute.upload(second);
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const ref::Matrix got = download(dy, second.slots(), bank.out);
    EXPECT_LE(normalized_error(got, expected.cast<float>()), kF32Tolerance) << name(a);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

// The GEMV at decode, the pipelined GEMM at prefill.
TEST(GpuMxfp4Grouped, ChoosesGemvAtDecodeAndGemmAtPrefill) {
  alignas(16) static uint8_t packed[16], scales[32];
  const kernels::Mxfp4ExpertWeights k3_w1{packed, scales, 896, 3072, 3584};
  const auto bounds = [](int tokens) {
    return kernels::ExpertRouting{nullptr, nullptr, nullptr, nullptr, tokens * 16, std::min(tokens * 16, 896)};
  };
  for (const int tokens : {1, 8, 16, 64, 256}) {
    EXPECT_EQ(kernels::mxfp4_grouped_algorithm(k3_w1, bounds(tokens)), Mxfp4GroupedAlgorithm::gemv) << tokens;
  }
  for (const int tokens : {512, 8192}) {
    EXPECT_EQ(kernels::mxfp4_grouped_algorithm(k3_w1, bounds(tokens)), Mxfp4GroupedAlgorithm::gemm_pipelined) << tokens;
  }
}

// Argument checks happen on the host before any launch, so they run without a GPU too.
TEST(GpuMxfp4Grouped, RejectsBadArguments) {
  alignas(16) static uint8_t packed[4096], scales[256];
  alignas(16) static __nv_bfloat16 x[1024];
  alignas(16) static float y[1024];
  static int32_t offsets[3], slot_token[4], active[2], count[1];
  const kernels::Mxfp4ExpertWeights good_w{packed, scales, 2, 16, 64};
  const kernels::ExpertRouting good_r{offsets, slot_token, active, count, 4, 2};
  const auto call = [&](kernels::Mxfp4ExpertWeights w, kernels::ExpertRouting r, const __nv_bfloat16* xp,
                        int64_t x_stride, int64_t x_rows, int64_t y_stride,
                        Mxfp4GroupedAlgorithm a = Mxfp4GroupedAlgorithm::automatic) {
    return kernels::mxfp4_grouped_bf16_to_f32(w, r, xp, x_stride, x_rows, y, y_stride, nullptr, a);
  };
  auto w = good_w;
  w.in_features = 48;  // not a multiple of 32
  EXPECT_EQ(call(w, good_r, x, 64, 4, 16), cudaErrorInvalidValue);
  w = good_w;
  w.out_features = 24;  // not a multiple of 16
  EXPECT_EQ(call(w, good_r, x, 64, 4, 24), cudaErrorInvalidValue);
  w = good_w;
  w.packed = packed + 1;  // not 16-byte aligned
  EXPECT_EQ(call(w, good_r, x, 64, 4, 16), cudaErrorInvalidValue);
  w = good_w;
  w.experts = 0;
  EXPECT_EQ(call(w, good_r, x, 64, 4, 16), cudaErrorInvalidValue);
  w = good_w;
  w.scales = nullptr;
  EXPECT_EQ(call(w, good_r, x, 64, 4, 16), cudaErrorInvalidValue);
  auto r = good_r;
  r.slot_token = nullptr;
  EXPECT_EQ(call(good_w, r, x, 64, 4, 16), cudaErrorInvalidValue);
  r = good_r;
  r.max_slots = -1;
  EXPECT_EQ(call(good_w, r, x, 64, 4, 16), cudaErrorInvalidValue);
  EXPECT_EQ(call(good_w, good_r, x + 1, 64, 4, 16), cudaErrorInvalidValue);  // x not 16-byte aligned
  EXPECT_EQ(call(good_w, good_r, x, 56, 4, 16), cudaErrorInvalidValue);      // x stride below in
  EXPECT_EQ(call(good_w, good_r, x, 68, 4, 16), cudaErrorInvalidValue);      // x stride not a multiple of 8
  EXPECT_EQ(call(good_w, good_r, x, 64, 0, 16), cudaErrorInvalidValue);      // no x rows
  EXPECT_EQ(call(good_w, good_r, x, 64, 4, 15), cudaErrorInvalidValue);      // y stride below out
  EXPECT_EQ(call(good_w, good_r, nullptr, 64, 4, 16), cudaErrorInvalidValue);
  // Not an enumerator.
  EXPECT_EQ(call(good_w, good_r, x, 64, 4, 16, static_cast<Mxfp4GroupedAlgorithm>(99)), cudaErrorInvalidValue);
  EXPECT_EQ(call(good_w, good_r, x, 64, 4, 16, static_cast<Mxfp4GroupedAlgorithm>(-1)), cudaErrorInvalidValue);
  r = good_r;
  r.max_slots = 2 * kernels::kMxfp4GroupedGemmMaxActiveExperts + 2;
  r.max_active_experts = kernels::kMxfp4GroupedGemmMaxActiveExperts + 1;  // the GEMM's prefix would not fit
  w = good_w;
  w.experts = kernels::kMxfp4GroupedGemmMaxActiveExperts + 1;
  EXPECT_EQ(call(w, r, x, 64, 4, 16, Mxfp4GroupedAlgorithm::gemm_pipelined), cudaErrorInvalidValue);
  r = good_r;
  r.max_slots = 0;  // nothing routed: nothing to do, for every algorithm
  for (const Mxfp4GroupedAlgorithm a : kAlgorithms) {
    EXPECT_EQ(call(good_w, r, nullptr, 0, 0, 0, a), cudaSuccess) << name(a);
  }
}

// The bf16 decode of every expert against the CPU's, bit for bit: random blocks, all 16 codes in one row, and scale
// bytes 0, 1, 254 (6 · 2^127 overflows to ±Inf) and 0xFF (NaN); out 40 rows (not a multiple of 16), in 17 blocks,
// out row stride in + 8 with the padding left poisoned.
TEST(GpuMxfp4Dequantized, DecodesEachExpertBitForBit) {
  std::mt19937 rng(20261217);
  ExpertBank bank = random_bank(3, 40, 544, rng);
  const int64_t blocks = bank.in / 32, n = bank.out * bank.in;
  for (int code = 0; code < 16; ++code) {  // expert 1, row 2: codes 0..15 twice
    const auto byte = static_cast<uint8_t>(code | (((code + 5) % 16) << 4));
    bank.packed[size_t(n / 2 + 2 * bank.in / 2 + code)] = byte;
  }
  const std::pair<int64_t, uint8_t> scale_cases[] = {{0, 0}, {1, 1}, {blocks + 3, 254}, {n / 32 + 2 * blocks, 254},
                                                     {n / 32 + 2 * blocks + 1, weights::kE8m0Nan},
                                                     {2 * n / 32 + 5, weights::kE8m0Nan}};
  for (const auto& [index, byte] : scale_cases) bank.scales[size_t(index)] = byte;
  decode_bank(bank);
  K3_REQUIRE_GPU();
  DeviceBank dbank(bank);
  const int64_t stride = bank.in + 8;
  int infinities = 0, nans = 0;
  for (int e = 0; e < bank.experts; ++e) {
    DeviceBuffer<__nv_bfloat16> out(size_t(bank.out * stride));
    CUDA_CHECK(kernels::mxfp4_dequantize_expert_bf16(dbank.view, e, out.get(), stride, nullptr));
    const std::vector<__nv_bfloat16> got = out.download();
    int mismatches = 0;
    for (int64_t o = 0; o < bank.out; ++o) {
      for (int64_t i = 0; i < stride; ++i) {
        const float value = __bfloat162float(got[size_t(o * stride + i)]);
        if (i >= bank.in) {
          if (!std::isnan(value))
            ADD_FAILURE() << "expert " << e << " row " << o << ": padding column " << i << " written";
          continue;
        }
        const auto want = static_cast<float>(bank.dequantized[size_t(e)](o, i));
        infinities += std::isinf(want) ? 1 : 0;
        nans += std::isnan(want) ? 1 : 0;
        const bool same = std::isnan(want) ? std::isnan(value) : value == want;
        if (!same && ++mismatches <= 5) {
          ADD_FAILURE() << "expert " << e << " row " << o << " column " << i << ": " << value << ", expected " << want;
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << "expert " << e;
  }
  EXPECT_GT(infinities, 0);  // the cases above reached the overflow and the NaN scale
  EXPECT_EQ(nans, 2 * 32);  // the two NaN-scale blocks
}

TEST(GpuMxfp4Dequantized, RejectsBadArguments) {
  alignas(16) static uint8_t packed[4096], scales[256];
  alignas(16) static __nv_bfloat16 out[4096];
  const kernels::Mxfp4ExpertWeights w{packed, scales, 2, 16, 64};
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, 2, out, 64, nullptr), cudaErrorInvalidValue);   // no expert 2
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, -1, out, 64, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, 0, out, 60, nullptr), cudaErrorInvalidValue);   // stride < in
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, 0, out, 68, nullptr), cudaErrorInvalidValue);   // not 8k
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(w, 0, out + 1, 64, nullptr), cudaErrorInvalidValue);
  auto bad = w;
  bad.in_features = 48;
  EXPECT_EQ(kernels::mxfp4_dequantize_expert_bf16(bad, 0, out, 64, nullptr), cudaErrorInvalidValue);
  K3_REQUIRE_GPU();  // the grouped path's runner needs a device
  runtime::GemmRunner gemm;
  alignas(16) static __nv_bfloat16 x[4096], scratch[4096];
  alignas(16) static float y[4096];
  const int32_t offsets[3] = {0, 2, 5}, decreasing[3] = {0, 3, 2};
  const auto call = [&](const kernels::Mxfp4ExpertWeights& ww, const int32_t* off, int64_t x_stride, int64_t y_stride,
                        int64_t scratch_elements) {
    return kernels::mxfp4_grouped_dequantized_bf16_to_f32(gemm, ww, off, x, x_stride, y, y_stride, scratch,
                                                          scratch_elements, nullptr);
  };
  EXPECT_EQ(call(w, decreasing, 64, 16, 1024), cudaErrorInvalidValue);
  EXPECT_EQ(call(w, nullptr, 64, 16, 1024), cudaErrorInvalidValue);
  EXPECT_EQ(call(w, offsets, 64, 16, 1023), cudaErrorInvalidValue);  // scratch below out · in
  EXPECT_EQ(call(w, offsets, 60, 16, 1024), cudaErrorInvalidValue);
  EXPECT_EQ(call(w, offsets, 64, 14, 1024), cudaErrorInvalidValue);
  bad = w;
  bad.out_features = 12;  // not a multiple of 8
  EXPECT_EQ(call(bad, offsets, 64, 16, 1024), cudaErrorInvalidValue);
  const int32_t none[3] = {0, 0, 0};  // nothing routed: nothing to do
  EXPECT_EQ(call(w, none, 64, 16, 1024), cudaSuccess);
}

// ---- The tiled layout (kernels/mxfp4_tiled.h) ----------------------------------------------------------------
// Its decode table: each output's pieces give exactly the 8 bits of a bf16 pair (sign, e1, e0, m of both halves)
// once, and the pieces' sources, over the 8 outputs, are the 64 bits of a lane's block once each.
TEST(Mxfp4Tiled, DecodeTableTakesEveryBitOnce) {
  std::vector<int> taken(64, 0);
  for (int o = 0; o < 8; ++o) {
    uint32_t covered = 0;
    for (const kernels::TiledPiece& piece : kernels::kTiledOutputs[o].piece) {
      EXPECT_EQ(covered & piece.mask, 0u) << "output " << o << ": pieces overlap";
      covered |= piece.mask;
      for (int i = 0; i < 32; ++i)
        if (piece.mask >> i & 1u) ++taken[size_t((i + piece.rotation) % 64)];
    }
    EXPECT_EQ(covered, kernels::kTiledAllBits) << "output " << o;
  }
  for (int b = 0; b < 64; ++b) EXPECT_EQ(taken[size_t(b)], 1) << "source bit " << b;
}

// The host repack, decoded the way the tiled GEMV decodes it (the pieces, then the bf16 bits as v · 2^-126 times
// 2^(scale − 127)), gives every weight of the checkpoint's decode, at its row and element.
TEST(Mxfp4Tiled, RepackDecodesToTheCheckpointWeights) {
  std::mt19937 rng(20261218);
  const ExpertBank bank = random_bank(2, 32, 192, rng);
  const ExpertBank tiled = tiled_bank(bank);
  const int64_t pairs = bank.in / 64, per_expert = bank.out * bank.in / 2, scales_per_expert = bank.out * bank.in / 32;
  const auto rotate = [](uint32_t w0, uint32_t w1, int r) {
    const uint64_t v = uint64_t(w1) << 32 | w0;
    return uint32_t(r == 0 ? v : (v >> r | v << (64 - r)));
  };
  int64_t checked = 0, mismatches = 0;
  for (int e = 0; e < bank.experts; ++e)
    for (int64_t tile = 0; tile < bank.out / 16; ++tile)
      for (int64_t pair = 0; pair < pairs; ++pair)
        for (int lane = 0; lane < 32; ++lane)
          for (int b = 0; b < 2; ++b) {
            const int g = lane / 4, t = lane % 4;
            const int64_t unit = tile * pairs + pair, block = 2 * pair + b;
            const uint8_t* bytes = tiled.packed.data() + e * per_expert + unit * 512 + lane * 16 + 8 * b;
            const uint8_t* scale = tiled.scales.data() + e * scales_per_expert + unit * 32 + 4 * g;
            uint32_t w[2] = {0, 0};
            for (int k = 0; k < 8; ++k) w[k / 4] |= uint32_t(bytes[k]) << (8 * (k % 4));
            for (int o = 0; o < 8; ++o) {
              uint32_t bits = 0;
              for (const kernels::TiledPiece& piece : kernels::kTiledOutputs[o].piece)
                bits |= rotate(w[0], w[1], piece.rotation) & piece.mask;
              const int64_t row = tile * 16 + g + (o >= 4 ? 8 : 0);
              const int scale_byte = scale[(o >= 4 ? 2 : 0) + b];
              for (int half = 0; half < 2; ++half) {
                const uint32_t f32 = (half == 0 ? bits & 0xFFFFu : bits >> 16) << 16;
                float v = 0.0f;
                std::memcpy(&v, &f32, 4);
                const double got = std::ldexp(double(v), 126 + scale_byte - 127);
                const int64_t column = block * 32 + 8 * t + 2 * (o % 4) + half;
                const double want = bank.dequantized[size_t(e)](row, column);
                ++checked;
                if (got != want && ++mismatches <= 5)
                  ADD_FAILURE() << "expert " << e << " row " << row << " column " << column << ": " << got
                                << ", expected " << want;
              }
            }
          }
  EXPECT_EQ(checked, bank.experts * bank.out * bank.in);
  EXPECT_EQ(mismatches, 0);
}

// The tiled layout's bf16 decode (the dequantised prefill path) against the CPU's, bit for bit, with scale bytes 254
// (6 · 2^127 overflows to ±Inf) and 0xFF (NaN) among random ones; out row stride in + 8, the padding poisoned.
TEST(GpuMxfp4Tiled, DequantisesEachExpertBitForBit) {
  std::mt19937 rng(20261221);
  ExpertBank bank = random_bank(2, 32, 448, rng);
  const int64_t blocks = bank.in / 32;
  bank.scales[size_t(3 * blocks + 5)] = 254;
  bank.scales[size_t(bank.out * blocks + 17 * blocks + 2)] = weights::kE8m0Nan;
  decode_bank(bank);
  const ExpertBank tiled = tiled_bank(bank);
  K3_REQUIRE_GPU();
  DeviceBank dbank(tiled);
  const int64_t stride = bank.in + 8;
  for (int e = 0; e < bank.experts; ++e) {
    DeviceBuffer<__nv_bfloat16> out(size_t(bank.out * stride));
    CUDA_CHECK(kernels::mxfp4_dequantize_expert_bf16(dbank.view, e, out.get(), stride, nullptr));
    const std::vector<__nv_bfloat16> got = out.download();
    int mismatches = 0;
    for (int64_t o = 0; o < bank.out; ++o)
      for (int64_t i = 0; i < stride; ++i) {
        const float value = __bfloat162float(got[size_t(o * stride + i)]);
        const bool same = i >= bank.in ? std::isnan(value)
                                       : [&] {
                                           const auto want = static_cast<float>(bank.dequantized[size_t(e)](o, i));
                                           return std::isnan(want) ? std::isnan(value) : value == want;
                                         }();
        if (!same && ++mismatches <= 5)
          ADD_FAILURE() << "expert " << e << " row " << o << " column " << i << ": " << value;
      }
    EXPECT_EQ(mismatches, 0) << "expert " << e;
  }
}

// The GEMV on the tiled layout where only it runs: one block pair (in = 64), one group of 4 pairs and one more
// (320), two groups and one more (576), with empty experts, many passes of 8 slots and one expert holding them all.
TEST(GpuMxfp4Tiled, GemvMatchesFp64Reference) {
  std::mt19937 rng(20261219);
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{48, 64}, {32, 320}, {64, 576}}) {
    const ExpertBank bank = random_bank(5, out, in, rng);
    for (const std::vector<int>& counts :
         {std::vector<int>{1, 0, 3, 1, 0}, std::vector<int>{17, 40, 0, 9, 2}, std::vector<int>{0, 0, 33, 0, 0}}) {
      const int x_rows = 64;
      const int64_t x_stride = in + 8;
      const HostRouting routing = routing_with_counts(counts, x_rows, rng);
      const ref::Matrix x = round_to_bf16(random_matrix(x_rows, x_stride, rng));
      const std::string label = std::to_string(out) + "x" + std::to_string(in) + " " + std::to_string(counts[1]);
      expect_matches_f32_and_bf16(bank, routing, x, x_stride, label);
    }
  }
}

// The block shape of the tiled GEMV: one 28-warp block per SM where the tiles fit one wave of them (w2 at T = 1 on an
// H200: 16 experts × 224 tiles ≤ 28 × 132), else 4-warp blocks (w13 at T = 1: 16 × 384; w2 at T = 8: 128 × 224).
TEST(Mxfp4Tiled, GemvTakesWholeSmBlocksWhereTheTilesFitOneWave) {
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(16, 3584, 132), 28);
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(16, 6144, 132), 4);
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(128, 3584, 132), 4);
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(132, 448, 132), 28);  // exactly 28 tiles per SM
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(132, 464, 132), 4);
  EXPECT_EQ(kernels::mxfp4_gemv_tiled_block_warps(1, 16, 0), 4);
}

// The tiled GEMV with more tiles than one wave of 28 warps per SM holds, so that it runs 4-warp blocks (the tests
// above run 28-warp blocks, one tile per block at the small shapes and blocks across expert boundaries at K3's): one
// or two slots on each of SMs experts of out = 464 (29 tiles; a partly used last block), in = 320.
TEST(GpuMxfp4Tiled, GemvMatchesFp64ReferenceBeyondOneWave) {
  K3_REQUIRE_GPU();
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ASSERT_EQ(kernels::mxfp4_gemv_tiled_block_warps(sms, 464, sms), kernels::kMxfp4GemvTiledBlockWarps);
  std::mt19937 rng(20261201);
  const ExpertBank bank = random_bank(sms, 464, 320, rng);
  std::vector<int> counts(static_cast<size_t>(sms), 0);
  for (int e = 0; e < sms; ++e) counts[size_t(e)] = 1 + e % 2;
  const int x_rows = 8;
  const int64_t x_stride = 320 + 8;
  const HostRouting routing = routing_with_counts(counts, x_rows, rng);
  const ref::Matrix x = round_to_bf16(random_matrix(x_rows, x_stride, rng));
  expect_matches_f32_and_bf16(bank, routing, x, x_stride, "464x320");
}

// The pipelined GEMM on the tiled layout at the prefill routing above: out = 400 (a 16-row last tile of 128 rows),
// in = 1024 (8 steps of 64).
TEST(GpuMxfp4Tiled, PipelinedGemmMatchesFp64ReferenceAtAPrefillShape) {
  std::mt19937 rng(20261222);
  const ExpertBank bank = random_bank(16, 400, 1024, rng);
  const HostRouting routing = prefill_routing(16, 512, 4, rng);
  const int x_stride = 1024 + 24;
  const ref::Matrix x = round_to_bf16(random_matrix(512, x_stride, rng));
  expect_matches_f32_and_bf16(bank, routing, x, x_stride, "prefill 400x1024");
}

// The device repack writes the host's bytes; shapes without the layout, aliasing buffers and the first GEMM on it are
// refused.
TEST(GpuMxfp4Tiled, DeviceRepackMatchesTheHostsAndBadUsesAreRefused) {
  alignas(16) static uint8_t packed[4096], scales[256], tiled_packed[4096], tiled_scales[256];
  EXPECT_FALSE(kernels::mxfp4_tiled_supported(24, 64));
  EXPECT_FALSE(kernels::mxfp4_tiled_supported(16, 96));
  EXPECT_TRUE(kernels::mxfp4_tiled_supported(16, 128));
  EXPECT_EQ(kernels::mxfp4_tiled_repack(packed, scales, 1, 16, 96, tiled_packed, tiled_scales, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mxfp4_tiled_repack(packed, scales, 1, 16, 64, packed, tiled_scales, nullptr),
            cudaErrorInvalidValue);  // in place
  EXPECT_EQ(kernels::mxfp4_tiled_repack(packed, scales, 0, 16, 64, tiled_packed, tiled_scales, nullptr),
            cudaErrorInvalidValue);
  std::mt19937 rng(20261220);
  const ExpertBank bank = random_bank(3, 48, 448, rng);
  const ExpertBank tiled = tiled_bank(bank);
  K3_REQUIRE_GPU();
  DeviceBank dbank(bank);
  DeviceBuffer<uint8_t> out_packed(bank.packed.size()), out_scales(bank.scales.size());
  CUDA_CHECK(kernels::mxfp4_tiled_repack(dbank.packed.get(), dbank.scales.get(), bank.experts, bank.out, bank.in,
                                         out_packed.get(), out_scales.get(), nullptr));
  EXPECT_EQ(out_packed.download(), tiled.packed);
  EXPECT_EQ(out_scales.download(), tiled.scales);
}

}  // namespace
}  // namespace k3::gpu_test
