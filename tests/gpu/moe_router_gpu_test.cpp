// MoE router, bucketing and combine against the CPU: the router (every MoeRouterAlgorithm) against ref::route (the
// same experts in the same order, ties to the lower id, weights to fp32 rounding) at K3's 896/16, Kimi Linear's
// 256/8, top-1, top_k = experts, warps with fewer experts than top_k, and odd sizes;
// the bucketing against a stable counting sort written here (every slot once, offsets, the active list; invalid
// ids; one expert taking everything); the combine against a CPU loop; and the three together, with the expert
// outputs computed per slot on the CPU, against ref::moe_forward.
#include "core/model_config.h"
#include "engine/reference/basic_ops.h"
#include "engine/reference/moe.h"
#include "gpu_harness.h"
#include "kernels/moe_bucket.h"
#include "kernels/moe_router.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace k3::gpu_test {
namespace {

// Logits as ref::route forms them: fp64 dot products rounded to fp32.
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

// Device outputs of moe_bucket_by_expert.
struct DeviceBuckets {
  DeviceBuckets(int tokens, int top_k, int experts)
      : offsets(size_t(experts) + 1), slot_token(size_t(tokens) * top_k), slot_weight(size_t(tokens) * top_k),
        slot_of(size_t(tokens) * top_k), active(static_cast<size_t>(experts)), active_count(1),
        workspace(kernels::moe_bucket_workspace_bytes(tokens, top_k, experts)) {}
  kernels::MoeBuckets view() {
    return {offsets.get(), slot_token.get(), slot_weight.get(), slot_of.get(), active.get(), active_count.get()};
  }
  DeviceBuffer<int32_t> offsets, slot_token;
  DeviceBuffer<float> slot_weight;
  DeviceBuffer<int32_t> slot_of, active, active_count;
  DeviceBuffer<uint8_t> workspace;
};

const char* name_of(kernels::MoeBucketAlgorithm a) {
  switch (a) {
    case kernels::MoeBucketAlgorithm::automatic: return "automatic";
    case kernels::MoeBucketAlgorithm::warp_chunks: return "warp_chunks";
    case kernels::MoeBucketAlgorithm::single_block: return "single_block";
  }
  return "?";
}

// Runs the bucketing on the device with `algorithm` and checks every output against the definition, plus the
// invariants.
void check_bucketing_with(kernels::MoeBucketAlgorithm algorithm, const std::vector<int32_t>& ids,
                          const std::vector<float>& weights, int tokens, int top_k, int experts,
                          const std::string& label) {
  const ExpectedBuckets want = expected_buckets(ids, weights, top_k, experts);
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<float> dweights(weights);
  DeviceBuckets out(tokens, top_k, experts);
  CUDA_CHECK(kernels::moe_bucket_by_expert(dids.get(), dweights.get(), tokens, top_k, experts, out.view(),
                                           out.workspace.get(), out.workspace.size(), nullptr, algorithm));
  const std::vector<int32_t> offsets = out.offsets.download(), slot_token = out.slot_token.download(),
                             slot_of = out.slot_of.download(), active = out.active.download();
  const std::vector<float> slot_weight = out.slot_weight.download();
  const int32_t active_count = out.active_count.download()[0];

  EXPECT_EQ(offsets, want.offsets) << label;
  EXPECT_EQ(slot_of, want.slot_of) << label;
  EXPECT_EQ(active, want.active) << label;
  EXPECT_EQ(active_count, want.active_count) << label;
  const int32_t filled = want.offsets.back();
  for (int32_t s = 0; s < filled; ++s) {
    ASSERT_EQ(slot_token[size_t(s)], want.slot_token[size_t(s)]) << label << " slot " << s;
    ASSERT_EQ(slot_weight[size_t(s)], want.slot_weight[size_t(s)]) << label << " slot " << s;
  }
  // Invariants, stated directly: offsets monotone from 0; each valid pair in exactly one slot of its expert.
  ASSERT_EQ(offsets.front(), 0) << label;
  for (int e = 0; e < experts; ++e) ASSERT_LE(offsets[size_t(e)], offsets[size_t(e) + 1]) << label;
  std::vector<int> seen(size_t(filled), 0);
  for (size_t p = 0; p < ids.size(); ++p) {
    if (slot_of[p] < 0) continue;
    ASSERT_LT(slot_of[p], filled) << label;
    ++seen[size_t(slot_of[p])];
    ASSERT_GE(slot_of[p], offsets[size_t(ids[p])]) << label;
    ASSERT_LT(slot_of[p], offsets[size_t(ids[p]) + 1]) << label;
    ASSERT_EQ(slot_token[size_t(slot_of[p])], int32_t(p / size_t(top_k))) << label;
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << label;
  for (int32_t i = 0; i < active_count; ++i) {
    const int32_t e = active[size_t(i)];
    ASSERT_GT(offsets[size_t(e) + 1], offsets[size_t(e)]) << label;
    if (i > 0) {
      ASSERT_GT(e, active[size_t(i) - 1]) << label;
    }
  }
}

// check_bucketing_with for every version; single_block must refuse more than kMoeBucketSingleBlockPairs pairs.
void check_bucketing(const std::vector<int32_t>& ids, const std::vector<float>& weights, int tokens, int top_k,
                     int experts, const std::string& label) {
  for (const kernels::MoeBucketAlgorithm algorithm :
       {kernels::MoeBucketAlgorithm::automatic, kernels::MoeBucketAlgorithm::warp_chunks,
        kernels::MoeBucketAlgorithm::single_block}) {
    if (algorithm == kernels::MoeBucketAlgorithm::single_block &&
        int64_t(tokens) * top_k > kernels::kMoeBucketSingleBlockPairs) {
      DeviceBuckets out(tokens, top_k, experts);
      DeviceBuffer<int32_t> dids(ids);
      DeviceBuffer<float> dweights(weights);
      EXPECT_EQ(kernels::moe_bucket_by_expert(dids.get(), dweights.get(), tokens, top_k, experts, out.view(),
                                              out.workspace.get(), out.workspace.size(), nullptr, algorithm),
                cudaErrorInvalidValue)
          << label;
      continue;
    }
    check_bucketing_with(algorithm, ids, weights, tokens, top_k, experts, label + " " + name_of(algorithm));
  }
}

struct RouterCase {
  int tokens, experts, top_k, hidden;
  bool bias;
  double scaling;
  int tied_pairs;  // pairs of experts given the same router row (and bias): exact ties
};

TEST(GpuMoeRouter, MatchesReferenceRoute) {
  const RouterCase cases[] = {
      {64, 896, 16, 48, true, 1.0, 0},       {1, 896, 16, 48, true, 1.0, 0},    {200, 37, 5, 24, true, 1.0, 6},
      {1, 37, 5, 24, true, 1.0, 3},          {33, 256, 8, 32, false, 2.446, 0}, {9, 40, 1, 16, false, 2.446, 2},
      {8, 1024, 32, 16, true, 1.0, 100},     {7, 897, 16, 24, true, 1.0, 40},   {3, 33, 32, 16, true, 1.0, 4},
      {5, 32, 32, 16, false, 1.0, 0},        {4, 1, 1, 8, true, 1.0, 0},        {2, 300, 17, 16, true, 1.0, 120},
      {11, 1023, 31, 16, false, 2.446, 200},
  };
  std::mt19937 rng(20261205);
  struct Prepared {
    RouterCase c;
    ref::Matrix logits;
    ref::Vector bias;
    ref::Routing routing;
  };
  std::vector<Prepared> prepared;
  int boundary_ties = 0;  // tokens whose last chosen expert ties with an unchosen one
  for (const RouterCase& c : cases) {
    ref::MoeWeights w;
    w.router = random_matrix(c.experts, c.hidden, rng, -0.5f, 0.5f);
    if (c.bias) w.correction_bias = random_matrix(c.experts, 1, rng, -0.05f, 0.05f).col(0);
    std::uniform_int_distribution<int> pick(0, c.experts - 1);
    for (int p = 0; p < c.tied_pairs; ++p) {
      const int a = pick(rng), b = pick(rng);
      w.router.row(b) = w.router.row(a);
      if (c.bias) w.correction_bias(b) = w.correction_bias(a);
    }
    const ref::Matrix x = random_matrix(c.tokens, c.hidden, rng, -1.0f, 1.0f);
    Prepared p{c, router_logits(x, w.router), w.correction_bias, {}};
    p.routing = ref::route(router_spec(c.experts, c.top_k, c.scaling, c.bias), w, x);
    for (int t = 0; t < c.tokens; ++t) {
      const int last = p.routing.experts[size_t(t)].back();
      for (int e = 0; e < c.experts; ++e) {
        const auto& chosen = p.routing.experts[size_t(t)];
        if (std::find(chosen.begin(), chosen.end(), e) != chosen.end()) continue;
        const float bias_e = c.bias ? p.bias(e) : 0.0f, bias_last = c.bias ? p.bias(last) : 0.0f;
        if (ref::sigmoid(p.logits(t, e)) + bias_e == ref::sigmoid(p.logits(t, last)) + bias_last) ++boundary_ties;
      }
    }
    prepared.push_back(std::move(p));
  }
  EXPECT_GT(boundary_ties, 0) << "the planted ties never decide a selection";
  K3_REQUIRE_GPU();
  for (const Prepared& p : prepared) {
    for (const kernels::MoeRouterAlgorithm algorithm : {kernels::MoeRouterAlgorithm::block_per_token}) {
      const RouterCase& c = p.c;
      const std::string label =
          fmt::format("{} T={} E={} k={}",
                      algorithm == kernels::MoeRouterAlgorithm::block_per_token ? "block_per_token" : "warp_per_token",
                      c.tokens, c.experts, c.top_k);
      DeviceBuffer<float> dlogits(to_f32(p.logits));
      DeviceBuffer<float> dbias(std::vector<float>(p.bias.data(), p.bias.data() + p.bias.size()));
      DeviceBuffer<int32_t> dids(size_t(c.tokens) * c.top_k);
      DeviceBuffer<float> dweights(size_t(c.tokens) * c.top_k);
      CUDA_CHECK(kernels::moe_route_topk_sigmoid(dlogits.get(), c.bias ? dbias.get() : nullptr, c.tokens, c.experts,
                                                 c.top_k, float(c.scaling), dids.get(), dweights.get(), nullptr,
                                                 algorithm));
      const std::vector<int32_t> ids = dids.download();
      const std::vector<float> weights = dweights.download();
      for (int t = 0; t < c.tokens; ++t) {
        for (int k = 0; k < c.top_k; ++k) {
          const size_t i = size_t(t) * c.top_k + k;
          ASSERT_EQ(ids[i], p.routing.experts[size_t(t)][size_t(k)]) << label << " token " << t << " choice " << k;
          const float want = p.routing.weights[size_t(t)][size_t(k)];
          ASSERT_NEAR(weights[i], want, 1e-6 * std::abs(want)) << label << " token " << t << " choice " << k;
        }
      }
      check_bucketing(ids, weights, c.tokens, c.top_k, c.experts, label + " (bucketing the routed ids)");
    }
  }
}

TEST(GpuMoeRouter, RejectsInvalidShapes) {
  K3_REQUIRE_GPU();
  DeviceBuffer<float> logits(64), weights(64);
  DeviceBuffer<int32_t> ids(64);
  EXPECT_EQ(kernels::moe_route_topk_sigmoid(logits.get(), nullptr, 1, 1025, 4, 1.0f, ids.get(), weights.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::moe_route_topk_sigmoid(logits.get(), nullptr, 1, 8, 9, 1.0f, ids.get(), weights.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::moe_route_topk_sigmoid(logits.get(), nullptr, 1, 64, 33, 1.0f, ids.get(), weights.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::moe_route_topk_sigmoid(logits.get(), nullptr, 0, 64, 4, 1.0f, ids.get(), weights.get(), nullptr),
            cudaSuccess);
}

TEST(GpuMoeBucket, StableCountingSortAndInvariants) {
  struct Case {
    int tokens, top_k, experts;
    const char* pattern;  // "random", "one_expert", "invalid_and_duplicates"
  };
  const Case cases[] = {{8192, 16, 896, "random"},         {1, 16, 896, "random"},
                        {200, 5, 37, "random"},            {3000, 7, 1024, "one_expert"},
                        {77, 3, 11, "invalid_and_duplicates"}, {0, 16, 896, "random"},
                        {64, 16, 896, "random"},           {64, 16, 1024, "one_expert"}};  // single_block's limit
  std::mt19937 rng(20261206);
  struct Prepared {
    Case c;
    std::vector<int32_t> ids;
    std::vector<float> weights;
  };
  std::vector<Prepared> prepared;
  for (const Case& c : cases) {
    Prepared p{c, {}, {}};
    const size_t pairs = size_t(c.tokens) * c.top_k;
    std::uniform_int_distribution<int32_t> pick(0, c.experts - 1), wild(-3, c.experts + 2);
    std::uniform_real_distribution<float> weight(0.01f, 1.0f);
    for (size_t i = 0; i < pairs; ++i) {
      const std::string pattern = c.pattern;
      p.ids.push_back(pattern == "one_expert" ? 5 : pattern == "random" ? pick(rng) : wild(rng));
      p.weights.push_back(weight(rng));
    }
    const ExpectedBuckets want = expected_buckets(p.ids, p.weights, c.top_k, c.experts);
    ASSERT_EQ(size_t(std::count(want.slot_of.begin(), want.slot_of.end(), -1)),
              pairs - size_t(want.offsets.back()));
    prepared.push_back(std::move(p));
  }
  K3_REQUIRE_GPU();
  for (const Prepared& p : prepared) {
    check_bucketing(p.ids, p.weights, p.c.tokens, p.c.top_k, p.c.experts,
                    fmt::format("T={} k={} E={} {}", p.c.tokens, p.c.top_k, p.c.experts, p.c.pattern));
  }
}

// y[t] = Σ_c w[t, c] · out[slot_of[t, c]] in fp64.
ref::Matrix combine_on_cpu(const ref::Matrix& expert_out, const std::vector<int32_t>& slot_of,
                           const std::vector<float>& weights, int tokens, int top_k) {
  ref::MatrixD y = ref::MatrixD::Zero(tokens, expert_out.cols());
  for (int t = 0; t < tokens; ++t) {
    for (int c = 0; c < top_k; ++c) {
      const int32_t slot = slot_of[size_t(t) * top_k + c];
      if (slot >= 0) y.row(t) += double(weights[size_t(t) * top_k + c]) * expert_out.row(slot).cast<double>();
    }
  }
  return y.cast<float>();
}

TEST(GpuMoeCombine, MatchesCpuLoop) {
  struct Case {
    int tokens, top_k, width;
  };
  const Case cases[] = {{64, 16, 3584}, {1, 16, 3584}, {200, 5, 37}, {3, 32, 1000}};
  std::mt19937 rng(20261207);
  for (const Case& c : cases) {
    const int slots = c.tokens * c.top_k;
    std::vector<int32_t> slot_of(static_cast<size_t>(slots));
    std::iota(slot_of.begin(), slot_of.end(), 0);
    std::shuffle(slot_of.begin(), slot_of.end(), rng);
    slot_of[size_t(slots) / 2] = -1;  // a pair that got no slot adds nothing
    std::vector<float> weights(static_cast<size_t>(slots));
    std::uniform_real_distribution<float> weight(0.0f, 1.0f);
    for (float& w : weights) w = weight(rng);
    const ref::Matrix out = round_to_bf16(random_matrix(slots, c.width, rng, -2.0f, 2.0f));
    const ref::Matrix expected = combine_on_cpu(out, slot_of, weights, c.tokens, c.top_k);
    ASSERT_TRUE(expected.allFinite());
    K3_REQUIRE_GPU();
    const std::string label = fmt::format("T={} k={} width={}", c.tokens, c.top_k, c.width);
    DeviceBuffer<int32_t> dslot_of(slot_of);
    DeviceBuffer<float> dweights(weights), dout(to_f32(out)), dy(size_t(c.tokens) * c.width);
    DeviceBuffer<__nv_bfloat16> dout_bf16(to_bf16(out));
    CUDA_CHECK(kernels::moe_combine_f32(dout.get(), dslot_of.get(), dweights.get(), c.tokens, c.top_k, c.width,
                                        dy.get(), nullptr));
    EXPECT_LE(normalized_error(from_f32(dy.download(), c.tokens, c.width), expected), tolerance_for<float>()) << label;
    DeviceBuffer<float> dy2(size_t(c.tokens) * c.width);
    CUDA_CHECK(kernels::moe_combine_bf16(dout_bf16.get(), dslot_of.get(), dweights.get(), c.tokens, c.top_k, c.width,
                                         dy2.get(), nullptr));
    EXPECT_LE(normalized_error(from_f32(dy2.download(), c.tokens, c.width), expected), tolerance_for<float>())
        << label << " (bf16 expert outputs)";
  }
}

// Router → bucketing → per-slot expert outputs (CPU, ref::glu_mlp_situ on the slot's x row) → combine, against
// ref::moe_forward on a plain (not latent) SiTU MoE without shared experts.
TEST(GpuMoeRouter, PipelineMatchesMoeForward) {
  ModelConfig cfg;
  cfg.name = "moe-gpu-test";
  cfg.hidden_size = 24;
  cfg.rms_norm_eps = 1e-5;
  cfg.activation = Activation::situ;
  cfg.situ_beta = 4;
  cfg.situ_linear_beta = 25;
  MoeSpec s = router_spec(37, 5, 1.0, true);
  s.expert_intermediate = 8;
  cfg.moe = s;
  const int tokens = 200, h = cfg.hidden_size;
  std::mt19937 rng(20261208);
  ref::MoeWeights w;
  w.router = random_matrix(s.num_experts, h, rng, -0.5f, 0.5f);
  w.correction_bias = random_matrix(s.num_experts, 1, rng, -0.05f, 0.05f).col(0);
  for (int e = 0; e < s.num_experts; ++e) {
    w.w1.push_back(random_matrix(s.expert_intermediate, h, rng, -0.7f, 0.7f));
    w.w3.push_back(random_matrix(s.expert_intermediate, h, rng, -0.7f, 0.7f));
    w.w2.push_back(random_matrix(h, s.expert_intermediate, rng, -0.7f, 0.7f));
  }
  const ref::Matrix x = random_matrix(tokens, h, rng, -1.0f, 1.0f);
  const ref::Matrix expected = ref::moe_forward(cfg, w, x);
  ASSERT_TRUE(expected.allFinite());
  K3_REQUIRE_GPU();
  const int slots = tokens * s.top_k;
  DeviceBuffer<float> dlogits(to_f32(router_logits(x, w.router)));
  DeviceBuffer<float> dbias(std::vector<float>(w.correction_bias.data(), w.correction_bias.data() + s.num_experts));
  DeviceBuffer<int32_t> dids(static_cast<size_t>(slots));
  DeviceBuffer<float> dweights(static_cast<size_t>(slots));
  CUDA_CHECK(kernels::moe_route_topk_sigmoid(dlogits.get(), dbias.get(), tokens, s.num_experts, s.top_k,
                                             float(s.routed_scaling_factor), dids.get(), dweights.get(), nullptr));
  DeviceBuckets buckets(tokens, s.top_k, s.num_experts);
  CUDA_CHECK(kernels::moe_bucket_by_expert(dids.get(), dweights.get(), tokens, s.top_k, s.num_experts,
                                           buckets.view(), buckets.workspace.get(), buckets.workspace.size(), nullptr));
  const std::vector<int32_t> offsets = buckets.offsets.download(), slot_token = buckets.slot_token.download();
  ASSERT_EQ(offsets.back(), slots);
  ref::Matrix expert_out(slots, h);
  for (int e = 0; e < s.num_experts; ++e) {
    for (int32_t slot = offsets[size_t(e)]; slot < offsets[size_t(e) + 1]; ++slot) {
      expert_out.row(slot) =
          ref::glu_mlp_situ(x.row(slot_token[size_t(slot)]), w.w1[size_t(e)], w.w3[size_t(e)], w.w2[size_t(e)],
                            cfg.situ_beta, cfg.situ_linear_beta);
    }
  }
  DeviceBuffer<float> dout(to_f32(expert_out)), dy(size_t(tokens) * h);
  CUDA_CHECK(kernels::moe_combine_f32(dout.get(), buckets.slot_of.get(), dweights.get(), tokens, s.top_k, h, dy.get(),
                                      nullptr));
  EXPECT_LE(normalized_error(from_f32(dy.download(), tokens, h), expected), tolerance_for<float>());
}

}  // namespace
}  // namespace k3::gpu_test
