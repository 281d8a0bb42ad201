// KDA chunked prefill (kernels/kda_chunk_prefill) against ref::kda_recurrent: the delta rule token by token in fp64,
// an independent form of the same map. Odd token counts (partial last chunks), several heads and K3's 96, bounded
// gates (the tensor-core diagonal tiles) and an unbounded softplus gate (the exact per-pair diagonal tiles), a
// non-zero initial state, one prompt split over two calls, a call captured in a CUDA graph, and the two launches run
// one at a time (the bench's per-phase entry), inputs that are not 16-byte aligned, values in the thousands; every
// case for every KdaChunkVariant.
#include "engine/reference/kda.h"
#include "gpu_harness.h"
#include "kernels/kda_chunk_prefill.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

using Eigen::Index;

constexpr int kD = 128;
constexpr float kGateLowerBound = -5.0f;  // K3's bounded gate
// The kernel's products take TF32 operands (10-bit mantissa, rounded to nearest: 2^-11 ≈ 4.9e-4 relative per
// operand; split_key_f16's fp16 operands have the same mantissa) with fp32 accumulation. A CPU model of its
// algorithm with that rounding lands at 3.3e-4 .. 4.8e-4 normalised error against the fp64 recurrence on inputs made
// like these (1 to 8192 tokens); 2e-3 leaves 4× room and is still far below what a wrong index or a lost decay
// factor gives (order 1, or the 1e-2+ of the state checks).
constexpr double kTf32Tolerance = 2e-3;

// Every version of the kernel runs every check.
const kernels::KdaChunkVariant kVariants[] = {kernels::KdaChunkVariant::ut_factored_split_key_f16};

enum class Gate {
  bounded_sigmoid,  // g = lb·sigmoid(z), z uniform in [-9, 3]: the K3 gate's form, slow and fast channels
  bounded_uniform,  // g uniform in [lb, 0]: tile exponents close to the 40-nat limit
  softplus,         // g = -e^a·softplus(z), down to about -44 per token: unbounded, passed as lower bound 0
};

struct ChunkCase {
  int tokens, heads;
  Gate gate;
};
const ChunkCase kCases[] = {
    {1, 3, Gate::bounded_sigmoid},   {17, 3, Gate::bounded_sigmoid},   {64, 3, Gate::bounded_sigmoid},
    {65, 3, Gate::bounded_sigmoid},  {200, 3, Gate::bounded_sigmoid},  {1000, 3, Gate::bounded_sigmoid},
    {200, 3, Gate::bounded_uniform}, {1000, 2, Gate::bounded_uniform}, {100, 96, Gate::bounded_sigmoid},
    {17, 3, Gate::softplus},         {65, 3, Gate::softplus},          {1000, 3, Gate::softplus},
    {4097, 2, Gate::bounded_sigmoid}, {333, 96, Gate::softplus},
};

const char* gate_name(Gate g) {
  switch (g) {
    case Gate::bounded_sigmoid: return "bounded_sigmoid";
    case Gate::bounded_uniform: return "bounded_uniform";
    case Gate::softplus: return "softplus";
  }
  return "?";
}

std::string describe(const ChunkCase& c) {
  return "T " + std::to_string(c.tokens) + " heads " + std::to_string(c.heads) + " " + gate_name(c.gate);
}

float lower_bound_of(Gate g) { return g == Gate::softplus ? 0.0f : kGateLowerBound; }

struct Inputs {
  ref::Matrix q, k, v, g, beta;
  std::vector<ref::MatrixD> state;  // initial, per head [d_k, d_v]
};

// [rows, H·d] → each (row, head) slice L2-normalised (the layer's eps), then times scale; as kda_layer does.
ref::Matrix normalize_per_head(const ref::Matrix& x, int heads, float scale) {
  ref::Matrix out = x;
  for (Index r = 0; r < x.rows(); ++r)
    for (int h = 0; h < heads; ++h) {
      auto s = out.row(r).segment(Index(h) * kD, kD);
      s *= float(scale / std::sqrt(double(s.squaredNorm()) + ref::kKdaL2NormEps));
    }
  return out;
}

