// MoE routing beside its op cases (tests/kernels/op_cases/moe_cases.cpp: the router against ref::route, the bucketing
// against a stable counting sort, the combine against a CPU loop): the planted ties of the router's shapes deciding
// selections, argument rejection, and the three kernels together, with the expert outputs computed per slot on the
// CPU, against ref::moe_forward.
#include "core/model_config.h"
#include "engine/reference/basic_ops.h"
#include "engine/reference/moe.h"
#include "gpu_harness.h"
#include "kernels/moe_bucket.h"
#include "kernels/moe_router.h"
#include "tests/kernels/op_cases/moe_data.h"

namespace k3::gpu_test {
namespace {

using namespace moe;

// The router case's tied experts matter: over the data its shapes are checked on, some token's last chosen expert
// ties with an unchosen one (so the lower-id rule decides a selection the kernel is checked on).
TEST(GpuMoeRouter, PlantedTiesDecideSelections) {
  int ties = 0;
  for (const Shape& s : router_shapes()) {
    std::mt19937 rng = case_rng("moe_route_topk_sigmoid", s);
    ties += boundary_ties(s, router_data(s, rng));
  }
  EXPECT_GT(ties, 0) << "the planted ties never decide a selection";
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
  CUDA_CHECK(kernels::moe_bucket_by_expert(dids.get(), dweights.get(), tokens, s.top_k, s.num_experts, buckets.view(),
                                           buckets.workspace.get(), buckets.workspace.size(), nullptr));
  const std::vector<int32_t> offsets = buckets.offsets.download(), slot_token = buckets.slot_token.download();
  ASSERT_EQ(offsets.back(), slots);
  ref::Matrix expert_out(slots, h);
  for (int e = 0; e < s.num_experts; ++e) {
    for (int32_t slot = offsets[size_t(e)]; slot < offsets[size_t(e) + 1]; ++slot) {
      expert_out.row(slot) = ref::glu_mlp_situ(x.row(slot_token[size_t(slot)]), w.w1[size_t(e)], w.w3[size_t(e)],
                                               w.w2[size_t(e)], cfg.situ_beta, cfg.situ_linear_beta);
    }
  }
  DeviceBuffer<float> dout(to_f32(expert_out)), dy(size_t(tokens) * h);
  CUDA_CHECK(kernels::moe_combine_f32(dout.get(), buckets.slot_of.get(), dweights.get(), tokens, s.top_k, h, dy.get(),
                                      nullptr));
  EXPECT_LE(normalized_error(from_f32(dy.download(), tokens, h), expected), tolerance_for<float>());
}

}  // namespace
}  // namespace k3::gpu_test
