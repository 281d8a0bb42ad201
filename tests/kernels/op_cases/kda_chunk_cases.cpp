// KDA chunked prefill (kernels/kda_chunk_prefill) against ref::kda_recurrent: the delta rule token by token in fp64,
// an independent form of the same map. Odd token counts (partial last chunks), several heads and K3's 96, bounded
// gates (the tensor-core diagonal tiles) and an unbounded softplus gate (the exact per-pair diagonal tiles), a
// non-zero initial state, values in the thousands; each shape through the gate's own lower bound and through lower
// bound 0 (the exact per-pair diagonal path on the same inputs). Calls split in two, graph capture, the two launches
// one at a time and unaligned inputs: plain tests in tests/kernels/kda_chunk_gpu_test.cpp.
#include "tests/kernels/op_cases/cases.h"
#include "tests/kernels/op_cases/kda_chunk_data.h"

#include <algorithm>
#include <cmath>

namespace k3::gpu_test {
namespace kda_chunk {

using Eigen::Index;

namespace {

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

ref::Matrix state_matrix(const std::vector<ref::MatrixD>& S) {  // [heads·d, d]
  const std::vector<float> flat = flatten(S);
  return from_f32(flat, Index(S.size()) * kD, kD);
}

}  // namespace

Inputs random_inputs(int tokens, int heads, Gate gate, std::mt19937& rng) {
  const Index width = Index(heads) * kD;
  Inputs in;
  in.q = normalize_per_head(random_matrix(tokens, width, rng), heads, float(1.0 / std::sqrt(double(kD))));
  in.k = normalize_per_head(random_matrix(tokens, width, rng), heads, 1.0f);
  in.v = random_matrix(tokens, width, rng);
  std::uniform_real_distribution<float> z_sigmoid(-9.0f, 3.0f), unit(0.0f, 1.0f), z_softplus(-6.0f, 6.0f);
  in.g.resize(tokens, width);
  for (Index i = 0; i < in.g.size(); ++i) {
    float& g = in.g.data()[i];
    switch (gate) {
      case Gate::bounded_sigmoid: g = kGateLowerBound / (1.0f + std::exp(-z_sigmoid(rng))); break;
      case Gate::bounded_uniform: g = kGateLowerBound * unit(rng); break;
      case Gate::softplus: {
        const float a = 2.0f * unit(rng), z = z_softplus(rng);
        g = -std::exp(a) * std::log1p(std::exp(z));
        break;
      }
    }
  }
  in.beta = random_matrix(tokens, heads, rng, 0.05f, 0.95f);
  for (int h = 0; h < heads; ++h) in.state.push_back(random_matrix(kD, kD, rng).cast<double>());
  return in;
}

Inputs slice(const Inputs& in, Index t0, Index n, const std::vector<ref::MatrixD>& state) {
  return {in.q.middleRows(t0, n), in.k.middleRows(t0, n),    in.v.middleRows(t0, n),
          in.g.middleRows(t0, n), in.beta.middleRows(t0, n), state};
}

std::vector<float> flatten(const std::vector<ref::MatrixD>& S) {
  std::vector<float> flat;
  for (const ref::MatrixD& s : S) {
    const ref::Matrix f = s.cast<float>();
    flat.insert(flat.end(), f.data(), f.data() + f.size());
  }
  return flat;
}

Reference recurrent_reference(const Inputs& in, int heads) {
  std::vector<ref::MatrixD> S = in.state;
  Reference r;
  r.out = ref::kda_recurrent(in.q, in.k, in.v, in.g, in.beta, heads, S);
  r.final_state = state_matrix(S);
  return r;
}

DeviceCall::DeviceCall(const Inputs& in, int heads_)
    : q(to_f32(in.q)),
      k(to_f32(in.k)),
      v(to_f32(in.v)),
      g(to_f32(in.g)),
      beta(to_f32(in.beta)),
      out(size_t(in.q.size())),
      workspace(kernels::kda_chunk_prefill_workspace_bytes(int(in.q.rows()), heads_, kD) / sizeof(float)),
      tokens(int(in.q.rows())),
      heads(heads_) {}

cudaError_t DeviceCall::run(DeviceBuffer<float>& state, float lower_bound, cudaStream_t stream) {
  return kernels::kda_chunk_prefill_f32state(q.get(), k.get(), v.get(), g.get(), beta.get(), state.get(), out.get(),
                                             tokens, heads, kD, lower_bound, workspace.get(),
                                             workspace.size() * sizeof(float), stream);
}

cudaError_t DeviceCall::run_phase(kernels::KdaChunkPhase phase, DeviceBuffer<float>& state, float lower_bound) {
  return kernels::kda_chunk_prefill_phase_for_bench(phase, q.get(), k.get(), v.get(), g.get(), beta.get(), state.get(),
                                                    out.get(), tokens, heads, kD, lower_bound, workspace.get(),
                                                    workspace.size() * sizeof(float), nullptr);
}

ref::Matrix DeviceCall::output() const { return from_f32(out.download(), tokens, Index(heads) * kD); }

void DeviceCall::poison() {
  CUDA_CHECK(cudaMemset(out.get(), 0xFF, out.size() * sizeof(float)));
  CUDA_CHECK(cudaMemset(workspace.get(), 0xFF, workspace.size() * sizeof(float)));
}

double state_error(const DeviceBuffer<float>& state, const Reference& want, int heads) {
  return normalized_error(from_f32(state.download(), Index(heads) * kD, kD), want.final_state);
}

}  // namespace kda_chunk

namespace {

using namespace kda_chunk;

// Which lower bound a call passes: the gate's own (bounded gates: the tensor-core diagonal tiles) or 0 (the exact
// per-pair diagonal tiles, right for any gate).
enum class DiagonalPath { gate_bound, exact };

OpCase kda_chunk_case() {
  OpCase c{"kda_chunk_prefill_f32state", OpKind::kda_chunk};
  // tokens, heads, gate, v_scale_log10 (v and the initial state times 10^v_scale_log10: entries of the final state
  // in the thousands, within fp16's 65504 for the fp16 copies of S and V')
  const int dims[][4] = {{1, 3, 0, 0},    {17, 3, 0, 0},   {64, 3, 0, 0},   {65, 3, 0, 0},   {200, 3, 0, 0},
                         {1000, 3, 0, 0}, {200, 3, 1, 0},  {1000, 2, 1, 0}, {100, 96, 0, 0}, {17, 3, 2, 0},
                         {65, 3, 2, 0},   {1000, 3, 2, 0}, {4097, 2, 0, 0}, {333, 96, 2, 0}, {200, 3, 0, 4}};
  for (const auto& d : dims) {
    c.shapes.push_back(shape({{"tokens", d[0]}, {"heads", d[1]}, {"gate", d[2]}, {"v_scale_log10", d[3]}}));
  }
  c.variants = {variant(DiagonalPath::gate_bound, "gate_bound"), variant(DiagonalPath::exact, "exact_diagonal")};
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int tokens = int(s["tokens"]), heads = int(s["heads"]);
    const auto gate = Gate(s["gate"]);
    Inputs in = random_inputs(tokens, heads, gate, rng);
    const bool scaled = s["v_scale_log10"] != 0;
    if (scaled) {
      const double scale = std::pow(10.0, double(s["v_scale_log10"]));
      in.v *= float(scale);
      for (ref::MatrixD& st : in.state) st *= scale;
    }
    const Reference want = recurrent_reference(in, heads);
    if (scaled) {
      const float largest = want.final_state.cwiseAbs().maxCoeff();
      cpu.expect(largest > 1000.0f && largest < 20000.0f, "final state in the thousands");
    } else {
      // The initial state matters to the first chunk's outputs (far beyond the tolerance), so a kernel that ignored
      // it would fail.
      Inputs from_zero = in;
      for (ref::MatrixD& st : from_zero.state) st.setZero();
      const Index rows = std::min<Index>(tokens, 64);
      cpu.expect(normalized_error(recurrent_reference(from_zero, heads).out.topRows(rows), want.out.topRows(rows)) >
                     20 * kTf32Tolerance,
                 "the initial state matters");
    }
    // The gates reach what each path is for: bounded ones stay within the 40-nat tile limit (uniform ones come
    // close), the softplus one would overflow fp32 (88.7 nats) if its diagonal tiles were referenced to their middle
    // token.
    const double exponent = ref::kda_tile_max_exponent(in.g, heads);
    if (gate == Gate::softplus) {
      cpu.expect(exponent > 89.0, "softplus tiles past fp32's range", fmt::format("{}", exponent));
    } else {
      cpu.expect(exponent <= ref::kKdaTileExponentLimit, "within the tile limit", fmt::format("{}", exponent));
      if (gate == Gate::bounded_uniform) cpu.expect(exponent > 25.0, "close to the tile limit");
    }
    return [in, want, heads, gate, scaled](const Variant& v, Checks& gpu) {
      const float lower_bound = algorithm_of<DiagonalPath>(v) == DiagonalPath::exact ? 0.0f : lower_bound_of(gate);
      DeviceCall call(in, heads);
      DeviceBuffer<float> state(flatten(in.state));
      CUDA_CHECK(call.run(state, lower_bound));
      const double out_error = normalized_error(call.output(), want.out);
      gpu.near("out", out_error, kTf32Tolerance);
      gpu.near("state", state_error(state, want, heads), kTf32Tolerance);
      if (algorithm_of<DiagonalPath>(v) == DiagonalPath::gate_bound && !scaled) {
        // fp16 operands keep TF32's mantissa: at unit scale the error stays at the TF32 level, the largest error of a
        // CPU model of the algorithm with TF32 operand rounding (4.8e-4).
        gpu.near("out at the TF32 level", out_error, 1.5 * 4.8e-4);
      }
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> kda_chunk_cases() { return {kda_chunk_case()}; }

}  // namespace k3::gpu_test
