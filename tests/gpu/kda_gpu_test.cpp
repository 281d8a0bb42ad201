// KDA kernels against engine/reference/kda: the decode step (ref::kda_recurrent) with fp32 and bf16 state over
// consecutive in-place steps, and the pre-processing (ref::short_conv_silu, l2_normalize_rows, kda_gate, sigmoid).
#include "engine/reference/basic_ops.h"
#include "engine/reference/kda.h"
#include "gpu_harness.h"
#include "kernels/kda_decode.h"
#include "kernels/kda_preprocess.h"

#include <cmath>
#include <string>
#include <type_traits>
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

// ---- Decode step ----

constexpr int kDecodeSteps = 5;

struct DecodeCase {
  int batch, heads, d;
};
// (1, 2, 48) adds the half-warp blocks (d not a multiple of 32) with several blocks per head; (9, 3, 32) and (8, 2, 96)
// the split-key versions with one warp per block (d not a multiple of 64 or 128) at batches where automatic takes them.
const DecodeCase kDecodeCases[] = {{1, 96, 128}, {3, 5, 64}, {16, 96, 128}, {2, 3, 16},
                                   {1, 2, 48},   {9, 3, 32}, {8, 2, 96}};

using kernels::KdaDecodeAlgorithm;
struct NamedDecodeAlgorithm {
  KdaDecodeAlgorithm algorithm;
  const char* name;
  bool split_key;  // needs d a multiple of 32
};
const NamedDecodeAlgorithm kDecodeAlgorithms[] = {
    {KdaDecodeAlgorithm::automatic, "automatic", false},
    {KdaDecodeAlgorithm::column_per_thread, "column_per_thread", false},
    {KdaDecodeAlgorithm::column_pair_split_key, "column_pair_split_key", true},
    {KdaDecodeAlgorithm::column_quad_split_key, "column_quad_split_key", true}};

struct StepInputs {  // one step for the whole batch: row b is sequence b
  ref::Matrix q, k, v, g, beta;
};

StepInputs random_step(const DecodeCase& c, std::mt19937& rng) {
  const Index width = Index(c.heads) * c.d;
  StepInputs in;
  in.q = normalize_per_head(random_matrix(c.batch, width, rng), c.heads, float(1.0 / std::sqrt(double(c.d))));
  in.k = normalize_per_head(random_matrix(c.batch, width, rng), c.heads, 1.0f);
  in.v = random_matrix(c.batch, width, rng);
  in.g = random_matrix(c.batch, width, rng, -1.0f, 0.0f);
  in.beta = random_matrix(c.batch, c.heads, rng, 0.05f, 0.95f);
  return in;
}

// States [batch][head] ↔ the kernel layout [batch, heads, d_k, d_v] viewed as [batch·heads·d, d].
using BatchState = std::vector<std::vector<ref::MatrixD>>;
BatchState split_state(const ref::Matrix& flat, const DecodeCase& c) {
  BatchState s(c.batch, std::vector<ref::MatrixD>(c.heads));
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h) s[b][h] = flat.middleRows((Index(b) * c.heads + h) * c.d, c.d).cast<double>();
  return s;
}
ref::Matrix join_state(const BatchState& s, const DecodeCase& c) {
  ref::Matrix flat(Index(c.batch) * c.heads * c.d, c.d);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h) flat.middleRows((Index(b) * c.heads + h) * c.d, c.d) = s[b][h].cast<float>();
  return flat;
}
ref::MatrixD bf16_rounded(const ref::MatrixD& m) { return round_to_bf16(m.cast<float>()).cast<double>(); }

struct DecodeReference {
  std::vector<ref::Matrix> out;  // per step, [batch, heads·d]
  ref::Matrix final_state;       // kernel layout
};

// kda_recurrent one token at a time per sequence; with round_each_step the state is rounded to bf16 after every
// step, which models bf16 storage (used only to show that the bf16 tolerance leaves room for a correct kernel).
DecodeReference reference_steps(const DecodeCase& c, const ref::Matrix& initial_state,
                                const std::vector<StepInputs>& steps, bool round_each_step = false) {
  BatchState S = split_state(initial_state, c);
  DecodeReference r;
  for (const StepInputs& in : steps) {
    ref::Matrix out(c.batch, Index(c.heads) * c.d);
    for (int b = 0; b < c.batch; ++b) {
      out.row(b) =
          ref::kda_recurrent(in.q.row(b), in.k.row(b), in.v.row(b), in.g.row(b), in.beta.row(b), c.heads, S[b]);
      if (round_each_step)
        for (ref::MatrixD& s : S[b]) s = bf16_rounded(s);
    }
    r.out.push_back(out);
  }
  r.final_state = join_state(S, c);
  return r;
}

