// KDA kernels against engine/reference/kda: the decode step (ref::kda_recurrent) with fp32 and bf16 state over
// consecutive in-place steps; the pre-processing (ref::short_conv_silu, l2_normalize_rows, kda_gate, sigmoid); the
// gate projections against the fp64 GEMM path they replace; the gated output norm (ref::kda_layer's step 5).
#include "engine/reference/basic_ops.h"
#include "engine/reference/kda.h"
#include "kernels/kda_decode.h"
#include "kernels/kda_gate_proj.h"
#include "kernels/kda_output_gate.h"
#include "kernels/kda_preprocess.h"
#include "tests/kernels/op_cases/cases.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

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
using kernels::KdaDecodeAlgorithm;

struct DecodeDims {
  int batch, heads, d;
};
DecodeDims decode_dims(const Shape& s) { return {int(s["batch"]), int(s["heads"]), int(s["d"])}; }

struct StepInputs {  // one step for the whole batch: row b is sequence b
  ref::Matrix q, k, v, g, beta;
};

StepInputs random_step(const DecodeDims& c, std::mt19937& rng) {
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
BatchState split_state(const ref::Matrix& flat, const DecodeDims& c) {
  BatchState s(c.batch, std::vector<ref::MatrixD>(c.heads));
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h) s[b][h] = flat.middleRows((Index(b) * c.heads + h) * c.d, c.d).cast<double>();
  return s;
}
ref::Matrix join_state(const BatchState& s, const DecodeDims& c) {
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
DecodeReference reference_steps(const DecodeDims& c, const ref::Matrix& initial_state,
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

// Runs the steps on the GPU from initial (already in the kernel's state dtype) and checks every step's output and the
// final state against want.
template <typename State>
void check_decode_on_gpu(const DecodeDims& c, const std::vector<State>& initial, const std::vector<StepInputs>& steps,
                         const DecodeReference& want, double tolerance, KdaDecodeAlgorithm algorithm, Checks& gpu) {
  DeviceBuffer<State> state(initial);
  for (size_t step = 0; step < steps.size(); ++step) {
    const StepInputs& in = steps[step];
    DeviceBuffer<float> q(to_f32(in.q)), k(to_f32(in.k)), v(to_f32(in.v)), g(to_f32(in.g)), beta(to_f32(in.beta));
    DeviceBuffer<float> out(in.q.size());
    cudaError_t status;
    if constexpr (std::is_same_v<State, float>) {
      status = kernels::kda_decode_step_f32state(q.get(), k.get(), v.get(), g.get(), beta.get(), state.get(), out.get(),
                                                 c.batch, c.heads, c.d, nullptr, algorithm);
    } else {
      status = kernels::kda_decode_step_bf16state(q.get(), k.get(), v.get(), g.get(), beta.get(), state.get(),
                                                  out.get(), c.batch, c.heads, c.d, nullptr, algorithm);
    }
    // The split-key versions need d a multiple of 32.
    if (algorithm == KdaDecodeAlgorithm::column_pair_split_key && c.d % 32 != 0) {
      gpu.equal("split key refuses d not a multiple of 32", status, cudaErrorInvalidValue);
      return;
    }
    CUDA_CHECK(status);
    gpu.near(fmt::format("step {}", step),
             normalized_error(from_f32(out.download(), c.batch, in.q.cols()), want.out[step]), tolerance);
  }
  const Index rows = want.final_state.rows(), cols = want.final_state.cols();
  ref::Matrix got_state;
  if constexpr (std::is_same_v<State, float>) {
    got_state = from_f32(state.download(), rows, cols);
  } else {
    got_state = from_bf16(state.download(), rows, cols);
  }
  gpu.near("final state", normalized_error(got_state, want.final_state), tolerance);
}

// (1, 2, 48) adds the half-warp blocks (d not a multiple of 32) with several blocks per head; (9, 3, 32) and (8, 2, 96)
// the split-key versions with one warp per block (d not a multiple of 64 or 128) at batches where automatic takes them.
std::vector<Shape> decode_shapes() {
  const int dims[][3] = {{1, 96, 128}, {3, 5, 64}, {16, 96, 128}, {2, 3, 16}, {1, 2, 48}, {9, 3, 32}, {8, 2, 96}};
  std::vector<Shape> out;
  for (const auto& d : dims) out.push_back(shape({{"batch", d[0]}, {"heads", d[1]}, {"d", d[2]}}));
  return out;
}

std::vector<Variant> decode_variants() {
  return {variant(KdaDecodeAlgorithm::automatic, "automatic"),
          variant(KdaDecodeAlgorithm::column_per_thread, "column_per_thread"),
          variant(KdaDecodeAlgorithm::column_pair_split_key, "column_pair_split_key")};
}

// The CPU half of both state dtypes: 5 steps from a random state, the reference from it and from its bf16 rounding.
// Checked here: the state really evolves (decay and updates move it well away from the start), and bf16 storage
// rounded after every step stays within half the bf16 tolerance of the unrounded reference.
struct DecodeData {
  DecodeDims c;
  ref::Matrix initial;  // fp32 state; the bf16 run starts from its rounding
  std::vector<StepInputs> steps;
  DecodeReference want;
};
DecodeData decode_reference(const Shape& s, std::mt19937& rng, Checks& cpu, bool bf16_state) {
  const DecodeDims c = decode_dims(s);
  DecodeData data{c, random_matrix(Index(c.batch) * c.heads * c.d, c.d, rng), {}, {}};
  for (int i = 0; i < kDecodeSteps; ++i) data.steps.push_back(random_step(c, rng));
  if (!bf16_state) {
    data.want = reference_steps(c, data.initial, data.steps);
    cpu.expect(normalized_error(data.want.final_state, data.initial) > 0.3, "the state evolves");
    return data;
  }
  const ref::Matrix initial_bf16 = round_to_bf16(data.initial);
  data.want = reference_steps(c, initial_bf16, data.steps);
  const DecodeReference stored_bf16 = reference_steps(c, initial_bf16, data.steps, /*round_each_step=*/true);
  for (int i = 0; i < kDecodeSteps; ++i) {
    cpu.near(fmt::format("bf16 storage, step {}", i), normalized_error(stored_bf16.out[i], data.want.out[i]),
             tolerance_for<__nv_bfloat16>() / 2);
  }
  cpu.near("bf16 storage, final state", normalized_error(stored_bf16.final_state, data.want.final_state),
           tolerance_for<__nv_bfloat16>() / 2);
  return data;
}

// The decode step at K3's width (96 heads × 128) over batches 1 … 256: the state is read and written once (fp32),
// q, k, v, g and the output once, β once; 7·d² + 2·d FLOPs per (sequence, head).
std::vector<Shape> decode_perf_shapes() {
  std::vector<Shape> out;
  for (int batch : {1, 16, 64, 256}) out.push_back(shape({{"batch", batch}, {"heads", 96}, {"d", 128}}));
  return out;
}
Cost decode_cost(const Shape& s) {
  const DecodeDims c = decode_dims(s);
  const double state_elems = double(c.batch) * c.heads * c.d * c.d;
  Cost cost;
  cost.bytes = 2.0 * state_elems * 4 + double(c.batch) * c.heads * c.d * 4 * 5 + c.batch * c.heads * 4.0;
  cost.flops = double(c.batch) * c.heads * (7.0 * c.d * c.d + 2.0 * c.d);
  cost.cls = EfficiencyClass::recurrent;
  cost.rotated_bytes = cost.bytes;
  return cost;
}
// Random state and inputs (zeros can run faster): q, k at the scale of L2-normalised rows, gates below 0; one state
// per set.
Launch decode_launch(const Shape& s, const Variant& v, int sets) {
  const DecodeDims c = decode_dims(s);
  const size_t state_elems = size_t(c.batch) * c.heads * c.d * c.d, vec = size_t(c.batch) * c.heads * c.d;
  auto state = rotated(sets, [&](int set) { return device_normal_f32(state_elems, 0.0f, 0.05f, 10 + set); });
  auto q = device_normal_f32(vec, 0.0f, 0.09f, 1), k = device_normal_f32(vec, 0.0f, 0.09f, 2);
  auto val = device_normal_f32(vec, 0.0f, 1.0f, 3), g = device_normal_f32(vec, -0.05f, 0.02f, 4);
  auto beta = device_uniform_f32(size_t(c.batch) * c.heads, 0.0f, 1.0f, 5);
  auto out = device_bytes<float>(vec, 0);
  const auto algorithm = algorithm_of<KdaDecodeAlgorithm>(v);
  return [=](int set, cudaStream_t stream) {
    CUDA_CHECK(kernels::kda_decode_step_f32state(q->get(), k->get(), val->get(), g->get(), beta->get(),
                                                 state[size_t(set)]->get(), out->get(), c.batch, c.heads, c.d, stream,
                                                 algorithm));
  };
}

// The KDA layers of K3 (69) in one decode graph while their states fit 16 GiB, fewer above (64 at batch 16 is
// 6.6 GB; batch 256, 1.6 GB a layer, takes 10).
int graph_layers(const Shape& s) {
  const double state_bytes = double(s["batch"]) * s["heads"] * s["d"] * s["d"] * 4;
  return int(std::min(69.0, std::max(2.0, std::floor(16.0 * (1 << 30) / state_bytes))));
}

OpCase kda_decode_case(bool bf16_state) {
  OpCase c{bf16_state ? "kda_decode_step_bf16state" : "kda_decode_step_f32state", OpKind::kda_recurrent};
  c.shapes = decode_shapes();
  c.variants = decode_variants();
  c.test = [bf16_state](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const DecodeData data = decode_reference(s, rng, cpu, bf16_state);
    return [data, bf16_state](const Variant& v, Checks& gpu) {
      const auto algorithm = algorithm_of<KdaDecodeAlgorithm>(v);
      if (bf16_state) {
        check_decode_on_gpu(data.c, to_bf16(data.initial), data.steps, data.want, tolerance_for<__nv_bfloat16>(),
                            algorithm, gpu);
      } else {
        check_decode_on_gpu(data.c, to_f32(data.initial), data.steps, data.want, tolerance_for<float>(), algorithm,
                            gpu);
      }
    };
  };
  if (!bf16_state) {
    c.perf_shapes = decode_perf_shapes();
    c.perf_variants = decode_variants();
    c.perf_name = [](const Shape& s, const Variant& v) {
      return fmt::format("kda_decode_step_f32state_{} batch {} heads {} d {}", v.name, s["batch"], s["heads"], s["d"]);
    };
    c.cost = decode_cost;
    c.perf = decode_launch;
  }
  return c;
}

// The decode step as it runs in the decode graph: one step per layer (each layer its own state) in one CUDA graph, so
// launch gaps of the host API are gone; the time per layer is the replay time / layers. Perf only: its test is the
// f32-state case's.
OpCase kda_decode_graph_case() {
  OpCase c = kda_decode_case(false);
  c.name = "kda_decode_step_f32state_graph";
  c.shapes = {};
  c.variants = {};
  c.test = nullptr;
  c.perf_variants = {decode_variants()[0]};
  c.perf_name = [](const Shape& s, const Variant&) {
    return fmt::format("kda_decode_step_f32state batch {}, per layer of a {}-layer CUDA graph", s["batch"],
                       graph_layers(s));
  };
  c.cost = [](const Shape& s) {
    Cost cost = decode_cost(s);
    cost.timing = Timing::layer_graph;
    cost.layers = graph_layers(s);
    return cost;
  };
  return c;
}

// The same-size ceiling beside each decode row: a device-to-device copy of the batch's state bytes (read + write
// counted), alone and per layer of a graph as above. Perf only.
OpCase kda_state_copy_case(bool graph) {
  OpCase c{graph ? "kda_state_copy_graph" : "kda_state_copy", OpKind::kda_recurrent};
  c.perf_shapes = decode_perf_shapes();
  c.perf_variants = single_variant();
  c.perf_name = [graph](const Shape& s, const Variant&) {
    return graph ? fmt::format(
                       "copy of the KDA state bytes, batch {}, per layer of a {}-layer CUDA graph "
                       "(cudaMemcpyAsync, read + write)",
                       s["batch"], graph_layers(s))
                 : fmt::format("copy of the KDA state bytes, batch {} (cudaMemcpyAsync, read + write)", s["batch"]);
  };
  c.cost = [graph](const Shape& s) {
    Cost cost;
    cost.bytes = 2.0 * s["batch"] * s["heads"] * s["d"] * s["d"] * 4;
    cost.cls = EfficiencyClass::recurrent;
    cost.rotated_bytes = decode_cost(s).bytes;  // the decode row's rotation: the same sets
    if (graph) {
      cost.timing = Timing::layer_graph;
      cost.layers = graph_layers(s);
    }
    return cost;
  };
  c.perf = [](const Shape& s, const Variant&, int sets) -> Launch {
    const size_t elems = size_t(s["batch"]) * s["heads"] * s["d"] * s["d"];
    auto state = rotated(sets, [&](int set) { return device_normal_f32(elems, 0.0f, 0.05f, 10 + set); });
    auto to = device_bytes<float>(elems, 0);
    return [=](int set, cudaStream_t stream) {
      CUDA_CHECK(cudaMemcpyAsync(to->get(), state[size_t(set)]->get(), elems * 4, cudaMemcpyDeviceToDevice, stream));
    };
  };
  return c;
}

// ---- Gate projections ----

// Products in fp64 of the bf16-valued inputs.
ref::Matrix product(const ref::Matrix& a, const ref::Matrix& w) {
  return (a.cast<double>() * w.cast<double>().transpose()).cast<float>();
}

OpCase kda_gate_proj_case() {
  OpCase c{"kda_gate_proj_bf16", OpKind::gemm};
  // K3 at 1 and 8 tokens; odd sizes: rank 72 (9 chunks: groups of 16 lanes with 7 idle), rank 256 (32-lane groups),
  // rank 8 (one lane per row), heads and projections that leave partial blocks, rows of x with padding.
  const int dims[][6] = {{1, 7168, 128, 12288, 96, 7168}, {8, 7168, 128, 12288, 96, 7168}, {3, 200, 24, 100, 5, 208},
                         {3, 96, 72, 130, 9, 96},         {2, 1032, 256, 515, 3, 1040},    {1, 8, 8, 1, 1, 8},
                         {7, 520, 40, 333, 7, 536}};
  for (const auto& d : dims) {
    c.shapes.push_back(shape({{"tokens", d[0]},
                              {"hidden", d[1]},
                              {"rank", d[2]},
                              {"projection", d[3]},
                              {"heads", d[4]},
                              {"x_stride", d[5]}}));
  }
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    struct Data {
      int tokens, hidden, rank, projection, heads;
      int64_t x_stride;
      ref::Matrix x_padded, w_fa, w_fb, w_b, fa, f, b;
    };
    Data d{int(s["tokens"]),
           int(s["hidden"]),
           int(s["rank"]),
           int(s["projection"]),
           int(s["heads"]),
           s["x_stride"],
           {},
           {},
           {},
           {},
           {},
           {},
           {}};
    d.x_padded = round_to_bf16(random_matrix(d.tokens, Index(d.x_stride), rng));
    d.w_fa = round_to_bf16(random_matrix(d.rank, d.hidden, rng, -0.05f, 0.05f));
    d.w_fb = round_to_bf16(random_matrix(d.projection, d.rank, rng, -0.2f, 0.2f));
    d.w_b = round_to_bf16(random_matrix(d.heads, d.hidden, rng, -0.05f, 0.05f));
    const ref::Matrix x = d.x_padded.leftCols(d.hidden);
    d.fa = round_to_bf16(product(x, d.w_fa));  // rounded once to bf16, as the GEMM's bf16 output is
    d.f = product(d.fa, d.w_fb);
    d.b = product(x, d.w_b);
    // The outputs are far from zero, so a kernel that wrote nothing (or zeros) fails.
    cpu.expect(d.f.norm() > 1e-3 && d.b.norm() > 1e-3, "reference away from zero");
    return [d](const Variant&, Checks& gpu) {
      DeviceBuffer<__nv_bfloat16> x(to_bf16(d.x_padded)), w_fa(to_bf16(d.w_fa)), w_fb(to_bf16(d.w_fb)),
          w_b(to_bf16(d.w_b));
      DeviceBuffer<__nv_bfloat16> fa(size_t(d.tokens) * d.rank);
      DeviceBuffer<float> f(size_t(d.tokens) * d.projection), b(size_t(d.tokens) * d.heads);
      gpu.expect(kernels::kda_gate_proj_supported(x.get(), d.x_stride, w_fa.get(), w_fb.get(), w_b.get(), d.tokens,
                                                  d.hidden, d.rank, d.projection, d.heads),
                 "supported");
      CUDA_CHECK(kernels::kda_gate_proj_bf16(x.get(), d.x_stride, w_fa.get(), w_fb.get(), w_b.get(), d.tokens, d.hidden,
                                             d.rank, d.projection, d.heads, fa.get(), f.get(), b.get(), nullptr));
      const ref::Matrix got_fa = from_bf16(fa.download(), d.tokens, d.rank);
      const ref::Matrix got_f = from_f32(f.download(), d.tokens, d.projection);
      const ref::Matrix got_b = from_f32(b.download(), d.tokens, d.heads);
      // fa may differ from the fp64 rounding by one bf16 step where the fp32 sum lands beside a rounding boundary;
      // f is checked at fp32 precision against the fa the kernel wrote, and at bf16 precision end to end.
      gpu.near("fa", normalized_error(got_fa, d.fa), tolerance_for<__nv_bfloat16>());
      gpu.near("f", normalized_error(got_f, product(got_fa, d.w_fb)), tolerance_for<float>());
      gpu.near("f end to end", normalized_error(got_f, d.f), tolerance_for<__nv_bfloat16>());
      gpu.near("b", normalized_error(got_b, d.b), tolerance_for<float>());
    };
  };
  // K3's widths (f_a 128 x 7168, f_b 12288 x 128, b_proj 96 x 7168: 6.3 MB of bf16 weights) for T = 1, 3, 8 tokens:
  // weight-bound, so the weights rotate over sets larger than L2, in both timings.
  for (const int tokens : {1, 3, 8}) {
    c.perf_shapes.push_back(shape({{"tokens", tokens},
                                   {"hidden", 7168},
                                   {"rank", 128},
                                   {"projection", 12288},
                                   {"heads", 96},
                                   {"x_stride", 7168}}));
  }
  c.perf_variants = single_variant();
  c.perf_name = [](const Shape& s, const Variant&) {
    return fmt::format("kda_gate_proj_warp_per_row T={} {} -> {} -> {}, beta {}", s["tokens"], s["hidden"], s["rank"],
                       s["projection"], s["heads"]);
  };
  // The weights once, x, fa, f and b once; 2 FLOPs per multiply-add of the three products.
  c.cost = [](const Shape& s) {
    const double hidden = double(s["hidden"]), rank = double(s["rank"]), projection = double(s["projection"]),
                 heads = double(s["heads"]), tokens = double(s["tokens"]);
    Cost cost;
    const double weight_bytes = 2.0 * (rank * hidden + projection * rank + heads * hidden);
    cost.bytes = weight_bytes + tokens * (hidden * 2.0 + rank * 4.0 + projection * 4.0 + heads * 4.0);
    cost.flops = 2.0 * tokens * ((rank + heads) * hidden + projection * rank);
    cost.timing = Timing::latency;
    cost.rotated_bytes = weight_bytes;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant&, int sets) -> Launch {
    const int tokens = int(s["tokens"]), hidden = int(s["hidden"]), rank = int(s["rank"]),
              projection = int(s["projection"]), heads = int(s["heads"]);
    auto w_fa = rotated(sets, [&](int) { return device_bytes<__nv_bfloat16>(size_t(rank) * hidden, 0x3C); });
    auto w_fb = rotated(sets, [&](int) { return device_bytes<__nv_bfloat16>(size_t(projection) * rank, 0x3C); });
    auto w_b = rotated(sets, [&](int) { return device_bytes<__nv_bfloat16>(size_t(heads) * hidden, 0x3C); });
    auto x = device_bytes<__nv_bfloat16>(size_t(tokens) * hidden, 0x3C);
    auto fa = device_bytes<__nv_bfloat16>(size_t(tokens) * rank, 0);
    auto f = device_bytes<float>(size_t(tokens) * projection, 0);
    auto b = device_bytes<float>(size_t(tokens) * heads, 0);
    return [=](int set, cudaStream_t stream) {
      const auto i = size_t(set);
      CUDA_CHECK(kernels::kda_gate_proj_bf16(x->get(), hidden, w_fa[i]->get(), w_fb[i]->get(), w_b[i]->get(), tokens,
                                             hidden, rank, projection, heads, fa->get(), f->get(), b->get(), stream));
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> kda_decode_cases() {
  return {kda_decode_case(false), kda_decode_case(true), kda_state_copy_case(false), kda_decode_graph_case(),
          kda_state_copy_case(true)};
}
std::vector<OpCase> kda_gate_proj_cases() { return {kda_gate_proj_case()}; }

}  // namespace k3::gpu_test