Inputs random_inputs(const ChunkCase& c, std::mt19937& rng) {
  const Index width = Index(c.heads) * kD;
  Inputs in;
  in.q = normalize_per_head(random_matrix(c.tokens, width, rng), c.heads, float(1.0 / std::sqrt(double(kD))));
  in.k = normalize_per_head(random_matrix(c.tokens, width, rng), c.heads, 1.0f);
  in.v = random_matrix(c.tokens, width, rng);
  std::uniform_real_distribution<float> z_sigmoid(-9.0f, 3.0f), unit(0.0f, 1.0f), z_softplus(-6.0f, 6.0f);
  in.g.resize(c.tokens, width);
  for (Index i = 0; i < in.g.size(); ++i) {
    float& g = in.g.data()[i];
    switch (c.gate) {
      case Gate::bounded_sigmoid: g = kGateLowerBound / (1.0f + std::exp(-z_sigmoid(rng))); break;
      case Gate::bounded_uniform: g = kGateLowerBound * unit(rng); break;
      case Gate::softplus: {
        const float a = 2.0f * unit(rng), z = z_softplus(rng);
        g = -std::exp(a) * std::log1p(std::exp(z));
        break;
      }
    }
  }
  in.beta = random_matrix(c.tokens, c.heads, rng, 0.05f, 0.95f);
  for (int h = 0; h < c.heads; ++h) in.state.push_back(random_matrix(kD, kD, rng).cast<double>());
  return in;
}

// The kernel's state layout [heads, d, d] ↔ per-head matrices.
std::vector<float> flatten(const std::vector<ref::MatrixD>& S) {
  std::vector<float> flat;
  for (const ref::MatrixD& s : S) {
    const ref::Matrix f = s.cast<float>();
    flat.insert(flat.end(), f.data(), f.data() + f.size());
  }
  return flat;
}
ref::Matrix state_matrix(const std::vector<ref::MatrixD>& S) {  // [heads·d, d]
  const std::vector<float> flat = flatten(S);
  return from_f32(flat, Index(S.size()) * kD, kD);
}

struct Reference {
  ref::Matrix out;
  ref::Matrix final_state;  // [heads·d, d]
};

Reference recurrent_reference(const Inputs& in, int heads) {
  std::vector<ref::MatrixD> S = in.state;
  Reference r;
  r.out = ref::kda_recurrent(in.q, in.k, in.v, in.g, in.beta, heads, S);
  r.final_state = state_matrix(S);
  return r;
}

// Device copies of one call's inputs, its output (poisoned) and its workspace (poisoned).
struct DeviceCall {
  DeviceBuffer<float> q, k, v, g, beta, out, workspace;
  int tokens, heads;
  DeviceCall(const Inputs& in, int heads_)
      : q(to_f32(in.q)),
        k(to_f32(in.k)),
        v(to_f32(in.v)),
        g(to_f32(in.g)),
        beta(to_f32(in.beta)),
        out(size_t(in.q.size())),
        workspace(kernels::kda_chunk_prefill_workspace_bytes(int(in.q.rows()), heads_, kD) / sizeof(float)),
        tokens(int(in.q.rows())),
        heads(heads_) {}
  cudaError_t run(DeviceBuffer<float>& state, float lower_bound, kernels::KdaChunkVariant variant,
                  cudaStream_t stream = nullptr) {
    return kernels::kda_chunk_prefill_f32state(q.get(), k.get(), v.get(), g.get(), beta.get(), state.get(), out.get(),
                                               tokens, heads, kD, lower_bound, workspace.get(),
                                               workspace.size() * sizeof(float), stream, variant);
  }
  cudaError_t run_phase(kernels::KdaChunkPhase phase, DeviceBuffer<float>& state, float lower_bound,
                        kernels::KdaChunkVariant variant) {
    return kernels::kda_chunk_prefill_phase_for_bench(phase, q.get(), k.get(), v.get(), g.get(), beta.get(),
                                                      state.get(), out.get(), tokens, heads, kD, lower_bound,
                                                      workspace.get(), workspace.size() * sizeof(float), nullptr,
                                                      variant);
  }
  ref::Matrix output() const { return from_f32(out.download(), tokens, Index(heads) * kD); }
  // NaN again in the output and the workspace, so a second run cannot pass on the first run's values.
  void poison() {
    CUDA_CHECK(cudaMemset(out.get(), 0xFF, out.size() * sizeof(float)));
    CUDA_CHECK(cudaMemset(workspace.get(), 0xFF, workspace.size() * sizeof(float)));
  }
};

