// MXFP4 grouped routed-expert products (kernels/mxfp4_grouped.h) against the CPU: random normal weights quantised
// with weights::mxfp4_quantize and decoded with weights::mxfp4_dequantize, y = x Wᵀ per slot in fp64, with the
// routing built on the CPU in the device bucketing's contract. Every Mxfp4GroupedAlgorithm on both layouts (the
// checkpoint's and the tiled one, where the shape allows it) and the dequantise-then-cuBLASLt path, on odd sizes,
// K3's expert shape, empty experts, one expert holding every slot, 1..300 slots per expert, prefill-like routings
// with partial tiles in both dimensions; every E2M1 code at scales on both sides of the two-multiply threshold; NaN
// scales and invalid tokens. Graph replays, the algorithm choice, the bf16 decodes, the tiled layout's tables and
// argument rejection: plain tests in tests/kernels/mxfp4_gpu_test.cpp.
#include "engine/runtime/gemm_cublaslt.h"
#include "engine/weights/mx_format.h"
#include "kernels/mxfp4_grouped_dequantized.h"
#include "tests/kernels/op_cases/cases.h"
#include "tests/kernels/op_cases/mxfp4_data.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

namespace k3::gpu_test::mxfp4 {

using kernels::Mxfp4GroupedAlgorithm;

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

DeviceBank::DeviceBank(const ExpertBank& b)
    : packed(b.packed), scales(b.scales), view{packed.get(), scales.get(), b.experts, b.out, b.in, b.layout} {}

DeviceRouting::DeviceRouting(const HostRouting& h)
    : offsets(h.offsets),
      slot_token(h.slot_token),
      active(h.active),
      count(std::vector<int32_t>{h.active_count}),
      max_slots(h.slots()) {}
void DeviceRouting::upload(const HostRouting& h) {
  offsets.upload(h.offsets);
  slot_token.upload(h.slot_token);
  active.upload(h.active);
  count.upload({h.active_count});
}
kernels::ExpertRouting DeviceRouting::view(int experts) {
  return {offsets.get(), slot_token.get(), active.get(), count.get(), max_slots, std::min(max_slots, experts)};
}

cudaError_t run(const kernels::Mxfp4ExpertWeights& w, const kernels::ExpertRouting& r, const __nv_bfloat16* x,
                int64_t x_stride, int64_t x_rows, float* y, int64_t y_stride, Mxfp4GroupedAlgorithm a,
                cudaStream_t stream) {
  return kernels::mxfp4_grouped_bf16_to_f32(w, r, x, x_stride, x_rows, y, y_stride, stream, a);
}
cudaError_t run(const kernels::Mxfp4ExpertWeights& w, const kernels::ExpertRouting& r, const __nv_bfloat16* x,
                int64_t x_stride, int64_t x_rows, __nv_bfloat16* y, int64_t y_stride, Mxfp4GroupedAlgorithm a,
                cudaStream_t stream) {
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
    case Mxfp4GroupedAlgorithm::gemm_wgmma: return "gemm_wgmma";
    case Mxfp4GroupedAlgorithm::automatic: return "automatic";
  }
  return "?";
}

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

// The bank on the device in the checkpoint's layout (labelled "") and, where the shape allows it, the tiled one
// ("tiled, ").
std::vector<std::pair<std::string, std::unique_ptr<DeviceBank>>> device_layouts(const ExpertBank& bank) {
  std::vector<std::pair<std::string, std::unique_ptr<DeviceBank>>> out;
  out.emplace_back("", std::make_unique<DeviceBank>(bank));
  if (kernels::mxfp4_tiled_supported(bank.out, bank.in)) {
    out.emplace_back("tiled, ", std::make_unique<DeviceBank>(tiled_bank(bank)));
  }
  return out;
}

// The wgmma GEMM reads the tiled layout on compute capability 9.0 alone (elsewhere it answers
// cudaErrorNotSupported, which check_grouped checks); the other algorithms run everywhere.
bool runs(Mxfp4GroupedAlgorithm a, const kernels::Mxfp4ExpertWeights& w) {
  return a != Mxfp4GroupedAlgorithm::gemm_wgmma || kernels::mxfp4_grouped_gemm_wgmma_supported(w);
}

