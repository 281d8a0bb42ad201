// KDA kernels against engine/reference/kda: the pre-processing (ref::short_conv_silu, l2_normalize_rows, kda_gate,
// sigmoid), and the decode step's argument checks (its comparisons are cases of the op table).
#include "engine/reference/basic_ops.h"
#include "engine/reference/kda.h"
#include "gpu_harness.h"
#include "kernels/kda_decode.h"
#include "kernels/kda_preprocess.h"

#include <cmath>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

using Eigen::Index;

// [rows, H·d] → each (row, head) slice L2-normalised (the layer's eps), then times scale; as kda_layer does.
ref::Matrix normalize_per_head(const ref::Matrix& x, int heads, float scale) {
  const ref::Matrix per_head = Eigen::Map<const ref::Matrix>(x.data(), x.rows() * heads, x.cols() / heads);
  const ref::Matrix normed = ref::l2_normalize_rows(per_head, ref::kKdaL2NormEps) * scale;
  return Eigen::Map<const ref::Matrix>(normed.data(), x.rows(), x.cols());
}

// ---- Decode step (its comparisons against ref::kda_recurrent: tests/gpu/op_cases/kda_cases.cpp) ----

using kernels::KdaDecodeAlgorithm;

TEST(GpuKda, DecodeStepRejectsUnsupportedShapes) {
  // Argument checks come before any launch, so they hold (and run) without a device.
  for (int d : {0, 8, 24, 136, 256})
    EXPECT_EQ(kernels::kda_decode_step_f32state(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 4, d,
                                                nullptr),
              cudaErrorInvalidValue)
        << "d " << d;
  EXPECT_EQ(kernels::kda_decode_step_bf16state(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 0, 128,
                                               nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_decode_step_bf16state(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 96,
                                               128, nullptr),
            cudaSuccess);
  // The split-key version needs d a multiple of 32 (automatic then takes column_per_thread).
  for (int d : {16, 48, 80, 112})
    for (KdaDecodeAlgorithm a : {KdaDecodeAlgorithm::column_pair_split_key})
      EXPECT_EQ(kernels::kda_decode_step_f32state(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 4,
                                                  d, nullptr, a),
                cudaErrorInvalidValue)
          << "d " << d;
}

// ---- Pre-processing ----

constexpr int kConvKernel = 4;
constexpr double kGateLowerBound = -5.0;

struct PreprocessCase {
  int tokens, heads, d;
  KdaGateForm gate;
};
// The last four: head dims that are not a multiple of 32 or above 128, and K3's width over 40 tokens.
const PreprocessCase kPreprocessCases[] = {
    {1, 4, 16, KdaGateForm::bounded_sigmoid},  {3, 4, 16, KdaGateForm::bounded_sigmoid},
    {70, 4, 16, KdaGateForm::bounded_sigmoid}, {1, 96, 128, KdaGateForm::bounded_sigmoid},
    {1, 4, 16, KdaGateForm::softplus},         {3, 4, 16, KdaGateForm::softplus},
    {70, 4, 16, KdaGateForm::softplus},        {1, 96, 128, KdaGateForm::softplus},
    {5, 3, 48, KdaGateForm::bounded_sigmoid},  {2, 2, 256, KdaGateForm::softplus},
    {3, 2, 512, KdaGateForm::bounded_sigmoid}, {40, 96, 128, KdaGateForm::bounded_sigmoid},
};

struct PreprocessData {
  PreprocessCase c;
  ref::Matrix qkv, conv_w, conv_state, f, b;  // inputs; qkv bf16-representable (what the kernel reads)
  ref::Vector a_log, dt_bias;
  ref::Matrix q, k, v, g, beta, new_conv_state;  // reference outputs
};

std::string describe(const PreprocessCase& c) {
  return "T " + std::to_string(c.tokens) + " heads " + std::to_string(c.heads) + " d " + std::to_string(c.d) + " " +
         to_string(c.gate);
}

PreprocessData preprocess_reference(const PreprocessCase& c, std::mt19937& rng) {
  const int T = c.tokens, H = c.heads, K = kConvKernel;
  const Index P = Index(H) * c.d;
  KdaSpec spec;
  spec.num_heads = H;
  spec.head_dim = c.d;
  spec.conv_kernel = K;
  spec.gate_form = c.gate;
  spec.gate_lower_bound = c.gate == KdaGateForm::bounded_sigmoid ? kGateLowerBound : 0.0;

  PreprocessData r;
  r.c = c;
  r.qkv = round_to_bf16(random_matrix(T, 3 * P, rng, -2.0f, 2.0f));
  r.conv_w = random_matrix(3 * P, K, rng, -0.7f, 0.7f);
  r.conv_state = random_matrix(3 * P, K - 1, rng, -2.0f, 2.0f);
  r.f = random_matrix(T, P, rng, -3.0f, 3.0f);
  r.b = random_matrix(T, H, rng, -4.0f, 4.0f);
  r.a_log = random_matrix(H, 1, rng, -1.0f, 2.0f).col(0);
  r.dt_bias = random_matrix(P, 1, rng).col(0);

  r.new_conv_state = r.conv_state;
  const ref::Matrix activated = ref::short_conv_silu(r.qkv, r.conv_w, r.new_conv_state);
  r.q = normalize_per_head(activated.leftCols(P), H, float(1.0 / std::sqrt(double(c.d))));
  r.k = normalize_per_head(activated.middleCols(P, P), H, 1.0f);
  r.v = activated.rightCols(P);
  r.g = ref::kda_gate(spec, r.f, r.a_log, r.dt_bias);
  r.beta = r.b.unaryExpr([](float a) { return ref::sigmoid(a); });
  return r;
}

// CPU side: the contract the kernel implements. The new conv state is the last K−1 inputs, oldest first (cached
// inputs shifted to the front when T < K−1); per token and head, q has norm d^-1/2 and k norm 1; g within its range.
void check_preprocess_contract(const PreprocessData& r) {
  const PreprocessCase& c = r.c;
  const int T = c.tokens, K = kConvKernel;
  for (Index ch = 0; ch < r.conv_state.rows(); ++ch)
    for (int m = 0; m < K - 1; ++m) {
      const int src = T + m;  // index into [K−1 cached inputs | T new inputs]
      const float expected = src < K - 1 ? r.conv_state(ch, src) : r.qkv(src - (K - 1), ch);
      ASSERT_EQ(r.new_conv_state(ch, m), expected) << describe(c) << " channel " << ch << " slot " << m;
    }
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < c.heads; ++h) {
      EXPECT_NEAR(r.q.row(t).segment(Index(h) * c.d, c.d).norm(), 1.0 / std::sqrt(double(c.d)), 1e-4) << describe(c);
      EXPECT_NEAR(r.k.row(t).segment(Index(h) * c.d, c.d).norm(), 1.0, 1e-4) << describe(c);
    }
  EXPECT_LE(r.g.maxCoeff(), 0.0f) << describe(c);
  if (c.gate == KdaGateForm::bounded_sigmoid) {
    EXPECT_GE(r.g.minCoeff(), float(kGateLowerBound)) << describe(c);
  }
  EXPECT_TRUE(r.q.allFinite() && r.k.allFinite() && r.v.allFinite() && r.g.allFinite()) << describe(c);
}

