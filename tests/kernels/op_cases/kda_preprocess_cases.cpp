// KDA pre-processing against engine/reference/kda (ref::short_conv_silu, l2_normalize_rows, kda_gate, sigmoid): the
// conv state carried over, q and k normalised per head, g and β; both gate forms on every shape (head dims that are
// not a multiple of 32 or above 128, K3's width at 1 and 40 tokens). Perf rows at K3's sizes.
#include "engine/reference/basic_ops.h"
#include "engine/reference/kda.h"
#include "kernels/kda_preprocess.h"
#include "tests/kernels/op_cases/cases.h"

#include <cmath>

namespace k3::gpu_test {
namespace {

using Eigen::Index;
constexpr int kConvKernel = 4;
constexpr double kGateLowerBound = -5.0;

// [rows, H·d] → each (row, head) slice L2-normalised (the layer's eps), then times scale; as kda_layer does.
ref::Matrix normalize_per_head(const ref::Matrix& x, int heads, float scale) {
  const ref::Matrix per_head = Eigen::Map<const ref::Matrix>(x.data(), x.rows() * heads, x.cols() / heads);
  const ref::Matrix normed = ref::l2_normalize_rows(per_head, ref::kKdaL2NormEps) * scale;
  return Eigen::Map<const ref::Matrix>(normed.data(), x.rows(), x.cols());
}

OpCase kda_preprocess_case() {
  OpCase c{"kda_preprocess", OpKind::kda_preprocess};
  const int dims[][3] = {{1, 4, 16}, {3, 4, 16},  {70, 4, 16}, {1, 96, 128},
                         {5, 3, 48}, {2, 2, 256}, {3, 2, 512}, {40, 96, 128}};
  for (const auto& d : dims) c.shapes.push_back(shape({{"tokens", d[0]}, {"heads", d[1]}, {"d", d[2]}}));
  c.variants = {variant(KdaGateForm::bounded_sigmoid, "bounded_sigmoid_gate"),
                variant(KdaGateForm::softplus, "softplus_gate")};
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int T = int(s["tokens"]), H = int(s["heads"]), d = int(s["d"]), K = kConvKernel;
    const Index P = Index(H) * d;
    const ref::Matrix qkv = round_to_bf16(random_matrix(T, 3 * P, rng, -2.0f, 2.0f));
    const ref::Matrix conv_w = random_matrix(3 * P, K, rng, -0.7f, 0.7f);
    const ref::Matrix conv_state = random_matrix(3 * P, K - 1, rng, -2.0f, 2.0f);
    const ref::Matrix f = random_matrix(T, P, rng, -3.0f, 3.0f);
    const ref::Matrix b = random_matrix(T, H, rng, -4.0f, 4.0f);
    const ref::Vector a_log = random_matrix(H, 1, rng, -1.0f, 2.0f).col(0);
    const ref::Vector dt_bias = random_matrix(P, 1, rng).col(0);

    ref::Matrix new_conv_state = conv_state;
    const ref::Matrix activated = ref::short_conv_silu(qkv, conv_w, new_conv_state);
    const ref::Matrix q = normalize_per_head(activated.leftCols(P), H, float(1.0 / std::sqrt(double(d))));
    const ref::Matrix k = normalize_per_head(activated.middleCols(P, P), H, 1.0f);
    const ref::Matrix v = activated.rightCols(P);
    const ref::Matrix beta = b.unaryExpr([](float a) { return ref::sigmoid(a); });
    std::vector<ref::Matrix> g;  // indexed by KdaGateForm
    for (const KdaGateForm form : {KdaGateForm::softplus, KdaGateForm::bounded_sigmoid}) {
      KdaSpec spec;
      spec.num_heads = H;
      spec.head_dim = d;
      spec.conv_kernel = K;
      spec.gate_form = form;
      spec.gate_lower_bound = form == KdaGateForm::bounded_sigmoid ? kGateLowerBound : 0.0;
      g.push_back(ref::kda_gate(spec, f, a_log, dt_bias));
      cpu.expect(g.back().allFinite() && g.back().maxCoeff() <= 0.0f, "g finite and ≤ 0, " + to_string(form));
      if (form == KdaGateForm::bounded_sigmoid) {
        cpu.expect(g.back().minCoeff() >= float(kGateLowerBound), "g ≥ the lower bound");
      }
    }
    // The contract the kernel implements. The new conv state is the last K−1 inputs, oldest first (cached inputs
    // shifted to the front when T < K−1); per token and head, q has norm d^-1/2 and k norm 1.
    int64_t bad_state = 0, bad_norms = 0;
    for (Index ch = 0; ch < conv_state.rows(); ++ch) {
      for (int m = 0; m < K - 1; ++m) {
        const int src = T + m;  // index into [K−1 cached inputs | T new inputs]
        const float expected = src < K - 1 ? conv_state(ch, src) : qkv(src - (K - 1), ch);
        bad_state += new_conv_state(ch, m) == expected ? 0 : 1;
      }
    }
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < H; ++h) {
        bad_norms += std::abs(q.row(t).segment(Index(h) * d, d).norm() - 1.0 / std::sqrt(double(d))) <= 1e-4 ? 0 : 1;
        bad_norms += std::abs(k.row(t).segment(Index(h) * d, d).norm() - 1.0) <= 1e-4 ? 0 : 1;
      }
    }
    cpu.none("new conv state: the last K−1 inputs", bad_state);
    cpu.none("q, k norms per head", bad_norms);
    cpu.expect(q.allFinite() && k.allFinite() && v.allFinite(), "reference finite");
    return [=](const Variant& variant, Checks& gpu) {
      const auto form = algorithm_of<KdaGateForm>(variant);
      DeviceBuffer<__nv_bfloat16> dqkv(to_bf16(qkv));
      DeviceBuffer<float> df(to_f32(f)), db(to_f32(b)), dconv_w(to_f32(conv_w)), dconv_state(to_f32(conv_state));
      DeviceBuffer<float> da_log(std::vector<float>(a_log.data(), a_log.data() + H));
      DeviceBuffer<float> ddt_bias(std::vector<float>(dt_bias.data(), dt_bias.data() + P));
      DeviceBuffer<float> dq(size_t(T * P)), dk(size_t(T * P)), dv(size_t(T * P)), dg(size_t(T * P));
      DeviceBuffer<float> dbeta(size_t(T) * H);
      if (form == KdaGateForm::bounded_sigmoid) {
        CUDA_CHECK(kernels::kda_preprocess_bounded_sigmoid_gate(
            dqkv.get(), df.get(), db.get(), dconv_w.get(), dconv_state.get(), da_log.get(), ddt_bias.get(),
            float(kGateLowerBound), dq.get(), dk.get(), dv.get(), dg.get(), dbeta.get(), T, H, d, K, nullptr));
      } else {
        CUDA_CHECK(kernels::kda_preprocess_softplus_gate(
            dqkv.get(), df.get(), db.get(), dconv_w.get(), dconv_state.get(), da_log.get(), ddt_bias.get(), dq.get(),
            dk.get(), dv.get(), dg.get(), dbeta.get(), T, H, d, K, nullptr));
      }
      const double tol = tolerance_for<float>();
      gpu.near("q", normalized_error(from_f32(dq.download(), T, P), q), tol);
      gpu.near("k", normalized_error(from_f32(dk.download(), T, P), k), tol);
      gpu.near("v", normalized_error(from_f32(dv.download(), T, P), v), tol);
      gpu.near("g", normalized_error(from_f32(dg.download(), T, P), g[size_t(form)]), tol);
      gpu.near("beta", normalized_error(from_f32(dbeta.download(), T, H), beta), tol);
      // The new conv state is a copy of inputs: exact.
      gpu.expect(from_f32(dconv_state.download(), 3 * P, K - 1) == new_conv_state, "conv state exact");
    };
  };
  // Short conv + SiLU, L2 norms, bounded gate and β at K3's width (96 heads × 128, conv kernel 4): a 32K-token
  // prefill chunk (timed alone) and a decode step of 1 and 64 sequences, one conv-state slot each (latency-bound).
  for (const int tokens : {1, 64, 32768}) {
    c.perf_shapes.push_back(shape({{"tokens", tokens}, {"heads", 96}, {"d", 128}, {"conv", 4}}));
  }
  c.perf_variants = {variant(KdaGateForm::bounded_sigmoid, "bounded_sigmoid_gate")};
  c.perf_name = [](const Shape& s, const Variant&) {
    return fmt::format("kda_preprocess {} {}, heads {} d {}", s["tokens"] > 64 ? "prefill" : "decode batch",
                       s["tokens"], s["heads"], s["d"]);
  };
  // Per token: qkv (bf16), f, b read, q, k, v, g, β written (fp32); the conv weights and the conv states read and
  // written (one state per sequence at decode), a_log and dt_bias.
  c.cost = [](const Shape& s) {
    const double tokens = double(s["tokens"]), heads = double(s["heads"]), p = heads * s["d"], k = double(s["conv"]);
    const double states = tokens > 64 ? 1 : tokens;
    Cost cost;
    cost.bytes = tokens * (3 * p * 2.0 + p * 4.0 + heads * 4.0 + 4 * p * 4.0 + heads * 4.0) +
                 3 * p * (k * 4.0 + 2.0 * states * (k - 1) * 4.0) + heads * 4.0 + p * 4.0;
    cost.flops = tokens * p * (3.0 * 2 * k + 12.0);
    cost.timing = tokens > 64 ? Timing::alone : Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant&, int) -> Launch {
    const int tokens = int(s["tokens"]), heads = int(s["heads"]), d = int(s["d"]), conv = int(s["conv"]);
    const int64_t p = int64_t(heads) * d;
    const bool prefill = tokens > 64;
    const int64_t states = prefill ? 1 : tokens;
    auto qkv = device_normal_bf16(size_t(tokens * 3 * p), 0.0f, 1.0f, 21);
    auto f = device_normal_f32(size_t(tokens * p), 0.0f, 1.0f, 22);
    auto b = device_normal_f32(size_t(tokens) * heads, 0.0f, 1.0f, 23);
    auto conv_w = device_normal_f32(size_t(3 * p * conv), 0.0f, 0.5f, 24);
    auto conv_state = device_normal_f32(size_t(states * 3 * p * (conv - 1)), 0.0f, 1.0f, 25);
    auto a_log = device_uniform_f32(size_t(heads), -1.0f, 1.0f, 26);
    auto dt_bias = device_normal_f32(size_t(p), 0.0f, 1.0f, 27);
    auto out = device_bytes<float>(size_t(tokens * (4 * p + heads)), 0);
    return [=](int, cudaStream_t stream) {
      float *q = out->get(), *k = q + tokens * p, *v = k + tokens * p, *g = v + tokens * p, *beta = g + tokens * p;
      const auto call = prefill ? kernels::kda_preprocess_bounded_sigmoid_gate
                                : kernels::kda_preprocess_bounded_sigmoid_gate_decode_batch;
      CUDA_CHECK(call(qkv->get(), f->get(), b->get(), conv_w->get(), conv_state->get(), a_log->get(), dt_bias->get(),
                      -5.0f, q, k, v, g, beta, tokens, heads, d, conv, stream));
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> kda_preprocess_cases() { return {kda_preprocess_case()}; }

}  // namespace k3::gpu_test