// Rows [t0, t0 + n) as a dense copy (the call's own inputs).
Inputs slice(const Inputs& in, Index t0, Index n, const std::vector<ref::MatrixD>& state) {
  return {in.q.middleRows(t0, n), in.k.middleRows(t0, n),    in.v.middleRows(t0, n),
          in.g.middleRows(t0, n), in.beta.middleRows(t0, n), state};
}

struct CaseData {
  ChunkCase c;
  Inputs in;
  Reference want;
};

TEST(GpuKdaChunk, PrefillMatchesRecurrentReference) {
  std::mt19937 rng(20261203);
  std::vector<CaseData> cases;
  for (const ChunkCase& c : kCases) {
    CaseData data{c, random_inputs(c, rng), {}};
    data.want = recurrent_reference(data.in, c.heads);

    // CPU side. The initial state matters to the first chunk's outputs (far beyond the tolerance), so a kernel that
    // ignored it would fail.
    Inputs from_zero = data.in;
    for (ref::MatrixD& s : from_zero.state) s.setZero();
    const Index rows = std::min<Index>(c.tokens, 64);
    EXPECT_GT(normalized_error(recurrent_reference(from_zero, c.heads).out.topRows(rows), data.want.out.topRows(rows)),
              20 * kTf32Tolerance)
        << describe(c);
    // The gates reach what each path is for: bounded ones stay within the 40-nat tile limit (uniform ones come close),
    // the softplus one would overflow fp32 (88.7 nats) if its diagonal tiles were referenced to their middle token.
    const double exponent = ref::kda_tile_max_exponent(data.in.g, c.heads);
    if (c.gate == Gate::softplus) {
      EXPECT_GT(exponent, 89.0) << describe(c);
    } else {
      EXPECT_LE(exponent, ref::kKdaTileExponentLimit) << describe(c);
      if (c.gate == Gate::bounded_uniform) {
        EXPECT_GT(exponent, 25.0) << describe(c);
      }
    }
    cases.push_back(std::move(data));
  }

  K3_REQUIRE_GPU();
  std::map<kernels::KdaChunkVariant, double> worst_out;  // each version's largest output error over the cases
  for (const kernels::KdaChunkVariant variant : kVariants) {
    const std::string name = kernels::kda_chunk_variant_name(variant);
    for (const CaseData& data : cases) {
      const ChunkCase& c = data.c;
      DeviceCall call(data.in, c.heads);
      DeviceBuffer<float> state(flatten(data.in.state));
      CUDA_CHECK(call.run(state, lower_bound_of(c.gate), variant));
      const double out_error = normalized_error(call.output(), data.want.out);
      worst_out[variant] = std::max(worst_out[variant], out_error);
      EXPECT_LE(out_error, kTf32Tolerance) << "out " << describe(c) << " " << name;
      EXPECT_LE(normalized_error(from_f32(state.download(), Index(c.heads) * kD, kD), data.want.final_state),
                kTf32Tolerance)
          << "state " << describe(c) << " " << name;
      if (c.gate != Gate::softplus) {
        // Lower bound 0 ("unbounded") takes the exact per-pair diagonal path on the same bounded inputs.
        DeviceBuffer<float> state_exact(flatten(data.in.state));
        call.poison();
        CUDA_CHECK(call.run(state_exact, 0.0f, variant));
        EXPECT_LE(normalized_error(call.output(), data.want.out), kTf32Tolerance)
            << "out, exact path " << describe(c) << " " << name;
        EXPECT_LE(normalized_error(from_f32(state_exact.download(), Index(c.heads) * kD, kD), data.want.final_state),
                  kTf32Tolerance)
            << "state, exact path " << describe(c) << " " << name;
      }
    }
    std::printf("%s: largest normalised output error %.3g\n", name.c_str(), worst_out[variant]);
  }
  // fp16 operands keep TF32's mantissa: the fp16 version's error stays at the TF32 level, the largest error of a CPU
  // model of the algorithm with TF32 operand rounding (4.8e-4; the removed TF32 versions reached 4.6e-4 here).
  EXPECT_LE(worst_out[kernels::KdaChunkVariant::ut_factored_split_key_f16], 1.5 * 4.8e-4);
}

