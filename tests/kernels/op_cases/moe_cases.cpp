// MoE routing against the CPU: the router against ref::route (the same experts in the same order, ties to the lower
// id, weights to fp32 rounding) at K3's 896/16, Kimi Linear's 256/8, top-1, top_k = experts, warps with fewer
// experts than top_k, and odd sizes, its ids then bucketed by every MoeBucketAlgorithm; the bucketing against a
// stable counting sort written here (every slot once, offsets, the active list; invalid ids; one expert taking
// everything); the combine against a CPU loop. Perf rows of the router and the bucketing at K3's routing.
#include "engine/reference/basic_ops.h"
#include "kernels/moe_router.h"
#include "tests/kernels/op_cases/cases.h"
#include "tests/kernels/op_cases/moe_data.h"

#include <algorithm>
#include <numeric>

namespace k3::gpu_test {
namespace moe {

ref::Matrix router_logits(const ref::Matrix& x, const ref::Matrix& router) {
  ref::Matrix logits(x.rows(), router.rows());
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    for (Eigen::Index e = 0; e < router.rows(); ++e) {
      double logit = 0;
      for (Eigen::Index i = 0; i < x.cols(); ++i) logit += double(x(t, i)) * router(e, i);
      logits(t, e) = float(logit);
    }
  }
  return logits;
}

MoeSpec router_spec(int experts, int top_k, double scaling, bool bias) {
  MoeSpec s;
  s.num_experts = experts;
  s.top_k = top_k;
  s.routed_scaling_factor = scaling;
  s.score_correction_bias = bias;
  return s;
}

std::vector<Shape> router_shapes() {
  const int dims[][7] = {
      {64, 896, 16, 48, 1, 1000, 0},    {1, 896, 16, 48, 1, 1000, 0},  {200, 37, 5, 24, 1, 1000, 6},
      {1, 37, 5, 24, 1, 1000, 3},       {33, 256, 8, 32, 0, 2446, 0},  {9, 40, 1, 16, 0, 2446, 2},
      {8, 1024, 32, 16, 1, 1000, 100},  {7, 897, 16, 24, 1, 1000, 40}, {3, 33, 32, 16, 1, 1000, 4},
      {5, 32, 32, 16, 0, 1000, 0},      {4, 1, 1, 8, 1, 1000, 0},      {2, 300, 17, 16, 1, 1000, 120},
      {11, 1023, 31, 16, 0, 2446, 200},
  };
  std::vector<Shape> out;
  for (const auto& d : dims) {
    out.push_back(shape({{"tokens", d[0]},
                         {"experts", d[1]},
                         {"top_k", d[2]},
                         {"hidden", d[3]},
                         {"bias", d[4]},
                         {"scaling_milli", d[5]},
                         {"tied_pairs", d[6]}}));
  }
  return out;
}

RouterData router_data(const Shape& s, std::mt19937& rng) {
  const int experts = int(s["experts"]), hidden = int(s["hidden"]);
  const bool bias = s["bias"] != 0;
  ref::MoeWeights w;
  w.router = random_matrix(experts, hidden, rng, -0.5f, 0.5f);
  if (bias) w.correction_bias = random_matrix(experts, 1, rng, -0.05f, 0.05f).col(0);
  std::uniform_int_distribution<int> pick(0, experts - 1);
  for (int p = 0; p < s["tied_pairs"]; ++p) {
    const int a = pick(rng), b = pick(rng);
    w.router.row(b) = w.router.row(a);
    if (bias) w.correction_bias(b) = w.correction_bias(a);
  }
  const ref::Matrix x = random_matrix(s["tokens"], hidden, rng, -1.0f, 1.0f);
  RouterData d{router_logits(x, w.router), w.correction_bias, {}};
  d.routing = ref::route(router_spec(experts, int(s["top_k"]), double(s["scaling_milli"]) / 1000.0, bias), w, x);
  return d;
}

int boundary_ties(const Shape& s, const RouterData& d) {
  int ties = 0;
  for (int t = 0; t < s["tokens"]; ++t) {
    const auto& chosen = d.routing.experts[size_t(t)];
    const int last = chosen.back();
    for (int e = 0; e < s["experts"]; ++e) {
      if (std::find(chosen.begin(), chosen.end(), e) != chosen.end()) continue;
      const float bias_e = d.bias.size() > 0 ? d.bias(e) : 0.0f, bias_last = d.bias.size() > 0 ? d.bias(last) : 0.0f;
      if (ref::sigmoid(d.logits(t, e)) + bias_e == ref::sigmoid(d.logits(t, last)) + bias_last) ++ties;
    }
  }
  return ties;
}

DeviceBuckets::DeviceBuckets(int tokens, int top_k, int experts)
    : offsets(size_t(experts) + 1),
      slot_token(size_t(tokens) * top_k),
      slot_weight(size_t(tokens) * top_k),
      slot_of(size_t(tokens) * top_k),
      active(static_cast<size_t>(experts)),
      active_count(1),
      workspace(kernels::moe_bucket_workspace_bytes(tokens, top_k, experts)) {}

kernels::MoeBuckets DeviceBuckets::view() {
  return {offsets.get(), slot_token.get(), slot_weight.get(), slot_of.get(), active.get(), active_count.get()};
}

}  // namespace moe