void check_grouped(const ExpertBank& bank, const HostRouting& routing, const ref::Matrix& x, int64_t x_stride,
                   Mxfp4GroupedAlgorithm algorithm, Checks& gpu) {
  const ref::MatrixD expected = reference(bank, routing, x);
  DeviceRouting droute(routing);
  DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
  const int64_t y_stride = bank.out + 5, rows = routing.slots();
  for (const auto& [layout, device_bank] : device_layouts(bank)) {
    if (!runs(algorithm, device_bank->view)) {  // it must say so
      DeviceBuffer<float> dy(size_t(rows * y_stride));
      const cudaError_t status = run(device_bank->view, droute.view(bank.experts), dx.get(), x_stride, x.rows(),
                                     dy.get(), y_stride, algorithm);
      gpu.expect(status == cudaErrorNotSupported || (status == cudaSuccess && rows == 0),
                 layout + "gemm_wgmma refuses what it does not run", cudaGetErrorString(status));
      continue;
    }
    const auto one = [&](auto* tag, const char* out_name, double tolerance) {
      using OutT = std::remove_pointer_t<decltype(tag)>;
      DeviceBuffer<OutT> dy(size_t(rows * y_stride));
      CUDA_CHECK(run(device_bank->view, droute.view(bank.experts), dx.get(), x_stride, x.rows(), dy.get(), y_stride,
                     algorithm));
      const ref::Matrix got = download(dy, rows, y_stride);
      gpu.near(layout + out_name, normalized_error(got.leftCols(bank.out), expected.cast<float>()), tolerance);
      gpu.expect(got.rightCols(5).array().isNaN().all(), layout + out_name + ": padding columns left poisoned");
    };
    one(static_cast<float*>(nullptr), "f32 out", tolerance_for<float>());
    one(static_cast<__nv_bfloat16*>(nullptr), "bf16 out", tolerance_for<__nv_bfloat16>());
  }
}

}  // namespace k3::gpu_test::mxfp4