// v and the initial state 10^4 times larger (entries of v up to 10^4, of the final state in the thousands): every
// version, split_key_f16's fp16 copies of S and V' included, stays as accurate as at unit scale; fp16 holds
// magnitudes up to 65504.
TEST(GpuKdaChunk, ValuesInTheThousandsKeepTheirAccuracy) {
  std::mt19937 rng(20261230);
  const ChunkCase c{200, 3, Gate::bounded_sigmoid};
  Inputs in = random_inputs(c, rng);
  in.v *= 1e4f;
  for (ref::MatrixD& s : in.state) s *= 1e4;
  const Reference want = recurrent_reference(in, c.heads);
  ASSERT_GT(want.final_state.cwiseAbs().maxCoeff(), 1000.0f);
  ASSERT_LT(want.final_state.cwiseAbs().maxCoeff(), 20000.0f);
  K3_REQUIRE_GPU();
  for (const kernels::KdaChunkVariant variant : kVariants) {
    const std::string name = kernels::kda_chunk_variant_name(variant);
    DeviceCall call(in, c.heads);
    DeviceBuffer<float> state(flatten(in.state));
    CUDA_CHECK(call.run(state, lower_bound_of(c.gate), variant));
    EXPECT_LE(normalized_error(call.output(), want.out), kTf32Tolerance) << name;
    EXPECT_LE(normalized_error(from_f32(state.download(), Index(c.heads) * kD, kD), want.final_state), kTf32Tolerance)
        << name;
  }
}

TEST(GpuKdaChunk, TwoCallsContinueOneSequence) {
  // T1 + T2 tokens in two calls (the first ending mid-chunk) equal one pass over all of them.
  struct Split {
    int first, second;
  };
  const int heads = 3;
  std::mt19937 rng(20261204);
  for (const Split split : {Split{100, 77}, Split{64, 1}, Split{1, 130}}) {
    const ChunkCase whole{split.first + split.second, heads, Gate::bounded_sigmoid};
    const Inputs in = random_inputs(whole, rng);
    const Reference want = recurrent_reference(in, heads);
    if (!gpu_available()) continue;

    for (const kernels::KdaChunkVariant variant : kVariants) {
      DeviceBuffer<float> state(flatten(in.state));
      DeviceCall first(slice(in, 0, split.first, in.state), heads);
      DeviceCall second(slice(in, split.first, split.second, in.state), heads);
      CUDA_CHECK(first.run(state, kGateLowerBound, variant));
      CUDA_CHECK(second.run(state, kGateLowerBound, variant));
      const std::string label = std::to_string(split.first) + " + " + std::to_string(split.second) + " " +
                                kernels::kda_chunk_variant_name(variant);
      EXPECT_LE(normalized_error(first.output(), want.out.topRows(split.first)), kTf32Tolerance) << label;
      EXPECT_LE(normalized_error(second.output(), want.out.bottomRows(split.second)), kTf32Tolerance) << label;
      EXPECT_LE(normalized_error(from_f32(state.download(), Index(heads) * kD, kD), want.final_state), kTf32Tolerance)
          << label;
    }
  }
  K3_REQUIRE_GPU();
}

