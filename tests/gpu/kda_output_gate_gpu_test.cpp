// KDA gated output norm against ref::kda_layer's step 5: per (token, head) ref::rmsnorm(o)·w, times
// ref::sigmoid(gate). Odd head widths (40, 1, a full 1024-thread block), a gate row stride larger than its width with
// the padding poisoned, and inputs small enough that eps dominates the norm.
#include "engine/reference/basic_ops.h"
#include "gpu_harness.h"
#include "kernels/kda_output_gate.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

using Eigen::Index;

constexpr float kEps = 1e-5f;  // K3 rms_norm_eps

struct Case {
  int tokens, heads, d;
  int gate_pad;   // extra gate columns per row, NaN-poisoned
  float o_scale;  // o uniform in ±o_scale; 1e-3 puts mean(o²) far below eps
};
// From 1,024 (token, head) pairs (the last case: 67,200) automatic takes warp_per_token_head.
const Case kCases[] = {{1, 3, 16, 0, 2.0f}, {4, 3, 16, 5, 2.0f},    {5, 96, 128, 0, 2.0f}, {5, 96, 128, 64, 2.0f},
                       {3, 7, 40, 3, 2.0f}, {2, 5, 40, 0, 1e-3f},   {3, 4, 1, 1, 2.0f},    {2, 1, 1024, 7, 2.0f},
                       {9, 2, 33, 0, 0.5f}, {700, 96, 128, 0, 2.0f}};

std::string describe(const Case& c) {
  return "T " + std::to_string(c.tokens) + " heads " + std::to_string(c.heads) + " d " + std::to_string(c.d) +
         " gate pad " + std::to_string(c.gate_pad) + " o scale " + std::to_string(c.o_scale);
}

struct Prepared {
  Case c;
  ref::Matrix o, w, gate;  // gate [tokens, heads·d + pad], bf16-representable, the pad NaN
  ref::Matrix expected;    // [tokens, heads·d]
};

Prepared prepare(const Case& c, std::mt19937& rng) {
  const Index width = Index(c.heads) * c.d;
  Prepared p{c,
             random_matrix(c.tokens, width, rng, -c.o_scale, c.o_scale),
             random_matrix(1, c.d, rng, 0.5f, 1.5f),
             round_to_bf16(random_matrix(c.tokens, width + c.gate_pad, rng, -4.0f, 4.0f)),
             {}};
  p.gate.rightCols(c.gate_pad).setConstant(std::numeric_limits<float>::quiet_NaN());
  // rows_per_head: each (token, head) slice one row of d values, normalised, back to [tokens, heads·d].
  const ref::Matrix per_head = Eigen::Map<const ref::Matrix>(p.o.data(), Index(c.tokens) * c.heads, c.d);
  const ref::Matrix normed_per_head = ref::rmsnorm(per_head, p.w.row(0).transpose(), kEps);
  const ref::Matrix normed = Eigen::Map<const ref::Matrix>(normed_per_head.data(), c.tokens, width);
  p.expected = normed.cwiseProduct(p.gate.leftCols(width).unaryExpr([](float a) { return ref::sigmoid(a); }));
  return p;
}

TEST(GpuKdaOutputGate, MatchesReference) {
  std::mt19937 rng(20261207);
  std::vector<Prepared> cases;  // every CPU reference first: that side runs without a GPU too
  for (const Case& c : kCases) {
    cases.push_back(prepare(c, rng));
    ASSERT_TRUE(cases.back().expected.allFinite()) << describe(c);
  }
  // In the small-o case eps is at least 10× mean(o²), so a kernel that dropped or misplaced eps would fail.
  {
    const Prepared& p = cases[5];
    ASSERT_EQ(p.c.o_scale, 1e-3f);
    EXPECT_LT(p.o.row(0).head(p.c.d).squaredNorm() / p.c.d, 0.1 * kEps);
  }

  K3_REQUIRE_GPU();
  using kernels::KdaOutputGateAlgorithm;
  for (const auto& [algorithm, label] :
       {std::pair{KdaOutputGateAlgorithm::automatic, "automatic"},
        std::pair{KdaOutputGateAlgorithm::block_per_token_head, "block_per_token_head"},
        std::pair{KdaOutputGateAlgorithm::warp_per_token_head, "warp_per_token_head"}}) {
    for (const Prepared& p : cases) {
      const Case& c = p.c;
      const Index width = Index(c.heads) * c.d;
      DeviceBuffer<float> o(to_f32(p.o)), w(to_f32(p.w));
      DeviceBuffer<__nv_bfloat16> gate(to_bf16(p.gate)), out(size_t(c.tokens) * width);
      CUDA_CHECK(kernels::kda_output_gate_bf16(o.get(), w.get(), gate.get(), width + c.gate_pad, kEps, out.get(),
                                               c.tokens, c.heads, c.d, nullptr, algorithm));
      const ref::Matrix got = from_bf16(out.download(), c.tokens, width);
      EXPECT_LE(normalized_error(got, p.expected), tolerance_for<__nv_bfloat16>()) << describe(c) << " " << label;
      // Elementwise: one bf16 rounding (≤ 2^-8 relative) of an fp32 result within 1e-5 relative of the reference.
      Index bad = 0;
      for (Index i = 0; i < got.size(); ++i) {
        const double want = p.expected.data()[i];
        bad += std::abs(got.data()[i] - want) <= (std::ldexp(1.0, -8) + 1e-5) * std::abs(want) + 1e-30 ? 0 : 1;
      }
      EXPECT_EQ(bad, 0) << describe(c) << " " << label;
    }
  }
}

// Argument checks come before any launch, so they hold (and run) without a device.
TEST(GpuKdaOutputGate, RejectsBadArguments) {
  static float o[64], w[64];
  static __nv_bfloat16 gate[64], out[64];
  const auto call = [&](int tokens, int heads, int d, int64_t gate_stride) {
    return kernels::kda_output_gate_bf16(o, w, gate, gate_stride, kEps, out, tokens, heads, d, nullptr);
  };
  EXPECT_EQ(call(1, 2, 0, 2), cudaErrorInvalidValue);
  EXPECT_EQ(call(1, 1, 1025, 1025), cudaErrorInvalidValue);  // one block of d threads: d ≤ 1024
  EXPECT_EQ(call(1, 0, 16, 16), cudaErrorInvalidValue);
  EXPECT_EQ(call(-1, 2, 16, 32), cudaErrorInvalidValue);
  EXPECT_EQ(call(1, 2, 16, 31), cudaErrorInvalidValue);  // gate row stride below heads·d
  EXPECT_EQ(kernels::kda_output_gate_bf16(nullptr, w, gate, 32, kEps, out, 1, 2, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_output_gate_bf16(o, nullptr, gate, 32, kEps, out, 1, 2, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_output_gate_bf16(o, w, nullptr, 32, kEps, out, 1, 2, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_output_gate_bf16(o, w, gate, 32, kEps, nullptr, 1, 2, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(0, 2, 16, 32), cudaSuccess);
  EXPECT_EQ(kernels::kda_output_gate_bf16(o, w, gate, 32, kEps, out, 1, 2, 16, nullptr,
                                          static_cast<kernels::KdaOutputGateAlgorithm>(3)),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace k3::gpu_test
