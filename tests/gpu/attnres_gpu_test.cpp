// Block AttnRes mixer fused with RMSNorm against ref::attnres_mix + ref::rmsnorm: 1..9 candidates,
// each with its own row stride; scores of order one, large scores (near one-hot softmax), and small
// values where both epsilons matter.
#include "engine/reference/attnres.h"
#include "engine/reference/basic_ops.h"
#include "gpu_harness.h"
#include "kernels/attnres_mix.h"

#include <cmath>
#include <memory>

namespace k3::gpu_test {
namespace {

struct Variant {
  const char* name;
  float value_range;  // candidates uniform in ±value_range · (1 + c/4)
  bool large_scores;  // query uniform in ±1 (scores of order sqrt(h)) instead of ±3/sqrt(h)
};
const Variant kVariants[] = {
    {"order-one scores", 1.0f, false}, {"large scores", 1.0f, true}, {"small values", 1e-3f, false}};

constexpr float kEpsMix = 1e-5f, kEpsNorm = 1e-6f;

constexpr kernels::AttnResAlgorithm kAlgorithms[] = {
    kernels::AttnResAlgorithm::automatic, kernels::AttnResAlgorithm::block_per_token,
    kernels::AttnResAlgorithm::vec8_block_per_token, kernels::AttnResAlgorithm::vec8_cluster_per_token};

const char* name_of(kernels::AttnResAlgorithm a) {
  switch (a) {
    case kernels::AttnResAlgorithm::automatic: return "automatic";
    case kernels::AttnResAlgorithm::block_per_token: return "block_per_token";
    case kernels::AttnResAlgorithm::vec8_block_per_token: return "vec8_block_per_token";
    case kernels::AttnResAlgorithm::vec8_cluster_per_token: return "vec8_cluster_per_token";
  }
  return "?";
}

// Every version on every case where it applies; the vec8 versions need 16-byte rows (packed strides, h % 8 == 0,
// h ≤ 8192), so with padded strides or h = 999, 9000 they must refuse.
TEST(GpuAttnResMix, MatchesReference) {
  std::mt19937 rng(20261202);
  for (const int n : {1, 2, 5, 9}) {
    for (const int64_t h : {64, 7168, 1000, 999, 9000}) {
      for (const int64_t tokens : {1, 7}) {
        for (const bool padded : {true, false}) {
          for (const Variant& variant : kVariants) {
            const std::string label =
                fmt::format("n={} h={} T={} {} {}", n, h, tokens, padded ? "padded" : "packed", variant.name);
            // Candidate c lives in its own [T, h + c % 3] buffer (padded) or [T, h] (packed).
            std::vector<ref::Matrix> stored, values;
            for (int c = 0; c < n; ++c) {
              const float range = variant.value_range * (1.0f + float(c) / 4.0f);
              stored.push_back(round_to_bf16(random_matrix(tokens, h + (padded ? c % 3 : 0), rng, -range, range)));
              values.push_back(stored.back().leftCols(h));
            }
            const float query_range = variant.large_scores ? 1.0f : 3.0f / std::sqrt(float(h));
            ref::AttnResMixer mixer{
                round_to_bf16(random_matrix(1, h, rng, -query_range, query_range)).row(0).transpose(),
                round_to_bf16(random_matrix(1, h, rng, 0.5f, 1.5f)).row(0).transpose()};
            const ref::Matrix norm_weight = round_to_bf16(random_matrix(1, h, rng, 0.5f, 1.5f));
            std::vector<const ref::Matrix*> candidates;
            for (const ref::Matrix& v : values) candidates.push_back(&v);
            const ref::Matrix expected_mix = ref::attnres_mix(candidates, mixer, kEpsMix);
            const ref::Matrix expected_normed = ref::rmsnorm(expected_mix, norm_weight.row(0).transpose(), kEpsNorm);
            ASSERT_TRUE(expected_mix.allFinite() && expected_normed.allFinite()) << label;
            K3_REQUIRE_GPU();

            std::vector<std::unique_ptr<DeviceBuffer<__nv_bfloat16>>> dcandidates;
            kernels::AttnResCandidates list;
            list.count = n;
            for (int c = 0; c < n; ++c) {
              dcandidates.push_back(std::make_unique<DeviceBuffer<__nv_bfloat16>>(to_bf16(stored[c])));
              list.rows[c] = dcandidates.back()->get();
              list.row_stride[c] = stored[c].cols();
            }
            DeviceBuffer<__nv_bfloat16> dquery(to_bf16(ref::Matrix(mixer.query.transpose())));
            DeviceBuffer<__nv_bfloat16> dkey_norm(to_bf16(ref::Matrix(mixer.key_norm.transpose())));
            DeviceBuffer<__nv_bfloat16> dnorm_weight(to_bf16(norm_weight));
            const int64_t mix_stride = h + (padded ? 3 : 0), normed_stride = h + (padded ? 1 : 0);
            const bool vec8 = !padded && h % 8 == 0 && h <= 8192;
            for (const kernels::AttnResAlgorithm algorithm : kAlgorithms) {
              DeviceBuffer<__nv_bfloat16> dmix(tokens * mix_stride), dnormed(tokens * normed_stride);
              const cudaError_t status = kernels::attnres_mix_rmsnorm_bf16(
                  list, dquery.get(), dkey_norm.get(), kEpsMix, dnorm_weight.get(), kEpsNorm, dmix.get(), mix_stride,
                  dnormed.get(), normed_stride, tokens, h, nullptr, algorithm);
              const bool needs_vec8 = algorithm == kernels::AttnResAlgorithm::vec8_block_per_token ||
                                      algorithm == kernels::AttnResAlgorithm::vec8_cluster_per_token;
              if (needs_vec8 && !vec8) {
                EXPECT_EQ(status, cudaErrorInvalidValue) << label << " " << name_of(algorithm);
                continue;
              }
              CUDA_CHECK(status);
              const ref::Matrix got_mix = from_bf16(dmix.download(), tokens, mix_stride).leftCols(h);
              const ref::Matrix got_normed = from_bf16(dnormed.download(), tokens, normed_stride).leftCols(h);
              EXPECT_LE(normalized_error(got_mix, expected_mix), tolerance_for<__nv_bfloat16>())
                  << label << " " << name_of(algorithm);
              EXPECT_LE(normalized_error(got_normed, expected_normed), tolerance_for<__nv_bfloat16>())
                  << label << " " << name_of(algorithm);
            }
          }
        }
      }
    }
  }
}

// Argument checks happen on the host before any launch, so they run without a GPU too.
TEST(GpuAttnResMix, RejectsBadArguments) {
  alignas(16) static __nv_bfloat16 v[64], w[64], out[64];
  kernels::AttnResCandidates list;
  const auto call = [&](const kernels::AttnResCandidates& l, int64_t tokens, int64_t width) {
    return kernels::attnres_mix_rmsnorm_bf16(l, w, w, 1e-5f, w, 1e-5f, out, 8, out, 8, tokens, width, nullptr);
  };
  EXPECT_EQ(call(list, 1, 8), cudaErrorInvalidValue);  // no candidates
  list.count = kernels::kAttnResMaxCandidates + 1;
  EXPECT_EQ(call(list, 1, 8), cudaErrorInvalidValue);
  list.count = 2;
  list.rows[0] = v;
  list.row_stride[0] = 8;
  EXPECT_EQ(call(list, 1, 8), cudaErrorInvalidValue);  // candidate 1 unset
  list.rows[1] = v;
  list.row_stride[1] = 4;
  EXPECT_EQ(call(list, 1, 8), cudaErrorInvalidValue);  // stride below the width
  list.row_stride[1] = 8;
  EXPECT_EQ(call(list, 1, 16), cudaErrorInvalidValue);  // output strides below the width
  EXPECT_EQ(call(list, 0, 8), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