std::string describe(const DecodeCase& c) {
  return "batch " + std::to_string(c.batch) + " heads " + std::to_string(c.heads) + " d " + std::to_string(c.d);
}

// Runs the steps on the GPU from initial (already in the kernel's state dtype) and checks every step's output and the
// final state against want.
template <typename State>
void check_decode_on_gpu(const DecodeCase& c, const std::vector<State>& initial, const std::vector<StepInputs>& steps,
                         const DecodeReference& want, double tolerance, const std::string& label,
                         KdaDecodeAlgorithm algorithm) {
  DeviceBuffer<State> state(initial);
  for (size_t step = 0; step < steps.size(); ++step) {
    const StepInputs& in = steps[step];
    DeviceBuffer<float> q(to_f32(in.q)), k(to_f32(in.k)), v(to_f32(in.v)), g(to_f32(in.g)), beta(to_f32(in.beta));
    DeviceBuffer<float> out(in.q.size());
    if constexpr (std::is_same_v<State, float>) {
      CUDA_CHECK(kernels::kda_decode_step_f32state(q.get(), k.get(), v.get(), g.get(), beta.get(), state.get(),
                                                   out.get(), c.batch, c.heads, c.d, nullptr, algorithm));
    } else {
      CUDA_CHECK(kernels::kda_decode_step_bf16state(q.get(), k.get(), v.get(), g.get(), beta.get(), state.get(),
                                                    out.get(), c.batch, c.heads, c.d, nullptr, algorithm));
    }
    const ref::Matrix got = from_f32(out.download(), c.batch, in.q.cols());
    EXPECT_LE(normalized_error(got, want.out[step]), tolerance) << label << " " << describe(c) << " step " << step;
  }
  const Index rows = want.final_state.rows(), cols = want.final_state.cols();
  ref::Matrix got_state;
  if constexpr (std::is_same_v<State, float>) {
    got_state = from_f32(state.download(), rows, cols);
  } else {
    got_state = from_bf16(state.download(), rows, cols);
  }
  EXPECT_LE(normalized_error(got_state, want.final_state), tolerance) << label << " state " << describe(c);
}

struct DecodeData {
  DecodeCase c;
  ref::Matrix initial;  // fp32 state; the bf16 run starts from its rounding
  std::vector<StepInputs> steps;
  DecodeReference want_f32, want_bf16;
};

TEST(GpuKda, DecodeStepMatchesRecurrentReference) {
  std::mt19937 rng(20261201);
  std::vector<DecodeData> cases;
  for (const DecodeCase& c : kDecodeCases) {
    DecodeData data{c, random_matrix(Index(c.batch) * c.heads * c.d, c.d, rng), {}, {}, {}};
    for (int s = 0; s < kDecodeSteps; ++s) data.steps.push_back(random_step(c, rng));
    const ref::Matrix initial_bf16 = round_to_bf16(data.initial);
    data.want_f32 = reference_steps(c, data.initial, data.steps);
    data.want_bf16 = reference_steps(c, initial_bf16, data.steps);

    // CPU side: the state really evolves (decay and updates move it well away from the start), and bf16 storage
    // rounded after every step stays within half the bf16 tolerance of the unrounded reference.
    EXPECT_GT(normalized_error(data.want_f32.final_state, data.initial), 0.3) << describe(c);
    const DecodeReference stored_bf16 = reference_steps(c, initial_bf16, data.steps, /*round_each_step=*/true);
    for (int s = 0; s < kDecodeSteps; ++s)
      EXPECT_LE(normalized_error(stored_bf16.out[s], data.want_bf16.out[s]), tolerance_for<__nv_bfloat16>() / 2)
          << describe(c) << " step " << s;
    EXPECT_LE(normalized_error(stored_bf16.final_state, data.want_bf16.final_state), tolerance_for<__nv_bfloat16>() / 2)
        << describe(c);
    cases.push_back(std::move(data));
  }

  K3_REQUIRE_GPU();
  for (const DecodeData& data : cases) {
    for (const NamedDecodeAlgorithm& a : kDecodeAlgorithms) {
      if (a.split_key && data.c.d % 32 != 0) continue;
      check_decode_on_gpu(data.c, to_f32(data.initial), data.steps, data.want_f32, tolerance_for<float>(),
                          std::string(a.name) + " fp32 state", a.algorithm);
      check_decode_on_gpu(data.c, to_bf16(data.initial), data.steps, data.want_bf16, tolerance_for<__nv_bfloat16>(),
                          std::string(a.name) + " bf16 state", a.algorithm);
    }
  }
}

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
  // The split-key versions need d a multiple of 32 (automatic then takes column_per_thread).
  for (int d : {16, 48, 80, 112})
    for (KdaDecodeAlgorithm a : {KdaDecodeAlgorithm::column_pair_split_key, KdaDecodeAlgorithm::column_quad_split_key})
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
