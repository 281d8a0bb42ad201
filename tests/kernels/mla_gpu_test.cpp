// MLA attention beside its op cases (tests/kernels/op_cases/mla_cases.cpp: the absorbed decode over scattered pages and
// the causal prefill, every algorithm, against direct fp64 computations): the decode graph replayed with new lengths,
// the split counts and workspace, argument rejection, and both end to end through the layer (ref::mla_absorbed,
// ref::mla_naive) on K3's attention widths.
#include "engine/reference/basic_ops.h"
#include "engine/reference/mla.h"
#include "gpu_harness.h"
#include "kernels/mla_decode_paged.h"
#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_cluster.h"
#include "kernels/mla_prefill.h"
#include "tests/kernels/op_cases/mla_data.h"

#include <cmath>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

using Eigen::Index;
using kernels::MlaDecodeAlgorithm;
using kernels::MlaDecodeShape;
using namespace mla;

void expect_decode_matches(const ref::Matrix& got, const ref::Matrix& want, const DecodeData& d,
                           const std::vector<int32_t>& contexts, const std::string& label) {
  const std::vector<double> errors = decode_errors(got, want, d.heads, contexts);
  for (size_t b = 0; b < errors.size(); ++b) {
    EXPECT_LE(errors[b], tolerance_for<__nv_bfloat16>()) << label << ": sequence " << b << " context " << contexts[b];
  }
}