TEST(GpuKdaChunk, RunsInsideACudaGraph) {
  const ChunkCase c{130, 3, Gate::bounded_sigmoid};
  std::mt19937 rng(20261205);
  const Inputs in = random_inputs(c, rng);
  const Reference want = recurrent_reference(in, c.heads);
  K3_REQUIRE_GPU();

  for (const kernels::KdaChunkVariant variant : kVariants) {
    const std::string name = kernels::kda_chunk_variant_name(variant);
    DeviceCall call(in, c.heads);
    DeviceBuffer<float> state(flatten(in.state));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const cudaError_t captured = call.run(state, kGateLowerBound, variant, stream);
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(captured);
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_LE(normalized_error(call.output(), want.out), kTf32Tolerance) << name;
    EXPECT_LE(normalized_error(from_f32(state.download(), Index(c.heads) * kD, kD), want.final_state), kTf32Tolerance)
        << name;
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

TEST(GpuKdaChunk, PhasesOneAtATimeEqualOneCall) {
  // The bench's per-launch entry: the chunk-parallel launch, then the state pass on its workspace, give the
  // reference's output and state; the state pass alone first (on a poisoned workspace) must not pass.
  const ChunkCase c{300, 3, Gate::bounded_sigmoid};
  std::mt19937 rng(20261206);
  const Inputs in = random_inputs(c, rng);
  const Reference want = recurrent_reference(in, c.heads);
  K3_REQUIRE_GPU();
  for (const kernels::KdaChunkVariant variant : kVariants) {
    const std::string name = kernels::kda_chunk_variant_name(variant);
    DeviceCall call(in, c.heads);
    call.poison();
    DeviceBuffer<float> state(flatten(in.state));
    CUDA_CHECK(call.run_phase(kernels::KdaChunkPhase::state_pass, state, kGateLowerBound, variant));
    EXPECT_FALSE(normalized_error(call.output(), want.out) <= kTf32Tolerance) << "state pass on poison " << name;

    DeviceBuffer<float> fresh(flatten(in.state));
    call.poison();
    CUDA_CHECK(call.run_phase(kernels::KdaChunkPhase::intra_chunk, fresh, kGateLowerBound, variant));
    CUDA_CHECK(call.run_phase(kernels::KdaChunkPhase::state_pass, fresh, kGateLowerBound, variant));
    EXPECT_LE(normalized_error(call.output(), want.out), kTf32Tolerance) << name;
    EXPECT_LE(normalized_error(from_f32(fresh.download(), Index(c.heads) * kD, kD), want.final_state), kTf32Tolerance)
        << name;
  }
}

TEST(GpuKdaChunk, InputsNotSixteenByteAligned) {
  // q, k, v, g one float past a 16-byte boundary (as column slices of a wider buffer can be): every version still
  // gives the reference's output and state.
  const ChunkCase c{150, 3, Gate::bounded_sigmoid};
  std::mt19937 rng(20261207);
  const Inputs in = random_inputs(c, rng);
  const Reference want = recurrent_reference(in, c.heads);
  K3_REQUIRE_GPU();
  const auto shifted = [](const ref::Matrix& m) {  // one leading pad float, then the matrix
    std::vector<float> host = to_f32(m);
    host.insert(host.begin(), 0.0f);
    return host;
  };
  DeviceBuffer<float> q(shifted(in.q)), k(shifted(in.k)), v(shifted(in.v)), g(shifted(in.g)), beta(to_f32(in.beta));
  DeviceBuffer<float> out(size_t(in.q.size()));
  DeviceBuffer<float> workspace(kernels::kda_chunk_prefill_workspace_bytes(c.tokens, c.heads, kD) / sizeof(float));
  for (const kernels::KdaChunkVariant variant : kVariants) {
    const std::string name = kernels::kda_chunk_variant_name(variant);
    CUDA_CHECK(cudaMemset(out.get(), 0xFF, out.size() * sizeof(float)));
    DeviceBuffer<float> state(flatten(in.state));
    CUDA_CHECK(kernels::kda_chunk_prefill_f32state(q.get() + 1, k.get() + 1, v.get() + 1, g.get() + 1, beta.get(),
                                                   state.get(), out.get(), c.tokens, c.heads, kD, kGateLowerBound,
                                                   workspace.get(), workspace.size() * sizeof(float), nullptr,
                                                   variant));
    EXPECT_LE(normalized_error(from_f32(out.download(), c.tokens, Index(c.heads) * kD), want.out), kTf32Tolerance)
        << name;
    EXPECT_LE(normalized_error(from_f32(state.download(), Index(c.heads) * kD, kD), want.final_state), kTf32Tolerance)
        << name;
  }
}

TEST(GpuKdaChunk, WorkspaceSizeAndArgumentChecks) {
  // Per head and 64-token chunk: W, U, Qg, Kd [64, 128] + A_qk [64, 64] + e^{G_last} [128] fp32 = 36992 floats.
  constexpr size_t kBlockBytes = (4 * 64 * 128 + 64 * 64 + 128) * sizeof(float);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(1, 1, 128), kBlockBytes);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(64, 3, 128), 3 * kBlockBytes);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(65, 96, 128), 2 * 96 * kBlockBytes);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(8192, 96, 128), size_t(128) * 96 * kBlockBytes);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(0, 96, 128), 0u);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(64, 0, 128), 0u);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_bytes(64, 96, 64), 0u);
  using kernels::KdaChunkVariant;
  // U and e^{G_last} fp32, W, Qg, Kd and A_qk fp16.
  const size_t f16_block = (64 * 128 + 128) * 4 + (3 * 64 * 128 + 64 * 64) * 2;
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_traffic_bytes(65, 96, 128, KdaChunkVariant::ut_factored_split_key_f16),
            2 * 96 * f16_block);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_traffic_bytes(0, 96, 128, KdaChunkVariant::ut_factored_split_key_f16),
            0u);
  EXPECT_EQ(kernels::kda_chunk_prefill_workspace_traffic_bytes(64, 96, 128, static_cast<KdaChunkVariant>(1)), 0u);

  // Argument checks come before any launch, so they hold (and run) without a device; the pointers are never read.
  float dummy[1] = {0.0f};
  float* p = dummy;
  void* aligned = reinterpret_cast<void*>(uintptr_t{1} << 20);
  void* misaligned = reinterpret_cast<void*>((uintptr_t{1} << 20) + 16);
  const auto call = [&](int tokens, int heads, int d, float lb, void* ws, size_t ws_bytes) {
    return kernels::kda_chunk_prefill_f32state(p, p, p, p, p, p, p, tokens, heads, d, lb, ws, ws_bytes, nullptr);
  };
  EXPECT_STREQ(kernels::kda_chunk_variant_name(kernels::KdaChunkVariant::ut_factored_split_key_f16),
               "kda_chunk_ut_factored_split_key_f16");
  const size_t enough = kernels::kda_chunk_prefill_workspace_bytes(100, 4, 128);
  for (int d : {0, 64, 127, 256})
    EXPECT_EQ(call(100, 4, d, -5.0f, aligned, enough), cudaErrorInvalidValue) << "d " << d;
  EXPECT_EQ(call(0, 4, 128, -5.0f, aligned, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(-3, 4, 128, -5.0f, aligned, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(100, 0, 128, -5.0f, aligned, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(100, 4, 128, 0.5f, aligned, enough), cudaErrorInvalidValue);  // a lower bound above 0
  EXPECT_EQ(call(100, 4, 128, NAN, aligned, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(100, 4, 128, -5.0f, aligned, enough - 4), cudaErrorInvalidValue);  // workspace too small
  EXPECT_EQ(call(100, 4, 128, -5.0f, nullptr, enough), cudaErrorInvalidValue);
  EXPECT_EQ(call(100, 4, 128, -5.0f, misaligned, enough), cudaErrorInvalidValue);
  // 1 is one past the last version, 4 and 7 old counts of versions (kept invalid by the assert).
  static_assert(static_cast<int>(kernels::KdaChunkVariant::ut_factored_split_key_f16) == 0, "1 must stay invalid");
  for (int bad : {1, 4, 7, -1}) {
    const auto bad_variant = static_cast<kernels::KdaChunkVariant>(bad);
    EXPECT_STREQ(kernels::kda_chunk_variant_name(bad_variant), "unknown") << bad;
    EXPECT_EQ(kernels::kda_chunk_prefill_f32state(p, p, p, p, p, p, p, 100, 4, 128, -5.0f, aligned, enough, nullptr,
                                                  bad_variant),
              cudaErrorInvalidValue)
        << bad;
    EXPECT_EQ(kernels::kda_chunk_prefill_phase_for_bench(kernels::KdaChunkPhase::intra_chunk, p, p, p, p, p, p, p, 100,
                                                         4, 128, -5.0f, aligned, enough, nullptr, bad_variant),
              cudaErrorInvalidValue)
        << bad;
  }
  EXPECT_EQ(kernels::kda_chunk_prefill_phase_for_bench(static_cast<kernels::KdaChunkPhase>(5), p, p, p, p, p, p, p, 100,
                                                       4, 128, -5.0f, aligned, enough, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::kda_chunk_prefill_phase_for_bench(kernels::KdaChunkPhase::state_pass, p, p, p, p, p, p, p, 100, 4,
                                                       128, -5.0f, aligned, enough - 4, nullptr),
            cudaErrorInvalidValue);
  float* null_q = nullptr;
  EXPECT_EQ(kernels::kda_chunk_prefill_f32state(null_q, p, p, p, p, p, p, 100, 4, 128, -5.0f, aligned, enough, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace k3::gpu_test