namespace k3::gpu_test {
namespace {

using namespace mxfp4;
using kernels::Mxfp4GroupedAlgorithm;

// The dequantise-then-cuBLASLt prefill path (kernels/mxfp4_grouped_dequantized.h), its variant of the case below.
constexpr int kDequantized = 100;

std::vector<Variant> grouped_algorithms() {
  return {
      variant(Mxfp4GroupedAlgorithm::gemv, "gemv"), variant(Mxfp4GroupedAlgorithm::gemm_pipelined, "gemm_pipelined"),
      variant(Mxfp4GroupedAlgorithm::gemm_wgmma, "gemm_wgmma"), variant(Mxfp4GroupedAlgorithm::automatic, "automatic")};
}

// The routings of the reference case's "routing" dimension: slots per expert, or (empty) the prefill routing of
// x_rows tokens choosing 4 experts each.
const std::vector<int> kRoutings[] = {
    {2, 1, 3, 0, 1, 2, 0},      // experts 3 and 6 empty
    {0, 0, 0, 0, 0, 40, 0},     // one expert holds all slots
    {1, 300, 0, 17, 8, 9, 64},  // 1..300 slots per expert
    {9, 0, 20},                 // 20 slots of one expert: three passes of the GEMV
    {3, 70},                    // K3's expert shape
    {},                         // prefill
    {1, 0, 3, 1, 0},            // the tiled GEMV: empty experts,
    {17, 40, 0, 9, 2},          // many passes of 8 slots,
    {0, 0, 33, 0, 0},           // one expert holding them all
};
constexpr int kPrefillRouting = 5, kPrefillTopK = 4;

// y = x Wᵀ per slot against fp64, every algorithm on the checkpoint's layout and (where the shape allows it) the
// tiled one, f32 and bf16 out: odd sizes (in = 96: 3 blocks); in = 37 blocks of 32 (five k-steps of 8 blocks for the
// GEMV, the last partial); K3's expert shape; a prefill-like routing with out = 400 (a 16-row last tile of 128 rows)
// and in = 1056 (33 blocks: a half-filled last 64-element k-step) or 1024 (8 steps of 64, on the tiled layout too);
// the tiled GEMV where only it runs: one block pair (in = 64), one group of 4 pairs and one more (320), two groups
// and one more (576). The dequantised path on the same cases: x gathered into slot order on the host, y (row stride
// out + 4) poisoned, the tiled layout's products equal to the canonical's.
OpCase grouped_case() {
  OpCase c{"mxfp4_grouped", OpKind::moe_experts};
  // experts, out, in, x_rows, x_pad, routing
  const int dims[][6] = {
      {7, 48, 96, 300, 16, 0},   {7, 48, 96, 300, 16, 1},     {7, 48, 96, 300, 16, 2}, {3, 80, 1184, 40, 8, 3},
      {2, 3072, 3584, 80, 0, 4}, {16, 400, 1056, 512, 24, 5}, {5, 48, 64, 64, 8, 6},   {5, 48, 64, 64, 8, 7},
      {5, 48, 64, 64, 8, 8},     {5, 32, 320, 64, 8, 6},      {5, 32, 320, 64, 8, 7},  {5, 32, 320, 64, 8, 8},
      {5, 64, 576, 64, 8, 6},    {5, 64, 576, 64, 8, 7},      {5, 64, 576, 64, 8, 8},  {16, 400, 1024, 512, 24, 5}};
  for (const auto& d : dims) {
    c.shapes.push_back(
        shape({{"experts", d[0]}, {"out", d[1]}, {"in", d[2]}, {"x_rows", d[3]}, {"x_pad", d[4]}, {"routing", d[5]}}));
  }
  c.variants = grouped_algorithms();
  c.variants.push_back(Variant{"dequantized", kDequantized});
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int experts = int(s["experts"]), x_rows = int(s["x_rows"]);
    const int64_t in = s["in"], x_stride = in + s["x_pad"];
    auto bank = std::make_shared<const ExpertBank>(random_bank(experts, s["out"], in, rng));
    auto routing = std::make_shared<const HostRouting>(s["routing"] == kPrefillRouting
                                                           ? prefill_routing(experts, x_rows, kPrefillTopK, rng)
                                                           : routing_with_counts(kRoutings[s["routing"]], x_rows, rng));
    if (s["routing"] == kPrefillRouting) {
      int most = 0, fewest = x_rows;
      for (int e = 0; e < experts; ++e) {
        most = std::max(most, routing->offsets[size_t(e + 1)] - routing->offsets[size_t(e)]);
        fewest = std::min(fewest, routing->offsets[size_t(e + 1)] - routing->offsets[size_t(e)]);
      }
      cpu.expect(most > 256, "an expert with three or more 128-slot tiles");
      cpu.expect(fewest < 120, "an expert with a single partial tile");
    }
    auto x = std::make_shared<const ref::Matrix>(round_to_bf16(random_matrix(x_rows, x_stride, rng)));
    cpu.expect(reference(*bank, *routing, *x).allFinite(), "reference finite");
    return [bank, routing, x, x_stride](const Variant& v, Checks& gpu) {
      if (v.value != kDequantized) {
        check_grouped(*bank, *routing, *x, x_stride, algorithm_of<Mxfp4GroupedAlgorithm>(v), gpu);
        return;
      }
      const ref::MatrixD expected = reference(*bank, *routing, *x);
      ref::Matrix by_slot(routing->slots(), x_stride);
      for (int s = 0; s < routing->slots(); ++s) by_slot.row(s) = x->row(routing->slot_token[size_t(s)]);
      DeviceBank dbank(*bank);
      DeviceBuffer<__nv_bfloat16> dx(to_bf16(by_slot));
      DeviceBuffer<__nv_bfloat16> scratch(size_t(bank->out * bank->in));
      const int64_t y_stride = bank->out + 4, rows = routing->slots();
      DeviceBuffer<float> dy(size_t(rows * y_stride));
      runtime::GemmRunner gemm;
      const cudaError_t status = kernels::mxfp4_grouped_dequantized_bf16_to_f32(
          gemm, dbank.view, routing->offsets.data(), dx.get(), x_stride, dy.get(), y_stride, scratch.get(),
          int64_t(scratch.size()), nullptr);
      gpu.expect(status == cudaSuccess, "accepted", gemm.last_error());
      if (status != cudaSuccess) return;
      const ref::Matrix got = download(dy, rows, y_stride);
      gpu.near("y", normalized_error(got.leftCols(bank->out), expected.cast<float>()), kF32Tolerance);
      gpu.expect(got.rightCols(4).array().isNaN().all(), "padding columns left poisoned");
      if (kernels::mxfp4_tiled_supported(bank->out, bank->in)) {  // the same on the tiled layout
        DeviceBank tiled(tiled_bank(*bank));
        DeviceBuffer<float> dy_tiled(size_t(rows * y_stride));
        CUDA_CHECK(kernels::mxfp4_grouped_dequantized_bf16_to_f32(gemm, tiled.view, routing->offsets.data(), dx.get(),
                                                                  x_stride, dy_tiled.get(), y_stride, scratch.get(),
                                                                  int64_t(scratch.size()), nullptr));
        gpu.expect(download(dy_tiled, rows, y_stride).leftCols(bank->out) == got.leftCols(bank->out),
                   "the tiled layout gives the same products");
      }
    };
  };
  return c;
}

// Every nibble at scales 2^-125..2^125 (bytes on both sides of 128), x one-hot: y is W itself, exactly. in = 96
// (3 blocks: only the GEMV's checked last k-group), 544 (17 blocks: two whole groups of 8, then one more) and 768
// (24 blocks: whole groups only; also the tiled layout's GEMV).
OpCase exact_codes_case() {
  OpCase c{"mxfp4_grouped_exact_codes", OpKind::moe_experts};
  for (const int in : {96, 544, 768}) c.shapes.push_back(shape({{"in", in}}));
  c.variants = grouped_algorithms();
  c.test = [](const Shape& s, std::mt19937&, Checks& cpu) -> GpuRun {
    const uint8_t scale_bytes[] = {2, 3, 64, 120, 126, 127, 128, 129, 130, 200, 252};
    auto bank_ptr = std::make_shared<ExpertBank>(ExpertBank{2, 48, s["in"], {}, {}, {}});
    ExpertBank& bank = *bank_ptr;
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
    cpu.expect(expected.allFinite(), "reference finite");
    return [bank_ptr, routing, x, expected](const Variant& v, Checks& gpu) {
      const ExpertBank& bank = *bank_ptr;
      const auto a = algorithm_of<Mxfp4GroupedAlgorithm>(v);
      DeviceRouting droute(routing);
      DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
      for (const auto& [layout, device_bank] : device_layouts(bank)) {
        if (!runs(a, device_bank->view)) continue;
        DeviceBuffer<float> dy(size_t(routing.slots() * bank.out));
        DeviceBuffer<__nv_bfloat16> dy16(size_t(routing.slots() * bank.out));
        CUDA_CHECK(
            run(device_bank->view, droute.view(bank.experts), dx.get(), bank.in, bank.in, dy.get(), bank.out, a));
        CUDA_CHECK(
            run(device_bank->view, droute.view(bank.experts), dx.get(), bank.in, bank.in, dy16.get(), bank.out, a));
        const ref::Matrix got = download(dy, routing.slots(), bank.out);
        const ref::Matrix got16 = download(dy16, routing.slots(), bank.out);
        int64_t mismatches = 0;
        for (int slot = 0; slot < routing.slots(); ++slot) {
          for (int64_t o = 0; o < bank.out; ++o) {
            const auto want = static_cast<float>(expected(slot, o));
            mismatches += got(slot, o) != want || got16(slot, o) != want ? 1 : 0;
          }
        }
        gpu.none(layout + "W itself, f32 and bf16 out", mismatches);
      }
    };
  };
  return c;
}

// A NaN scale (0xFF) makes its row NaN for that expert's slots only; a slot whose token is outside x gets NaN in every
// column. in = 96 (3 blocks: only the GEMV's checked last k-group), 288 (9 blocks: a whole k-group of 8, then one
// more) and 320 (10 blocks: also the tiled GEMV, a group of 4 block pairs and one pair); the bound on the other
// entries is 1e-5 relative plus fp32 summation's, in · 2^-23 · Σ |w · x| (the pipelined GEMM's order exceeded
// 1e-5 · in / 96 at in = 320: 4.6e-5 against 4.2e-5 on a sum of 0.25).
OpCase nan_scale_case() {
  OpCase c{"mxfp4_grouped_nan_scale", OpKind::moe_experts};
  for (const int in : {96, 288, 320}) c.shapes.push_back(shape({{"in", in}}));
  c.variants = grouped_algorithms();
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int64_t in = s["in"], blocks = in / 32;
    auto bank_ptr = std::make_shared<ExpertBank>(random_bank(3, 48, in, rng));
    ExpertBank& bank = *bank_ptr;
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
    cpu.expect(std::isnan(expected(routing.offsets[1], poisoned_row)), "the NaN scale reaches the reference");
    return [bank_ptr, routing, x, expected, magnitude, bad_slot, poisoned_row, in](const Variant& v, Checks& gpu) {
      const ExpertBank& bank = *bank_ptr;
      const auto a = algorithm_of<Mxfp4GroupedAlgorithm>(v);
      DeviceRouting droute(routing);
      DeviceBuffer<__nv_bfloat16> dx(to_bf16(x));
      for (const auto& [layout, device_bank] : device_layouts(bank)) {
        if (!runs(a, device_bank->view)) continue;
        DeviceBuffer<float> dy(size_t(routing.slots() * bank.out));
        CUDA_CHECK(run(device_bank->view, droute.view(bank.experts), dx.get(), in, 100, dy.get(), bank.out, a));
        const ref::Matrix got = download(dy, routing.slots(), bank.out);
        int64_t not_nan = 0, off = 0;
        for (int slot = 0; slot < routing.slots(); ++slot) {
          const bool expert1 = slot >= routing.offsets[1] && slot < routing.offsets[2];
          for (int64_t o = 0; o < bank.out; ++o) {
            if (slot == bad_slot || (expert1 && o == poisoned_row)) {
              not_nan += std::isnan(got(slot, o)) ? 0 : 1;
            } else {
              const double bound =
                  1e-5 * (1.0 + std::abs(expected(slot, o))) + double(in) * 0x1p-23 * magnitude(slot, o);
              off += std::abs(got(slot, o) - expected(slot, o)) <= bound ? 0 : 1;
            }
          }
        }
        gpu.none(layout + "NaN in the poisoned row and the invalid token's slot", not_nan);
        gpu.none(layout + "every other entry within its bound", off);
      }
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> mxfp4_cases() { return {grouped_case(), exact_codes_case(), nan_scale_case()}; }

}  // namespace k3::gpu_test