namespace {

using namespace moe;
using kernels::MoeBucketAlgorithm;

// The bucketing by definition: pairs p = token·top_k + choice in increasing order, each appended to its expert.
struct ExpectedBuckets {
  std::vector<int32_t> offsets, slot_token, slot_of, active;
  std::vector<float> slot_weight;
  int32_t active_count = 0;
};

ExpectedBuckets expected_buckets(const std::vector<int32_t>& ids, const std::vector<float>& weights, int top_k,
                                 int experts) {
  ExpectedBuckets b;
  std::vector<int32_t> count(size_t(experts), 0);
  for (const int32_t e : ids) {
    if (e >= 0 && e < experts) ++count[size_t(e)];
  }
  b.offsets.assign(size_t(experts) + 1, 0);
  for (int e = 0; e < experts; ++e) b.offsets[size_t(e) + 1] = b.offsets[size_t(e)] + count[size_t(e)];
  std::vector<int32_t> cursor(b.offsets.begin(), b.offsets.end() - 1);
  b.slot_token.assign(ids.size(), -7);
  b.slot_weight.assign(ids.size(), 0.0f);
  b.slot_of.assign(ids.size(), -1);
  for (size_t p = 0; p < ids.size(); ++p) {
    const int32_t e = ids[p];
    if (e < 0 || e >= experts) continue;
    const int32_t slot = cursor[size_t(e)]++;
    b.slot_token[size_t(slot)] = int32_t(p / size_t(top_k));
    b.slot_weight[size_t(slot)] = weights[p];
    b.slot_of[p] = slot;
  }
  for (int e = 0; e < experts; ++e) {
    if (count[size_t(e)] > 0) b.active.push_back(e);
  }
  b.active_count = int32_t(b.active.size());
  b.active.resize(size_t(experts), -1);
  return b;
}

// Runs the bucketing on the device with `algorithm` and checks every output against the definition, plus the
// invariants; single_block must refuse more than kMoeBucketSingleBlockPairs pairs.
void check_bucketing(MoeBucketAlgorithm algorithm, const std::vector<int32_t>& ids, const std::vector<float>& weights,
                     int tokens, int top_k, int experts, const std::string& label, Checks& gpu) {
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<float> dweights(weights);
  DeviceBuckets out(tokens, top_k, experts);
  const cudaError_t status =
      kernels::moe_bucket_by_expert(dids.get(), dweights.get(), tokens, top_k, experts, out.view(), out.workspace.get(),
                                    out.workspace.size(), nullptr, algorithm);
  if (algorithm == MoeBucketAlgorithm::single_block && int64_t(tokens) * top_k > kernels::kMoeBucketSingleBlockPairs) {
    gpu.equal(label + "refused past the single block's pairs", status, cudaErrorInvalidValue);
    return;
  }
  CUDA_CHECK(status);
  const ExpectedBuckets want = expected_buckets(ids, weights, top_k, experts);
  const std::vector<int32_t> offsets = out.offsets.download(), slot_token = out.slot_token.download(),
                             slot_of = out.slot_of.download(), active = out.active.download();
  const std::vector<float> slot_weight = out.slot_weight.download();
  const int32_t active_count = out.active_count.download()[0];

  gpu.expect(offsets == want.offsets, label + "offsets");
  gpu.expect(slot_of == want.slot_of, label + "slot_of");
  gpu.expect(active == want.active, label + "active list");
  gpu.equal(label + "active count", active_count, want.active_count);
  const int32_t filled = want.offsets.back();
  int64_t bad_slots = 0;
  for (int32_t s = 0; s < filled; ++s) {
    bad_slots +=
        slot_token[size_t(s)] == want.slot_token[size_t(s)] && slot_weight[size_t(s)] == want.slot_weight[size_t(s)]
            ? 0
            : 1;
  }
  gpu.none(label + "slots' tokens and weights", bad_slots);
  // Invariants, stated directly: offsets monotone from 0; each valid pair in exactly one slot of its expert; the
  // active list increasing, each with a non-empty bucket.
  int64_t broken = offsets.front() == 0 ? 0 : 1;
  for (int e = 0; e < experts; ++e) broken += offsets[size_t(e)] <= offsets[size_t(e) + 1] ? 0 : 1;
  std::vector<int> seen(size_t(filled), 0);
  for (size_t p = 0; p < ids.size() && broken == 0; ++p) {
    const int32_t slot = slot_of[p];
    if (slot < 0) continue;
    if (slot >= filled || slot < offsets[size_t(ids[p])] || slot >= offsets[size_t(ids[p]) + 1] ||
        slot_token[size_t(slot)] != int32_t(p / size_t(top_k))) {
      ++broken;
      continue;
    }
    ++seen[size_t(slot)];
  }
  for (int32_t i = 0; i < active_count && broken == 0; ++i) {
    const int32_t e = active[size_t(i)];
    broken +=
        e >= 0 && e < experts && offsets[size_t(e) + 1] > offsets[size_t(e)] && (i == 0 || e > active[size_t(i) - 1])
            ? 0
            : 1;
  }
  gpu.none(label + "invariants", broken);
  gpu.expect(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }), label + "every slot filled once");
}