void check_preprocess_on_gpu(const PreprocessData& r) {
  const PreprocessCase& c = r.c;
  const int T = c.tokens, H = c.heads, K = kConvKernel;
  const Index P = Index(H) * c.d;
  DeviceBuffer<__nv_bfloat16> qkv(to_bf16(r.qkv));
  DeviceBuffer<float> f(to_f32(r.f)), b(to_f32(r.b)), conv_w(to_f32(r.conv_w)), conv_state(to_f32(r.conv_state));
  DeviceBuffer<float> a_log(std::vector<float>(r.a_log.data(), r.a_log.data() + H));
  DeviceBuffer<float> dt_bias(std::vector<float>(r.dt_bias.data(), r.dt_bias.data() + P));
  DeviceBuffer<float> q(T * P), k(T * P), v(T * P), g(T * P), beta(Index(T) * H);
  if (c.gate == KdaGateForm::bounded_sigmoid) {
    CUDA_CHECK(kernels::kda_preprocess_bounded_sigmoid_gate(
        qkv.get(), f.get(), b.get(), conv_w.get(), conv_state.get(), a_log.get(), dt_bias.get(), float(kGateLowerBound),
        q.get(), k.get(), v.get(), g.get(), beta.get(), T, H, c.d, K, nullptr));
  } else {
    CUDA_CHECK(kernels::kda_preprocess_softplus_gate(qkv.get(), f.get(), b.get(), conv_w.get(), conv_state.get(),
                                                     a_log.get(), dt_bias.get(), q.get(), k.get(), v.get(), g.get(),
                                                     beta.get(), T, H, c.d, K, nullptr));
  }
  const double tol = tolerance_for<float>();
  EXPECT_LE(normalized_error(from_f32(q.download(), T, P), r.q), tol) << "q " << describe(c);
  EXPECT_LE(normalized_error(from_f32(k.download(), T, P), r.k), tol) << "k " << describe(c);
  EXPECT_LE(normalized_error(from_f32(v.download(), T, P), r.v), tol) << "v " << describe(c);
  EXPECT_LE(normalized_error(from_f32(g.download(), T, P), r.g), tol) << "g " << describe(c);
  EXPECT_LE(normalized_error(from_f32(beta.download(), T, H), r.beta), tol) << "beta " << describe(c);
  // The new conv state is a copy of inputs: exact.
  EXPECT_TRUE(from_f32(conv_state.download(), 3 * P, K - 1) == r.new_conv_state) << "conv state " << describe(c);
}

TEST(GpuKda, PreprocessMatchesReference) {
  std::mt19937 rng(20261202);
  std::vector<PreprocessData> cases;
  for (const PreprocessCase& c : kPreprocessCases) {
    cases.push_back(preprocess_reference(c, rng));
    check_preprocess_contract(cases.back());
  }
  K3_REQUIRE_GPU();
  for (const PreprocessData& r : cases) check_preprocess_on_gpu(r);
}

TEST(GpuKda, PreprocessRejectsInvalidArguments) {
  // Argument checks come before any launch, so they hold (and run) without a device.
  const auto bounded = [](float lb, int d, int kernel) {
    return kernels::kda_preprocess_bounded_sigmoid_gate(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                        lb, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 4, d,
                                                        kernel, nullptr);
  };
  EXPECT_EQ(bounded(0.0f, 16, 4), cudaErrorInvalidValue);  // a bounded gate needs lb < 0
  EXPECT_EQ(bounded(NAN, 16, 4), cudaErrorInvalidValue);
  EXPECT_EQ(bounded(-5.0f, 0, 4), cudaErrorInvalidValue);
  EXPECT_EQ(bounded(-5.0f, 2048, 4), cudaErrorInvalidValue);
  EXPECT_EQ(bounded(-5.0f, 16, 0), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_preprocess_softplus_gate(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                  nullptr, nullptr, nullptr, nullptr, nullptr, 0, 4, 16, 4, nullptr),
            cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