TEST(GpuMla, DecodeGraphServesNewLengths) {
  // One capture; the replay reads the lengths from device memory, so new lengths need no new graph. The second set
  // shortens every sequence (the dropped rows hold real values, so reading past the length would show) and empties
  // one.
  std::mt19937 rng(20261211);
  DecodeData d;
  d.heads = 35;
  const std::vector<int> contexts = {5000, 65, 1, 1000, 64, 63};
  d.q = round_to_bf16(random_matrix(Index(contexts.size()) * d.heads, kWidth, rng, -2.0f, 2.0f));
  for (int t : contexts) d.rows.push_back(round_to_bf16(random_matrix(t, kWidth, rng)));
  d.cache = build_paged_cache(d.rows, d.heads, 16, 5000, rng);
  const std::vector<int32_t> shorter = {3333, 64, 0, 999, 33, 1};
  const ref::Matrix want_full = decode_reference(d.q, d.rows, d.cache.contexts, d.heads, kK3Scale);
  const ref::Matrix want_shorter = decode_reference(d.q, d.rows, shorter, d.heads, kK3Scale);

  K3_REQUIRE_GPU();
  for (const MlaDecodeAlgorithm algorithm : decode_algorithms()) {
    DecodeDevice dev(d);  // fresh lengths per algorithm
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(dev.launch(d.cache.shape, stream, algorithm));
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_decode_matches(from_f32(dev.out.download(), d.q.rows(), kLatent), want_full, d, d.cache.contexts,
                          "graph replay, " + name(algorithm));
    dev.contexts.upload(shorter);
    CUDA_CHECK(cudaMemset(dev.out.get(), 0xFF, dev.out.size() * sizeof(float)));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_decode_matches(from_f32(dev.out.download(), d.q.rows(), kLatent), want_shorter, d, shorter,
                          "graph replay, shorter lengths, " + name(algorithm));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

TEST(GpuMla, DecodeSplitsAndWorkspaceFollowTheShape) {
  // Splits = ceil(264 / (batch · ceil(heads / 32))), at most max_context / 128, within [1, 128].
  const MlaDecodeShape one_m{1, 96, 64, 16384, 1 << 20};
  EXPECT_EQ(kernels::mla_decode_num_splits(one_m), 88);
  EXPECT_EQ(kernels::mla_decode_workspace_bytes(one_m), size_t(1) * 88 * 96 * (512 + 2) * 4);
  EXPECT_EQ(kernels::mla_decode_num_splits({8, 96, 64, 128, 8192}), 11);
  EXPECT_EQ(kernels::mla_decode_num_splits({1, 96, 64, 128, 8192}), 64);  // 8192 / 128
  EXPECT_EQ(kernels::mla_decode_num_splits({1, 3, 64, 16384, 1 << 20}), 128);
  EXPECT_EQ(kernels::mla_decode_num_splits({64, 96, 64, 16384, 1 << 20}), 2);
  EXPECT_EQ(kernels::mla_decode_num_splits({4, 96, 16, 8, 100}), 1);
  EXPECT_EQ(kernels::mla_decode_workspace_bytes({4, 96, 16, 8, 100}), 0u);
  // wgmma_alternating on an H200: ⌊132 SMs / (batch · ⌈heads / 64⌉)⌋ within [1, the splits above], so the same
  // workspace always suffices.
  EXPECT_EQ(kernels::mla_decode_wgmma_num_splits(one_m), 66);
  EXPECT_EQ(kernels::mla_decode_wgmma_num_splits({2, 96, 64, 16384, 1 << 20}), 33);
  EXPECT_EQ(kernels::mla_decode_wgmma_num_splits({4, 96, 64, 16384, 1 << 20}), 16);
  EXPECT_EQ(kernels::mla_decode_wgmma_num_splits({8, 96, 64, 128, 8192}), 8);
  EXPECT_EQ(kernels::mla_decode_wgmma_num_splits({1, 96, 64, 32, 2048}), 16);  // 2048 / 128 caps it
  EXPECT_EQ(kernels::mla_decode_wgmma_num_splits({1, 3, 64, 16384, 1 << 20}), 128);
  EXPECT_EQ(kernels::mla_decode_wgmma_num_splits({64, 96, 64, 16384, 1 << 20}), 1);
  EXPECT_EQ(kernels::mla_decode_wgmma_num_splits({4, 96, 16, 8, 100}), 1);
  // mla_decode_algorithm_splits: each algorithm's own count (what mla_bench names its results by); automatic is
  // wgmma_cluster's where the device runs its clusters (an H200), register_q's without a device.
  for (const MlaDecodeShape& shape : {one_m, MlaDecodeShape{8, 96, 64, 128, 8192}, MlaDecodeShape{4, 96, 16, 8, 100}}) {
    EXPECT_EQ(kernels::mla_decode_algorithm_splits(shape, MlaDecodeAlgorithm::register_q),
              kernels::mla_decode_num_splits(shape));
    EXPECT_EQ(kernels::mla_decode_algorithm_splits(shape, MlaDecodeAlgorithm::wgmma_alternating),
              kernels::mla_decode_wgmma_num_splits(shape));
    EXPECT_EQ(kernels::mla_decode_algorithm_splits(shape, MlaDecodeAlgorithm::wgmma_cluster),
              kernels::mla_decode_wgmma_cluster_num_splits(shape));
    int device = 0;
    const bool hopper = cudaGetDevice(&device) == cudaSuccess && kernels::mla_decode_wgmma_supported(device);
    const bool clusters = hopper && kernels::mla_decode_wgmma_cluster_runs(device);
    EXPECT_EQ(kernels::mla_decode_algorithm_splits(shape, MlaDecodeAlgorithm::automatic),
              clusters ? kernels::mla_decode_wgmma_cluster_num_splits(shape)
              : hopper ? kernels::mla_decode_wgmma_num_splits(shape)
                       : kernels::mla_decode_num_splits(shape));
  }
}

TEST(GpuMla, DecodeRejectsInvalidArguments) {
  // Argument checks come before any launch, so they hold (and run) without a device.
  const auto launch = [](MlaDecodeShape shape, float scale = 0.1f, void* workspace = nullptr, size_t bytes = 0,
                         const __nv_bfloat16* q = nullptr) {
    return kernels::mla_decode_paged_bf16(q, nullptr, nullptr, nullptr, scale, shape, nullptr, workspace, bytes,
                                          nullptr);
  };
  EXPECT_EQ(launch({1, 0, 64, 4, 256}), cudaErrorInvalidValue);            // no heads
  EXPECT_EQ(launch({-1, 8, 64, 4, 256}), cudaErrorInvalidValue);           // negative batch
  EXPECT_EQ(launch({1, 8, 0, 4, 256}), cudaErrorInvalidValue);             // empty pages
  EXPECT_EQ(launch({1, 8, 64, 0, 0}), cudaErrorInvalidValue);              // no page-table columns
  EXPECT_EQ(launch({1, 8, 64, 4, 257}), cudaErrorInvalidValue);            // context beyond the page table
  EXPECT_EQ(launch({1, 8, 64, 4, -1}), cudaErrorInvalidValue);             // negative context
  EXPECT_EQ(launch({1, 8, 64, 4, 256}, NAN), cudaErrorInvalidValue);       // scale
  EXPECT_EQ(launch({1, 8, 64, 1 << 14, 1 << 20}), cudaErrorInvalidValue);  // several splits, no workspace
  const MlaDecodeShape split{1, 8, 64, 1 << 14, 1 << 20};
  float* fake_workspace = reinterpret_cast<float*>(uintptr_t(256));
  EXPECT_EQ(launch(split, 0.1f, fake_workspace, kernels::mla_decode_workspace_bytes(split) - 1),
            cudaErrorInvalidValue);  // workspace too small
  EXPECT_EQ(launch({1, 8, 64, 4, 256}, 0.1f, nullptr, 0, reinterpret_cast<const __nv_bfloat16*>(uintptr_t(8))),
            cudaErrorInvalidValue);                    // q not 16-byte aligned
  EXPECT_EQ(launch({0, 8, 64, 4, 256}), cudaSuccess);  // empty batch: nothing to do
  EXPECT_EQ(kernels::mla_decode_paged_bf16(nullptr, nullptr, nullptr, nullptr, 0.1f, {1, 8, 64, 4, 256}, nullptr,
                                           nullptr, 0, nullptr, static_cast<MlaDecodeAlgorithm>(7)),
            cudaErrorInvalidValue);  // no such algorithm (the enum's values are 0..3)
}

// ---- Prefill ----

TEST(GpuMla, PrefillRejectsInvalidArguments) {
  const auto launch = [](int q_tokens, int kv_tokens, int heads, float scale) {
    return kernels::mla_prefill_attention_bf16(nullptr, nullptr, nullptr, q_tokens, kv_tokens, heads, scale, nullptr,
                                               nullptr);
  };
  EXPECT_EQ(launch(8, 8, 0, 0.1f), cudaErrorInvalidValue);   // no heads
  EXPECT_EQ(launch(9, 8, 2, 0.1f), cudaErrorInvalidValue);   // more queries than keys
  EXPECT_EQ(launch(-1, 8, 2, 0.1f), cudaErrorInvalidValue);  // negative
  EXPECT_EQ(launch(8, 8, 2, INFINITY), cudaErrorInvalidValue);
  EXPECT_EQ(launch(0, 8, 2, 0.1f), cudaSuccess);  // no queries: nothing to do
  EXPECT_EQ(kernels::mla_prefill_attention_bf16(nullptr, nullptr, nullptr, 8, 8, 2, 0.1f, nullptr, nullptr,
                                                static_cast<kernels::MlaPrefillAlgorithm>(5)),
            cudaErrorInvalidValue);
  for (const float scale : {0.0f, -0.1f})  // wgmma keeps scores unscaled until the exponent: scale > 0
    EXPECT_EQ(kernels::mla_prefill_attention_bf16(nullptr, nullptr, nullptr, 8, 8, 2, scale, nullptr, nullptr,
                                                  kernels::MlaPrefillAlgorithm::wgmma),
              cudaErrorInvalidValue)
        << scale;
}

// ---- End to end through the layer (K3 widths: r 512, dn 128, dr 64, dv 128; 3 heads, hidden 48) ----

constexpr double kLatentEps = 1e-6;

struct Layer {
  MlaSpec spec;
  ref::MlaWeights w;
};

Layer random_layer(std::mt19937& rng) {
  Layer l;
  l.spec.num_heads = 3;
  l.spec.q_lora_rank = 32;
  l.spec.kv_lora_rank = kLatent;
  l.spec.qk_nope_head_dim = kQk - (kWidth - kLatent);
  l.spec.qk_rope_head_dim = kWidth - kLatent;
  l.spec.v_head_dim = kValue;
  l.spec.rotary = false;
  l.spec.output_gate = true;
  const int hidden = 48, heads = l.spec.num_heads;
  l.w.q_a = random_matrix(32, hidden, rng, -0.3f, 0.3f);
  l.w.q_a_norm = random_matrix(32, 1, rng, 0.5f, 1.5f).col(0);
  l.w.q_b = random_matrix(Index(heads) * kQk, 32, rng, -0.3f, 0.3f);
  l.w.kv_a = random_matrix(kWidth, hidden, rng, -0.3f, 0.3f);
  l.w.kv_a_norm = random_matrix(kLatent, 1, rng, 0.5f, 1.5f).col(0);
  l.w.kv_b = random_matrix(Index(heads) * (l.spec.qk_nope_head_dim + kValue), kLatent, rng, -0.1f, 0.1f);
  l.w.g_proj = random_matrix(Index(heads) * kValue, hidden, rng, -0.3f, 0.3f);
  l.w.o_proj = random_matrix(hidden, Index(heads) * kValue, rng, -0.1f, 0.1f);
  return l;
}

// The pieces around attention, as the layer computes them: q = W_qb RMSNorm(W_qa x), and
// y = W_o (attn ⊙ sigmoid(W_g x)).
ref::Matrix queries(const Layer& l, const ref::Matrix& x) {
  return ref::linear(ref::rmsnorm(ref::linear(x, l.w.q_a), l.w.q_a_norm, kLatentEps), l.w.q_b);
}
ref::Matrix gated_output(const Layer& l, const ref::Matrix& x, ref::Matrix attn) {
  const ref::Matrix gate = ref::linear(x, l.w.g_proj);
  for (Index i = 0; i < attn.size(); ++i) attn.data()[i] *= ref::sigmoid(gate.data()[i]);
  return ref::linear(attn, l.w.o_proj);
}
// Rows of kv_b for head h: k_nope (dn) then v (dv).
ref::MatrixD w_uk(const Layer& l, int h) {
  const int dn = l.spec.qk_nope_head_dim;
  return l.w.kv_b.middleRows(Index(h) * (dn + kValue), dn).cast<double>();
}
ref::MatrixD w_uv(const Layer& l, int h) {
  const int dn = l.spec.qk_nope_head_dim;
  return l.w.kv_b.middleRows(Index(h) * (dn + kValue) + dn, kValue).cast<double>();
}

TEST(GpuMla, EndToEndThroughTheLayerReference) {
  std::mt19937 rng(20261213);
  const Layer l = random_layer(rng);
  const int heads = l.spec.num_heads, dn = l.spec.qk_nope_head_dim;
  ref::MlaCache cache;
  ref::mla_naive(l.spec, kLatentEps, l.w, random_matrix(50, 48, rng), cache);  // a cached prefix of 50 tokens

  // Prefill: a chunk of 21 tokens after the prefix, expanded keys and values built from the cache.
  const ref::Matrix x_chunk = random_matrix(21, 48, rng);
  const ref::Matrix y_naive = ref::mla_naive(l.spec, kLatentEps, l.w, x_chunk, cache);
  const Index kv_tokens = cache.latent.rows();
  const ref::Matrix q_chunk = queries(l, x_chunk);
  const ref::MatrixD k_nope_v = cache.latent.leftCols(kLatent).cast<double>() * l.w.kv_b.cast<double>().transpose();
  ref::Matrix k(kv_tokens, Index(heads) * kQk), v(kv_tokens, Index(heads) * kValue);
  for (int h = 0; h < heads; ++h) {
    k.middleCols(Index(h) * kQk, dn) = k_nope_v.middleCols(Index(h) * (dn + kValue), dn).cast<float>();
    k.middleCols(Index(h) * kQk + dn, kWidth - kLatent) = cache.latent.rightCols(kWidth - kLatent);
    v.middleCols(Index(h) * kValue, kValue) = k_nope_v.middleCols(Index(h) * (dn + kValue) + dn, kValue).cast<float>();
  }
  const ref::Matrix attn_prefill =
      causal_attention(to_double(q_chunk), to_double(k), to_double(v), heads, kK3Scale).cast<float>();
  EXPECT_LE(normalized_error(gated_output(l, x_chunk, attn_prefill), y_naive), 1e-5);

  // Decode: one more token through the absorbed form; q_abs_h = [q_nope_h · W_uk_h | q_r_h] against [c | k_r].
  const ref::Matrix x_token = random_matrix(1, 48, rng);
  const ref::Matrix y_absorbed = ref::mla_absorbed(l.spec, kLatentEps, l.w, x_token, cache);
  const ref::Matrix q_token = queries(l, x_token);
  ref::Matrix q_abs(heads, kWidth);
  for (int h = 0; h < heads; ++h) {
    q_abs.row(h).head(kLatent) = (q_token.row(0).segment(Index(h) * kQk, dn).cast<double>() * w_uk(l, h)).cast<float>();
    q_abs.row(h).tail(kWidth - kLatent) = q_token.row(0).segment(Index(h) * kQk + dn, kWidth - kLatent);
  }
  const auto decode_output = [&](const ref::Matrix& latent_out) {  // [heads, 512] → the layer's output
    ref::Matrix attn(1, Index(heads) * kValue);
    for (int h = 0; h < heads; ++h)
      attn.middleCols(Index(h) * kValue, kValue) =
          (latent_out.row(h).cast<double>() * w_uv(l, h).transpose()).cast<float>();
    return gated_output(l, x_token, attn);
  };
  const ref::Matrix latent_cpu = absorbed_attention(to_double(q_abs), to_double(cache.latent), kK3Scale).cast<float>();
  EXPECT_LE(normalized_error(decode_output(latent_cpu), y_absorbed), 1e-5);

  K3_REQUIRE_GPU();
  // Prefill on the GPU (bf16 inputs) against the layer's output.
  const ref::Matrix attn_gpu =
      run_prefill(q_chunk.middleRows(0, 21), k, v, heads, kK3Scale, kernels::MlaPrefillAlgorithm::automatic);
  EXPECT_LE(normalized_error(gated_output(l, x_chunk, attn_gpu), y_naive), tolerance_for<__nv_bfloat16>());
  // Decode on the GPU from a paged copy of the layer's cache.
  DecodeData d;
  d.heads = heads;
  d.q = round_to_bf16(q_abs);
  d.rows = {round_to_bf16(cache.latent)};
  d.cache = build_paged_cache(d.rows, heads, 16, cache.latent.rows() + 5, rng);
  DecodeDevice dev(d);
  for (const MlaDecodeAlgorithm algorithm : decode_algorithms()) {
    CUDA_CHECK(dev.launch(d.cache.shape, nullptr, algorithm));
    const ref::Matrix latent_gpu = from_f32(dev.out.download(), heads, kLatent);
    EXPECT_LE(normalized_error(decode_output(latent_gpu), y_absorbed), tolerance_for<__nv_bfloat16>())
        << name(algorithm);
  }
}

}  // namespace
}  // namespace k3::gpu_test