std::vector<Variant> bucket_algorithms() {
  return {variant(MoeBucketAlgorithm::automatic, "automatic"), variant(MoeBucketAlgorithm::warp_chunks, "warp_chunks"),
          variant(MoeBucketAlgorithm::single_block, "single_block")};
}

constexpr int kExperts = 896, kTopK = 16;  // K3's routing: top 16 of 896

std::vector<Shape> routing_perf_shapes() {
  std::vector<Shape> out;
  for (const int tokens : {1, 8, 64})
    out.push_back(shape({{"tokens", tokens}, {"experts", kExperts}, {"top_k", kTopK}}));
  return out;
}

// Logits of varied scores (a deterministic pattern in [-2, 2)), as kernel_bench has always timed them.
Shared<float> varied_logits(int tokens, int experts) {
  std::vector<float> host(size_t(tokens) * experts);
  for (size_t i = 0; i < host.size(); ++i) host[i] = float((i * 7919) % 1000) / 250.0f - 2.0f;
  return std::make_shared<DeviceBuffer<float>>(host);
}

// Sigmoid, bias, selection and renormalisation; latency-bound (its logits are the router GEMM's L2-resident output).
OpCase moe_route_case() {
  OpCase c{"moe_route_topk_sigmoid", OpKind::router};
  c.shapes = router_shapes();
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    const RouterData d = router_data(s, rng);
    return [s, d](const Variant&, Checks& gpu) {
      const int tokens = int(s["tokens"]), experts = int(s["experts"]), top_k = int(s["top_k"]);
      DeviceBuffer<float> dlogits(to_f32(d.logits));
      DeviceBuffer<float> dbias(std::vector<float>(d.bias.data(), d.bias.data() + d.bias.size()));
      DeviceBuffer<int32_t> dids(size_t(tokens) * top_k);
      DeviceBuffer<float> dweights(size_t(tokens) * top_k);
      CUDA_CHECK(kernels::moe_route_topk_sigmoid(dlogits.get(), s["bias"] != 0 ? dbias.get() : nullptr, tokens, experts,
                                                 top_k, float(double(s["scaling_milli"]) / 1000.0), dids.get(),
                                                 dweights.get(), nullptr));
      const std::vector<int32_t> ids = dids.download();
      const std::vector<float> weights = dweights.download();
      int64_t bad_ids = 0, bad_weights = 0;
      for (int t = 0; t < tokens; ++t) {
        for (int k = 0; k < top_k; ++k) {
          const size_t i = size_t(t) * top_k + k;
          bad_ids += ids[i] == d.routing.experts[size_t(t)][size_t(k)] ? 0 : 1;
          const float want = d.routing.weights[size_t(t)][size_t(k)];
          bad_weights += std::abs(weights[i] - want) <= 1e-6 * std::abs(want) ? 0 : 1;
        }
      }
      gpu.none("experts as ref::route, in its order", bad_ids);
      gpu.none("weights within 1e-6 relative", bad_weights);
      if (bad_ids != 0) return;
      for (const Variant& b : bucket_algorithms()) {
        check_bucketing(algorithm_of<MoeBucketAlgorithm>(b), ids, weights, tokens, top_k, experts,
                        "bucketing the routed ids, " + b.name + ": ", gpu);
      }
    };
  };
  c.perf_shapes = routing_perf_shapes();
  c.perf_variants = {Variant{"block_per_token", 0}};
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("moe_route_{} T={} top {} of {}", v.name, s["tokens"], s["top_k"], s["experts"]);
  };
  // The logits and bias read, an id and a weight written per choice; 5 FLOPs a logit.
  c.cost = [](const Shape& s) {
    Cost cost;
    cost.bytes = s["tokens"] * s["experts"] * 4.0 + s["experts"] * 4.0 + s["tokens"] * s["top_k"] * 8.0;
    cost.flops = 5.0 * s["tokens"] * s["experts"];
    cost.timing = Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant&, int) -> Launch {
    const int tokens = int(s["tokens"]), experts = int(s["experts"]), top_k = int(s["top_k"]);
    auto logits = varied_logits(tokens, experts);
    auto bias = device_bytes<float>(size_t(experts), 0);
    auto ids = device_bytes<int32_t>(size_t(tokens) * top_k, 0);
    auto weights = device_bytes<float>(size_t(tokens) * top_k, 0);
    return [=](int, cudaStream_t stream) {
      CUDA_CHECK(kernels::moe_route_topk_sigmoid(logits->get(), bias->get(), tokens, experts, top_k, 1.0f, ids->get(),
                                                 weights->get(), stream));
    };
  };
  return c;
}

