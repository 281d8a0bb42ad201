// KDA gated output norm against ref::kda_layer's step 5: per (token, head) ref::rmsnorm(o)·w, times
// ref::sigmoid(gate). Odd head widths (40, 1, a full 1024-thread block), a gate row stride larger than its width with
// the padding poisoned, and inputs small enough that eps dominates the norm.
#include "engine/reference/basic_ops.h"
#include "kernels/kda_output_gate.h"
#include "tests/kernels/op_cases/cases.h"

#include <cmath>
#include <limits>

namespace k3::gpu_test {
namespace {

using Eigen::Index;
using kernels::KdaOutputGateAlgorithm;
constexpr float kEps = 1e-5f;  // K3 rms_norm_eps

OpCase kda_output_gate_case() {
  OpCase c{"kda_output_gate_bf16", OpKind::kda_output_norm};
  // tokens, heads, d, gate_pad (extra gate columns per row, NaN-poisoned), o_milli (o uniform in ±o_milli/1000;
  // 1 puts mean(o²) far below eps). From 1,024 (token, head) pairs (the last: 67,200) automatic takes
  // warp_per_token_head.
  const int dims[][5] = {{1, 3, 16, 0, 2000}, {4, 3, 16, 5, 2000},    {5, 96, 128, 0, 2000}, {5, 96, 128, 64, 2000},
                         {3, 7, 40, 3, 2000}, {2, 5, 40, 0, 1},       {3, 4, 1, 1, 2000},    {2, 1, 1024, 7, 2000},
                         {9, 2, 33, 0, 500},  {700, 96, 128, 0, 2000}};
  for (const auto& d : dims) {
    c.shapes.push_back(shape({{"tokens", d[0]}, {"heads", d[1]}, {"d", d[2]}, {"gate_pad", d[3]}, {"o_milli", d[4]}}));
  }
  c.variants = {variant(KdaOutputGateAlgorithm::automatic, "automatic"),
                variant(KdaOutputGateAlgorithm::block_per_token_head, "block_per_token_head"),
                variant(KdaOutputGateAlgorithm::warp_per_token_head, "warp_per_token_head")};
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int tokens = int(s["tokens"]), heads = int(s["heads"]), d = int(s["d"]), pad = int(s["gate_pad"]);
    const float o_scale = float(s["o_milli"]) / 1000.0f;
    const Index width = Index(heads) * d;
    const ref::Matrix o = random_matrix(tokens, width, rng, -o_scale, o_scale);
    const ref::Matrix w = random_matrix(1, d, rng, 0.5f, 1.5f);
    ref::Matrix gate = round_to_bf16(random_matrix(tokens, width + pad, rng, -4.0f, 4.0f));
    gate.rightCols(pad).setConstant(std::numeric_limits<float>::quiet_NaN());
    // Each (token, head) slice one row of d values, normalised, back to [tokens, heads·d].
    const ref::Matrix per_head = Eigen::Map<const ref::Matrix>(o.data(), Index(tokens) * heads, d);
    const ref::Matrix normed_per_head = ref::rmsnorm(per_head, w.row(0).transpose(), kEps);
    const ref::Matrix normed = Eigen::Map<const ref::Matrix>(normed_per_head.data(), tokens, width);
    const ref::Matrix expected =
        normed.cwiseProduct(gate.leftCols(width).unaryExpr([](float a) { return ref::sigmoid(a); }));
    cpu.expect(expected.allFinite(), "reference finite");
    // With small o, eps is at least 10× mean(o²), so a kernel that dropped or misplaced eps would fail.
    if (o_scale < 0.01f) cpu.expect(o.row(0).head(d).squaredNorm() / d < 0.1 * kEps, "eps dominates");
    return [=](const Variant& v, Checks& gpu) {
      DeviceBuffer<float> d_o(to_f32(o)), d_w(to_f32(w));
      DeviceBuffer<__nv_bfloat16> d_gate(to_bf16(gate)), out(size_t(tokens) * width);
      CUDA_CHECK(kernels::kda_output_gate_bf16(d_o.get(), d_w.get(), d_gate.get(), width + pad, kEps, out.get(), tokens,
                                               heads, d, nullptr, algorithm_of<KdaOutputGateAlgorithm>(v)));
      const ref::Matrix got = from_bf16(out.download(), tokens, width);
      gpu.near("out", normalized_error(got, expected), tolerance_for<__nv_bfloat16>());
      // Elementwise: one bf16 rounding (≤ 2^-8 relative) of an fp32 result within 1e-5 relative of the reference.
      int64_t bad = 0;
      for (Index i = 0; i < got.size(); ++i) {
        const double want = expected.data()[i];
        bad += std::abs(got.data()[i] - want) <= (std::ldexp(1.0, -8) + 1e-5) * std::abs(want) + 1e-30 ? 0 : 1;
      }
      gpu.none("elementwise within one bf16 rounding", bad);
    };
  };
  // K3's width (96 heads × 128) for a decode step of 1 and 64 tokens (latency-bound) and a 32K-token prefill chunk.
  for (const int tokens : {1, 64, 32768}) {
    c.perf_shapes.push_back(shape({{"tokens", tokens}, {"heads", 96}, {"d", 128}, {"gate_pad", 0}, {"o_milli", 0}}));
  }
  c.perf_variants = {variant(KdaOutputGateAlgorithm::block_per_token_head, "block_per_token_head"),
                     variant(KdaOutputGateAlgorithm::warp_per_token_head, "warp_per_token_head")};
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("kda_output_gate_{} {} tokens, heads {} d {}", v.name, s["tokens"], s["heads"], s["d"]);
  };
  // o fp32 and gate bf16 read, bf16 written, the norm weight once; 8 FLOPs an element.
  c.cost = [](const Shape& s) {
    const double p = double(s["heads"]) * s["d"];
    Cost cost;
    cost.bytes = s["tokens"] * p * (4.0 + 2.0 + 2.0) + s["d"] * 4.0;
    cost.flops = s["tokens"] * p * 8.0;
    cost.timing = s["tokens"] <= 64 ? Timing::latency : Timing::alone;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int) -> Launch {
    const int tokens = int(s["tokens"]), heads = int(s["heads"]), d = int(s["d"]);
    const int64_t p = int64_t(heads) * d;
    auto o = device_normal_f32(size_t(tokens * p), 0.0f, 1.0f, 31);
    auto w = device_normal_f32(size_t(d), 1.0f, 0.1f, 32);
    auto gate = device_normal_bf16(size_t(tokens * p), 0.0f, 1.0f, 33);
    auto out = device_bytes<__nv_bfloat16>(size_t(tokens * p), 0);
    const auto algorithm = algorithm_of<KdaOutputGateAlgorithm>(v);
    return [=](int, cudaStream_t stream) {
      CUDA_CHECK(kernels::kda_output_gate_bf16(o->get(), w->get(), gate->get(), p, kEps, out->get(), tokens, heads, d,
                                               stream, algorithm));
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> kda_output_gate_cases() { return {kda_output_gate_case()}; }

}  // namespace k3::gpu_test
