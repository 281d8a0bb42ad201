// Block AttnRes mixer fused with RMSNorm against ref::attnres_mix + ref::rmsnorm: 1..9 candidates, each with its own
// row stride; scores of order one, large scores (near one-hot softmax), and small values where both epsilons matter.
// Every AttnResAlgorithm on every shape: the vec8 versions need 16-byte rows (packed strides, width % 8 == 0,
// width ≤ 8192), so with padded strides or widths 999, 9000 they must refuse.
#include "engine/reference/attnres.h"
#include "engine/reference/basic_ops.h"
#include "kernels/attnres_mix.h"
#include "tests/kernels/op_cases/cases.h"

#include <cmath>
#include <memory>

namespace k3::gpu_test {
namespace {

using kernels::AttnResAlgorithm;
constexpr float kEpsMix = 1e-5f, kEpsNorm = 1e-6f;

// The shapes' "data" dimension: candidates uniform in ±value_range · (1 + c/4); large_scores: the query uniform in
// ±1 (scores of order sqrt(width)) instead of ±3/sqrt(width).
struct Data {
  float value_range;
  bool large_scores;
};
constexpr Data kData[] = {{1.0f, false} /* order-one scores */, {1.0f, true} /* large */, {1e-3f, false} /* small */};

OpCase attnres_case() {
  OpCase c{"attnres_mix_rmsnorm_bf16", OpKind::attnres_mix};
  for (const int n : {1, 2, 5, 9}) {
    for (const int64_t h : {64, 7168, 1000, 999, 9000}) {
      for (const int64_t tokens : {1, 7}) {
        for (const int padded : {1, 0}) {
          for (int data = 0; data < 3; ++data) {
            c.shapes.push_back(
                shape({{"candidates", n}, {"width", h}, {"tokens", tokens}, {"padded", padded}, {"data", data}}));
          }
        }
      }
    }
  }
  c.variants = {variant(AttnResAlgorithm::automatic, "automatic"),
                variant(AttnResAlgorithm::block_per_token, "block_per_token"),
                variant(AttnResAlgorithm::vec8_block_per_token, "vec8_block_per_token"),
                variant(AttnResAlgorithm::vec8_cluster_per_token, "vec8_cluster_per_token")};
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int n = int(s["candidates"]);
    const int64_t h = s["width"], tokens = s["tokens"];
    const bool padded = s["padded"] != 0;
    const Data data = kData[s["data"]];
    // Candidate i lives in its own [tokens, h + i % 3] buffer (padded) or [tokens, h] (packed).
    std::vector<ref::Matrix> stored, values;
    for (int i = 0; i < n; ++i) {
      const float range = data.value_range * (1.0f + float(i) / 4.0f);
      stored.push_back(round_to_bf16(random_matrix(tokens, h + (padded ? i % 3 : 0), rng, -range, range)));
      values.push_back(stored.back().leftCols(h));
    }
    const float query_range = data.large_scores ? 1.0f : 3.0f / std::sqrt(float(h));
    const ref::AttnResMixer mixer{round_to_bf16(random_matrix(1, h, rng, -query_range, query_range)).row(0).transpose(),
                                  round_to_bf16(random_matrix(1, h, rng, 0.5f, 1.5f)).row(0).transpose()};
    const ref::Matrix norm_weight = round_to_bf16(random_matrix(1, h, rng, 0.5f, 1.5f));
    std::vector<const ref::Matrix*> candidates;
    for (const ref::Matrix& v : values) candidates.push_back(&v);
    const ref::Matrix expected_mix = ref::attnres_mix(candidates, mixer, kEpsMix);
    const ref::Matrix expected_normed = ref::rmsnorm(expected_mix, norm_weight.row(0).transpose(), kEpsNorm);
    cpu.expect(expected_mix.allFinite() && expected_normed.allFinite(), "reference finite");
    return [=](const Variant& v, Checks& gpu) {
      std::vector<std::unique_ptr<DeviceBuffer<__nv_bfloat16>>> dcandidates;
      kernels::AttnResCandidates list;
      list.count = n;
      for (int i = 0; i < n; ++i) {
        dcandidates.push_back(std::make_unique<DeviceBuffer<__nv_bfloat16>>(to_bf16(stored[size_t(i)])));
        list.rows[i] = dcandidates.back()->get();
        list.row_stride[i] = stored[size_t(i)].cols();
      }
      DeviceBuffer<__nv_bfloat16> dquery(to_bf16(ref::Matrix(mixer.query.transpose())));
      DeviceBuffer<__nv_bfloat16> dkey_norm(to_bf16(ref::Matrix(mixer.key_norm.transpose())));
      DeviceBuffer<__nv_bfloat16> dnorm_weight(to_bf16(norm_weight));
      const int64_t mix_stride = h + (padded ? 3 : 0), normed_stride = h + (padded ? 1 : 0);
      DeviceBuffer<__nv_bfloat16> dmix(size_t(tokens * mix_stride)), dnormed(size_t(tokens * normed_stride));
      const auto algorithm = algorithm_of<AttnResAlgorithm>(v);
      const cudaError_t status = kernels::attnres_mix_rmsnorm_bf16(
          list, dquery.get(), dkey_norm.get(), kEpsMix, dnorm_weight.get(), kEpsNorm, dmix.get(), mix_stride,
          dnormed.get(), normed_stride, tokens, h, nullptr, algorithm);
      const bool vec8 = !padded && h % 8 == 0 && h <= 8192;
      const bool needs_vec8 =
          algorithm == AttnResAlgorithm::vec8_block_per_token || algorithm == AttnResAlgorithm::vec8_cluster_per_token;
      if (needs_vec8 && !vec8) {
        gpu.equal("refused without 16-byte rows", status, cudaErrorInvalidValue);
        return;
      }
      CUDA_CHECK(status);
      const ref::Matrix got_mix = from_bf16(dmix.download(), tokens, mix_stride).leftCols(h);
      const ref::Matrix got_normed = from_bf16(dnormed.download(), tokens, normed_stride).leftCols(h);
      gpu.near("mix", normalized_error(got_mix, expected_mix), tolerance_for<__nv_bfloat16>());
      gpu.near("normed", normalized_error(got_normed, expected_normed), tolerance_for<__nv_bfloat16>());
    };
  };
  // K3's width (7168) over 3 and 9 candidates (the first layers' and the deepest's).
  for (const int tokens : {1, 8, 64}) {
    for (const int n : {3, kernels::kAttnResMaxCandidates}) {
      c.perf_shapes.push_back(shape({{"tokens", tokens}, {"candidates", n}, {"width", 7168}}));
    }
  }
  c.perf_variants = {variant(AttnResAlgorithm::vec8_block_per_token, "vec8_block_per_token"),
                     variant(AttnResAlgorithm::vec8_cluster_per_token, "vec8_cluster_per_token")};
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("attnres_mix_rmsnorm_{} {} candidates {}x{}", v.name, s["candidates"], s["tokens"], s["width"]);
  };
  // The candidates read, the mix and its norm written (bf16), three weight vectors; 4 FLOPs an element per
  // candidate (score and mix) and 4 for the norm.
  c.cost = [](const Shape& s) {
    const double n = double(s["candidates"]), elems = double(s["tokens"]) * s["width"];
    Cost cost;
    cost.bytes = (n + 2) * elems * 2.0 + 3 * s["width"] * 2.0;
    cost.flops = (4.0 * n + 4) * elems;
    cost.timing = Timing::latency;
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int) -> Launch {
    const int64_t tokens = s["tokens"], width = s["width"];
    const int n = int(s["candidates"]);
    auto rows = rotated(n, [&](int) { return device_bytes<__nv_bfloat16>(size_t(tokens * width), 0x3C); });
    auto weights = device_bytes<__nv_bfloat16>(size_t(3 * width), 0x3C);    // query, key norm, norm weight
    auto out = device_bytes<__nv_bfloat16>(size_t(2 * tokens * width), 0);  // mix, normed
    kernels::AttnResCandidates candidates;
    candidates.count = n;
    for (int i = 0; i < n; ++i) candidates.rows[i] = rows[size_t(i)]->get(), candidates.row_stride[i] = width;
    const auto algorithm = algorithm_of<AttnResAlgorithm>(v);
    return [=](int, cudaStream_t stream) {
      const __nv_bfloat16* w = weights->get();
      CUDA_CHECK(kernels::attnres_mix_rmsnorm_bf16(candidates, w, w + width, 1e-6f, w + 2 * width, 1e-6f, out->get(),
                                                   width, out->get() + tokens * width, width, tokens, width, stream,
                                                   algorithm));
      (void)rows;  // the closure owns the candidates' buffers
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> attnres_cases() { return {attnres_case()}; }

}  // namespace k3::gpu_test