// The ids of the bucketing case's "pattern" dimension.
enum class Pattern { random, one_expert, invalid_and_duplicates };

OpCase moe_bucket_case() {
  OpCase c{"moe_bucket_by_expert", OpKind::moe_experts};
  // tokens, top_k, experts, pattern; the last: single_block's limit.
  const int dims[][4] = {{8192, 16, 896, 0}, {1, 16, 896, 0}, {200, 5, 37, 0},  {3000, 7, 1024, 1},
                         {77, 3, 11, 2},     {0, 16, 896, 0}, {64, 16, 896, 0}, {64, 16, 1024, 1}};
  for (const auto& d : dims) {
    c.shapes.push_back(shape({{"tokens", d[0]}, {"top_k", d[1]}, {"experts", d[2]}, {"pattern", d[3]}}));
  }
  c.variants = bucket_algorithms();
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int tokens = int(s["tokens"]), top_k = int(s["top_k"]), experts = int(s["experts"]);
    const auto pattern = Pattern(s["pattern"]);
    const size_t pairs = size_t(tokens) * top_k;
    std::uniform_int_distribution<int32_t> pick(0, experts - 1), wild(-3, experts + 2);
    std::uniform_real_distribution<float> weight(0.01f, 1.0f);
    std::vector<int32_t> ids;
    std::vector<float> weights;
    for (size_t i = 0; i < pairs; ++i) {
      ids.push_back(pattern == Pattern::one_expert ? 5 : pattern == Pattern::random ? pick(rng) : wild(rng));
      weights.push_back(weight(rng));
    }
    const ExpectedBuckets want = expected_buckets(ids, weights, top_k, experts);
    cpu.equal("pairs without a slot: the invalid ids", size_t(std::count(want.slot_of.begin(), want.slot_of.end(), -1)),
              pairs - size_t(want.offsets.back()));
    return [=](const Variant& v, Checks& gpu) {
      check_bucketing(algorithm_of<MoeBucketAlgorithm>(v), ids, weights, tokens, top_k, experts, "", gpu);
    };
  };
  return c;
}

// The token→expert bucketing of K3's routing, timed (warp_chunks: three launches; single_block: one, up to
// kMoeBucketSingleBlockPairs pairs).
OpCase moe_bucket_perf_case(MoeBucketAlgorithm algorithm, const char* name) {
  OpCase c{fmt::format("moe_bucket_by_expert_{}", name), OpKind::moe_experts};
  for (const Shape& s : routing_perf_shapes()) {
    if (algorithm != MoeBucketAlgorithm::single_block ||
        s["tokens"] * s["top_k"] <= kernels::kMoeBucketSingleBlockPairs) {
      c.perf_shapes.push_back(s);
    }
  }
  c.perf_variants = {variant(algorithm, name)};
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("moe_bucket_by_expert_{} T={} top {} of {}", v.name, s["tokens"], s["top_k"], s["experts"]);
  };
  // Ids and weights read (8 bytes a pair), offsets, slot token/weight/of (12 bytes a pair), the active list and count.
  c.cost = [](const Shape& s) {
    const double slots = double(s["tokens"]) * s["top_k"];
    Cost cost;
    cost.bytes = slots * 8.0 + (s["experts"] + 1) * 4.0 + slots * 12.0 + s["experts"] * 4.0 + 4.0;
    cost.timing = Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int) -> Launch {
    const int tokens = int(s["tokens"]), experts = int(s["experts"]), top_k = int(s["top_k"]);
    const size_t slots = size_t(tokens) * top_k;
    auto logits = varied_logits(tokens, experts);
    auto bias = device_bytes<float>(size_t(experts), 0);
    auto ids = device_bytes<int32_t>(slots, 0);
    auto weights = device_bytes<float>(slots, 0);
    CUDA_CHECK(kernels::moe_route_topk_sigmoid(logits->get(), bias->get(), tokens, experts, top_k, 1.0f, ids->get(),
                                               weights->get(), nullptr));
    auto offsets = device_bytes<int32_t>(size_t(experts) + 1, 0), slot_token = device_bytes<int32_t>(slots, 0);
    auto slot_weight = device_bytes<float>(slots, 0);
    auto slot_of = device_bytes<int32_t>(slots, 0), active = device_bytes<int32_t>(size_t(experts), 0);
    auto active_count = device_bytes<int32_t>(1, 0);
    const size_t workspace_bytes = kernels::moe_bucket_workspace_bytes(tokens, top_k, experts);
    auto workspace = device_bytes<uint8_t>(workspace_bytes, 0);
    const auto algorithm = algorithm_of<MoeBucketAlgorithm>(v);
    return [=](int, cudaStream_t stream) {
      const kernels::MoeBuckets buckets{offsets->get(), slot_token->get(), slot_weight->get(),
                                        slot_of->get(), active->get(),     active_count->get()};
      CUDA_CHECK(kernels::moe_bucket_by_expert(ids->get(), weights->get(), tokens, top_k, experts, buckets,
                                               workspace->get(), workspace_bytes, stream, algorithm));
    };
  };
  return c;
}

// The expert outputs' element type.
enum class ExpertOut { f32, bf16 };

OpCase moe_combine_case() {
  OpCase c{"moe_combine", OpKind::moe_experts};
  const int dims[][3] = {{64, 16, 3584}, {1, 16, 3584}, {200, 5, 37}, {3, 32, 1000}};
  for (const auto& d : dims) c.shapes.push_back(shape({{"tokens", d[0]}, {"top_k", d[1]}, {"width", d[2]}}));
  c.variants = {variant(ExpertOut::f32, "f32"), variant(ExpertOut::bf16, "bf16")};
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int tokens = int(s["tokens"]), top_k = int(s["top_k"]), width = int(s["width"]);
    const int slots = tokens * top_k;
    std::vector<int32_t> slot_of(static_cast<size_t>(slots));
    std::iota(slot_of.begin(), slot_of.end(), 0);
    std::shuffle(slot_of.begin(), slot_of.end(), rng);
    slot_of[size_t(slots) / 2] = -1;  // a pair that got no slot adds nothing
    std::vector<float> weights(static_cast<size_t>(slots));
    std::uniform_real_distribution<float> weight(0.0f, 1.0f);
    for (float& w : weights) w = weight(rng);
    const ref::Matrix out = round_to_bf16(random_matrix(slots, width, rng, -2.0f, 2.0f));
    // y[t] = Σ_c w[t, c] · out[slot_of[t, c]] in fp64.
    ref::MatrixD y = ref::MatrixD::Zero(tokens, width);
    for (int t = 0; t < tokens; ++t) {
      for (int k = 0; k < top_k; ++k) {
        const int32_t slot = slot_of[size_t(t) * top_k + k];
        if (slot >= 0) y.row(t) += double(weights[size_t(t) * top_k + k]) * out.row(slot).cast<double>();
      }
    }
    const ref::Matrix expected = y.cast<float>();
    cpu.expect(expected.allFinite(), "reference finite");
    return [=](const Variant& v, Checks& gpu) {
      DeviceBuffer<int32_t> dslot_of(slot_of);
      DeviceBuffer<float> dweights(weights), dy(size_t(tokens) * width);
      if (algorithm_of<ExpertOut>(v) == ExpertOut::f32) {
        DeviceBuffer<float> dout(to_f32(out));
        CUDA_CHECK(kernels::moe_combine_f32(dout.get(), dslot_of.get(), dweights.get(), tokens, top_k, width, dy.get(),
                                            nullptr));
      } else {
        DeviceBuffer<__nv_bfloat16> dout(to_bf16(out));
        CUDA_CHECK(kernels::moe_combine_bf16(dout.get(), dslot_of.get(), dweights.get(), tokens, top_k, width, dy.get(),
                                             nullptr));
      }
      gpu.near("y", normalized_error(from_f32(dy.download(), tokens, width), expected), tolerance_for<float>());
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> moe_routing_cases() {
  return {moe_route_case(), moe_bucket_perf_case(MoeBucketAlgorithm::warp_chunks, "warp_chunks"),
          moe_bucket_perf_case(MoeBucketAlgorithm::single_block, "single_block"), moe_bucket_case(),
          moe_combine_case()};
}

}  // namespace k3::gpu_test
