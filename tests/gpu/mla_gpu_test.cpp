// MLA attention kernels against direct fp64 computations and engine/reference/mla: the absorbed decode over a
// paged latent cache (mla_decode_paged_bf16, every MlaDecodeAlgorithm: scattered pages, mixed and empty lengths in one
// batch, empty splits, a CUDA graph replayed with new lengths) and the causal prefill in the expanded form
// (mla_prefill_attention_bf16, with a cached prefix); both also end to end through the layer (ref::mla_absorbed,
// ref::mla_naive) on K3's attention widths.
#include "engine/reference/basic_ops.h"
#include "engine/reference/mla.h"
#include "gpu_harness.h"
#include "kernels/mla_decode_paged.h"
#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_cluster.h"
#include "kernels/mla_prefill.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

using Eigen::Index;
using kernels::MlaDecodeAlgorithm;
using kernels::MlaDecodeShape;

constexpr int kWidth = kernels::kMlaDecodeCacheWidth;   // 576
constexpr int kLatent = kernels::kMlaDecodeLatentDim;   // 512
constexpr int kQk = kernels::kMlaPrefillQkDim;          // 192
constexpr int kValue = kernels::kMlaPrefillValueDim;    // 128
const double kK3Scale = 1.0 / std::sqrt(double(kQk));  // 192^-1/2

// Every algorithm the current device runs: the wgmma ones only on compute capability 9.0 (on an H200 all run).
std::vector<MlaDecodeAlgorithm> decode_algorithms() {
  std::vector<MlaDecodeAlgorithm> algorithms = {MlaDecodeAlgorithm::register_q};
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess && kernels::mla_decode_wgmma_supported(device)) {
    algorithms.push_back(MlaDecodeAlgorithm::wgmma_alternating);
    algorithms.push_back(MlaDecodeAlgorithm::wgmma_cluster);
  } else {
    fmt::print(stderr, "note: this device is not compute capability 9.0, so the wgmma algorithms are not tested\n");
  }
  return algorithms;
}

std::string name(MlaDecodeAlgorithm a) {
  if (a == MlaDecodeAlgorithm::wgmma_alternating) return "wgmma_alternating";
  if (a == MlaDecodeAlgorithm::wgmma_cluster) return "wgmma_cluster";
  return a == MlaDecodeAlgorithm::register_q ? "register_q" : "wgmma";
}

// out[h, :] = Σ_t softmax_t(scale · q[h] · rows[t]) rows[t, 0:512] in fp64; q [heads, 576], rows [tokens, 576].
ref::MatrixD absorbed_attention(const ref::MatrixD& q, const ref::MatrixD& rows, double scale) {
  if (rows.rows() == 0) return ref::MatrixD::Zero(q.rows(), kLatent);
  ref::MatrixD p = q * rows.transpose() * scale;
  for (Index h = 0; h < p.rows(); ++h) {
    p.row(h).array() -= p.row(h).maxCoeff();
    p.row(h) = p.row(h).array().exp().matrix();
    p.row(h) /= p.row(h).sum();
  }
  return p * rows.leftCols(kLatent);
}

// out[i, h, :] = Σ_{j ≤ p_i} softmax_j(scale · q[i, h] · k[j, h]) v[j, h], p_i = kv_tokens − q_tokens + i, in fp64;
// q [q_tokens, heads·192], k [kv_tokens, heads·192], v [kv_tokens, heads·128]; returns [q_tokens, heads·128].
ref::MatrixD causal_attention(const ref::MatrixD& q, const ref::MatrixD& k, const ref::MatrixD& v, int heads,
                              double scale) {
  const Index q_tokens = q.rows(), kv_tokens = k.rows();
  ref::MatrixD out(q_tokens, Index(heads) * kValue);
  for (int h = 0; h < heads; ++h) {
    const ref::MatrixD keys = k.middleCols(Index(h) * kQk, kQk), values = v.middleCols(Index(h) * kValue, kValue);
    for (Index i = 0; i < q_tokens; ++i) {
      const Index visible = kv_tokens - q_tokens + i + 1;
      Eigen::VectorXd s = keys.topRows(visible) * q.row(i).segment(Index(h) * kQk, kQk).transpose() * scale;
      s = (s.array() - s.maxCoeff()).exp().matrix();
      s /= s.sum();
      out.row(i).segment(Index(h) * kValue, kValue) = s.transpose() * values.topRows(visible);
    }
  }
  return out;
}

ref::MatrixD to_double(const ref::Matrix& m) { return m.cast<double>(); }

// ---- Decode: the paged cache ----

struct DecodeCase {
  int heads, page_tokens;
  std::vector<int> contexts;  // one sequence each
};
// Contexts 1, 63, 64, 65 sit around a page and a tile; 1000 and 5000 span many splits; the order differs per case.
// 35 heads leave the second group of 32 part-filled (and wgmma's one group of 64); the case with max context 100
// runs as one split.
const DecodeCase kDecodeCases[] = {
    {3, 64, {1, 63, 64, 65, 1000, 5000}},  {35, 16, {5000, 65, 1, 1000, 64, 63}},
    {96, 16, {63, 1, 5000, 64, 1000, 65}}, {96, 64, {1000, 5000, 1, 65, 63, 64}},
    {96, 16, {1, 17, 63, 64, 65, 100}},
    // Around wgmma_alternating's 32-token tiles: 31/32/33/95/96/97, an empty sequence, and 1999 = 63 tiles over its 9
    // splits, 7 (odd) each; 97 gives 4 splits of one tile.
    {96, 16, {31, 97, 0, 33, 1999, 32, 96}},
    // Empty sequences among odd lengths, batch 8: 127/129/191 sit around wgmma's 64-token tiles, 4097 and 8191 span
    // many of its splits.
    {96, 64, {0, 129, 4097, 1, 0, 191, 8191, 127}},
};

std::string describe(const DecodeCase& c) {
  return fmt::format("heads {} page_tokens {} contexts {}", c.heads, c.page_tokens, fmt::join(c.contexts, " "));
}

__nv_bfloat16 bf16_nan() {
  __nv_bfloat16_raw raw;
  raw.x = 0xFFFF;
  return __nv_bfloat16(raw);
}

// A batch's cache laid out in scattered pages: every sequence's pages taken from a shuffled list of page ids; the
// slots past a sequence's length and one spare page (which the page-table entries past each sequence name) hold
// NaN, so a kernel that reads anything outside the context fails.
struct PagedCache {
  MlaDecodeShape shape{};
  std::vector<__nv_bfloat16> pages;  // [num_pages, page_tokens, 576]
  std::vector<int32_t> page_table;   // [batch, max_pages_per_sequence]
  std::vector<int32_t> contexts;
};

PagedCache build_paged_cache(const std::vector<ref::Matrix>& rows, int heads, int page_tokens, int64_t max_context,
                             std::mt19937& rng) {
  const int batch = int(rows.size());
  PagedCache pc;
  pc.shape = {batch, heads, page_tokens, int((max_context + page_tokens - 1) / page_tokens), max_context};
  int used = 0;
  for (const ref::Matrix& r : rows) used += int((r.rows() + page_tokens - 1) / page_tokens);
  const int num_pages = used + 3;
  std::vector<int32_t> ids(num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const int32_t poison_page = ids.back();
  pc.pages.assign(size_t(num_pages) * page_tokens * kWidth, bf16_nan());
  pc.page_table.assign(size_t(batch) * pc.shape.max_pages_per_sequence, poison_page);
  int next = 0;
  for (int b = 0; b < batch; ++b) {
    const std::vector<__nv_bfloat16> values = to_bf16(rows[b]);
    pc.contexts.push_back(int32_t(rows[b].rows()));
    for (Index t = 0; t < rows[b].rows(); ++t) {
      if (t % page_tokens == 0) pc.page_table[size_t(b) * pc.shape.max_pages_per_sequence + t / page_tokens] = ids[next++];
      const int32_t page = pc.page_table[size_t(b) * pc.shape.max_pages_per_sequence + t / page_tokens];
      std::copy_n(values.begin() + t * kWidth, kWidth,
                  pc.pages.begin() + (int64_t(page) * page_tokens + t % page_tokens) * kWidth);
    }
  }
  return pc;
}

struct DecodeData {
  DecodeCase c;
  ref::Matrix q;                  // [batch·heads, 576], bf16 values
  std::vector<ref::Matrix> rows;  // per sequence [context, 576], bf16 values
  PagedCache cache;
  ref::Matrix want;  // [batch·heads, 512]
};

// The reference for the first `contexts[b]` rows of each sequence.
ref::Matrix decode_reference(const ref::Matrix& q, const std::vector<ref::Matrix>& rows,
                             const std::vector<int32_t>& contexts, int heads, double scale) {
  ref::Matrix want(q.rows(), kLatent);
  for (size_t b = 0; b < rows.size(); ++b)
    want.middleRows(Index(b) * heads, heads) =
        absorbed_attention(to_double(q.middleRows(Index(b) * heads, heads)),
                           to_double(rows[b].topRows(contexts[b])), scale)
            .cast<float>();
  return want;
}

// Runs the kernel on device copies (output poisoned with NaN) for the given lengths; returns [batch·heads, 512].
struct DecodeDevice {
  DeviceBuffer<__nv_bfloat16> q, pages;
  DeviceBuffer<int32_t> page_table, contexts;
  DeviceBuffer<float> out, workspace;
  explicit DecodeDevice(const DecodeData& d)
      : q(to_bf16(d.q)),
        pages(d.cache.pages),
        page_table(d.cache.page_table),
        contexts(d.cache.contexts),
        out(size_t(d.q.rows()) * kLatent),
        workspace(std::max<size_t>(1, kernels::mla_decode_workspace_bytes(d.cache.shape) / sizeof(float))) {}
  cudaError_t launch(const MlaDecodeShape& shape, cudaStream_t stream, MlaDecodeAlgorithm algorithm) {
    return kernels::mla_decode_paged_bf16(q.get(), pages.get(), page_table.get(), contexts.get(), float(kK3Scale),
                                          shape, out.get(), workspace.get(), workspace.size() * sizeof(float), stream,
                                          algorithm);
  }
};

void expect_decode_matches(const ref::Matrix& got, const ref::Matrix& want, const DecodeData& d,
                           const std::vector<int32_t>& contexts, const std::string& label) {
  const int heads = d.c.heads;
  for (size_t b = 0; b < contexts.size(); ++b) {
    const ref::Matrix got_b = got.middleRows(Index(b) * heads, heads), want_b = want.middleRows(Index(b) * heads, heads);
    if (contexts[b] == 0) {
      EXPECT_TRUE(got_b.isZero(0.0)) << label << " " << describe(d.c) << ": sequence " << b << " has no tokens";
    } else {
      EXPECT_LE(normalized_error(got_b, want_b), tolerance_for<__nv_bfloat16>())
          << label << " " << describe(d.c) << ": sequence " << b << " context " << contexts[b];
    }
  }
}

TEST(GpuMla, DecodeMatchesDirectComputationOverScatteredPages) {
  std::mt19937 rng(20261210);
  std::vector<DecodeData> cases;
  for (const DecodeCase& c : kDecodeCases) {
    DecodeData d;
    d.c = c;
    const int batch = int(c.contexts.size());
    d.q = round_to_bf16(random_matrix(Index(batch) * c.heads, kWidth, rng, -2.0f, 2.0f));
    for (int t : c.contexts) d.rows.push_back(round_to_bf16(random_matrix(t, kWidth, rng)));
    const int64_t max_context = *std::max_element(c.contexts.begin(), c.contexts.end()) + 37;
    d.cache = build_paged_cache(d.rows, c.heads, c.page_tokens, max_context, rng);
    d.want = decode_reference(d.q, d.rows, d.cache.contexts, c.heads, kK3Scale);
    // CPU side: one cached token gives its own latent back; a long context mixes many (its output is much
    // shorter than a single row, whose norm is ≈ sqrt(512/3)).
    for (int b = 0; b < batch; ++b) {
      const ref::Matrix want_b = d.want.middleRows(Index(b) * c.heads, c.heads);
      if (c.contexts[b] == 1) {
        for (int h = 0; h < c.heads; ++h)
          EXPECT_LE((want_b.row(h) - d.rows[b].row(0).head(kLatent)).norm(), 1e-5) << describe(c);
      }
      if (c.contexts[b] >= 1000) {
        EXPECT_LT(want_b.row(0).norm(), 0.5 * std::sqrt(kLatent / 3.0)) << describe(c);
      }
    }
    cases.push_back(std::move(d));
  }
  EXPECT_EQ(kernels::mla_decode_num_splits(cases[4].cache.shape), 1);
  EXPECT_GT(kernels::mla_decode_num_splits(cases.front().cache.shape), 6);  // 1-token sequences get empty splits
  EXPECT_GT(kernels::mla_decode_wgmma_num_splits(cases.front().cache.shape), 6);
  EXPECT_GT(kernels::mla_decode_wgmma_num_splits(cases.back().cache.shape), 1);
  EXPECT_EQ(kernels::mla_decode_wgmma_num_splits(cases[5].cache.shape), 9);  // the 32-token-tile case's 9 splits

  K3_REQUIRE_GPU();
  for (const DecodeData& d : cases) {
    DecodeDevice dev(d);
    for (const MlaDecodeAlgorithm algorithm : decode_algorithms()) {
      CUDA_CHECK(cudaMemset(dev.out.get(), 0xFF, dev.out.size() * sizeof(float)));  // NaN: every row must be written
      CUDA_CHECK(dev.launch(d.cache.shape, nullptr, algorithm));
      const ref::Matrix got = from_f32(dev.out.download(), d.q.rows(), kLatent);
      expect_decode_matches(got, d.want, d, d.cache.contexts, "direct launch, " + name(algorithm));
    }
  }
}

TEST(GpuMla, DecodeGraphServesNewLengths) {
  // One capture; the replay reads the lengths from device memory, so new lengths need no new graph. The second set
  // shortens every sequence (the dropped rows hold real values, so reading past the length would show) and empties
  // one.
  std::mt19937 rng(20261211);
  DecodeData d;
  d.c = {35, 16, {5000, 65, 1, 1000, 64, 63}};
  d.q = round_to_bf16(random_matrix(Index(d.c.contexts.size()) * d.c.heads, kWidth, rng, -2.0f, 2.0f));
  for (int t : d.c.contexts) d.rows.push_back(round_to_bf16(random_matrix(t, kWidth, rng)));
  d.cache = build_paged_cache(d.rows, d.c.heads, d.c.page_tokens, 5000, rng);
  const std::vector<int32_t> shorter = {3333, 64, 0, 999, 33, 1};
  const ref::Matrix want_full = decode_reference(d.q, d.rows, d.cache.contexts, d.c.heads, kK3Scale);
  const ref::Matrix want_shorter = decode_reference(d.q, d.rows, shorter, d.c.heads, kK3Scale);

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
            cudaErrorInvalidValue);  // q not 16-byte aligned
  EXPECT_EQ(launch({0, 8, 64, 4, 256}), cudaSuccess);  // empty batch: nothing to do
  EXPECT_EQ(kernels::mla_decode_paged_bf16(nullptr, nullptr, nullptr, nullptr, 0.1f, {1, 8, 64, 4, 256}, nullptr,
                                           nullptr, 0, nullptr, static_cast<MlaDecodeAlgorithm>(7)),
            cudaErrorInvalidValue);  // no such algorithm (the enum's values are 0..3)
}

// ---- Prefill ----

struct PrefillCase {
  int q_tokens, kv_tokens, heads;
};
// Partial query blocks and key tiles (37, 65, 130, 200), a prefix (kv_tokens > q_tokens) that is and is not a
// multiple of the 64-key tile, one query over 300 keys, and the single-token case.
const PrefillCase kPrefillCases[] = {{1, 1, 1},   {37, 37, 3},    {64, 64, 1},  {130, 130, 5},
                                     {70, 200, 2}, {65, 129, 3}, {200, 333, 2}, {1, 300, 4}};

std::string describe(const PrefillCase& c) {
  return "q_tokens " + std::to_string(c.q_tokens) + " kv_tokens " + std::to_string(c.kv_tokens) + " heads " +
         std::to_string(c.heads);
}

ref::Matrix run_prefill(const ref::Matrix& q, const ref::Matrix& k, const ref::Matrix& v, int heads, double scale,
                        kernels::MlaPrefillAlgorithm algorithm) {
  const int q_tokens = int(q.rows()), kv_tokens = int(k.rows());
  DeviceBuffer<__nv_bfloat16> q_d(to_bf16(q)), k_d(to_bf16(k)), v_d(to_bf16(v));
  DeviceBuffer<__nv_bfloat16> out(size_t(q_tokens) * heads * kValue);
  CUDA_CHECK(kernels::mla_prefill_attention_bf16(q_d.get(), k_d.get(), v_d.get(), q_tokens, kv_tokens, heads,
                                                 float(scale), out.get(), nullptr, algorithm));
  return from_bf16(out.download(), q_tokens, Index(heads) * kValue);
}

TEST(GpuMla, PrefillMatchesDirectCausalAttention) {
  std::mt19937 rng(20261212);
  struct Data {
    PrefillCase c;
    ref::Matrix q, k, v, want;
  };
  std::vector<Data> cases;
  for (const PrefillCase& c : kPrefillCases) {
    Data d{c, round_to_bf16(random_matrix(c.q_tokens, Index(c.heads) * kQk, rng, -3.0f, 3.0f)),
           round_to_bf16(random_matrix(c.kv_tokens, Index(c.heads) * kQk, rng)),
           round_to_bf16(random_matrix(c.kv_tokens, Index(c.heads) * kValue, rng)), {}};
    d.want = causal_attention(to_double(d.q), to_double(d.k), to_double(d.v), c.heads, kK3Scale).cast<float>();
    // CPU side: query i sees keys 0 .. kv_tokens − q_tokens + i only: changing a later key leaves it alone.
    if (c.kv_tokens > c.q_tokens) {
      ref::Matrix k_later = d.k;
      k_later.row(c.kv_tokens - 1).setConstant(5.0f);
      const ref::Matrix moved =
          causal_attention(to_double(d.q), to_double(k_later), to_double(d.v), c.heads, kK3Scale).cast<float>();
      EXPECT_TRUE(moved.topRows(c.q_tokens - 1) == d.want.topRows(c.q_tokens - 1)) << describe(c);
      EXPECT_FALSE(moved.bottomRows(1) == d.want.bottomRows(1)) << describe(c);
    }
    cases.push_back(std::move(d));
  }
  K3_REQUIRE_GPU();
  using kernels::MlaPrefillAlgorithm;
  for (const auto& [algorithm, label] :
       {std::pair{MlaPrefillAlgorithm::automatic, "automatic"}, std::pair{MlaPrefillAlgorithm::flash_q64, "flash_q64"},
        std::pair{MlaPrefillAlgorithm::flash_q128, "flash_q128"},
        std::pair{MlaPrefillAlgorithm::flash_q256, "flash_q256"}, std::pair{MlaPrefillAlgorithm::wgmma, "wgmma"}}) {
    for (const Data& d : cases)
      EXPECT_LE(normalized_error(run_prefill(d.q, d.k, d.v, d.c.heads, kK3Scale, algorithm), d.want),
                tolerance_for<__nv_bfloat16>())
          << describe(d.c) << " " << label;
  }
}

TEST(GpuMla, PrefillRejectsInvalidArguments) {
  const auto launch = [](int q_tokens, int kv_tokens, int heads, float scale) {
    return kernels::mla_prefill_attention_bf16(nullptr, nullptr, nullptr, q_tokens, kv_tokens, heads, scale, nullptr,
                                               nullptr);
  };
  EXPECT_EQ(launch(8, 8, 0, 0.1f), cudaErrorInvalidValue);    // no heads
  EXPECT_EQ(launch(9, 8, 2, 0.1f), cudaErrorInvalidValue);    // more queries than keys
  EXPECT_EQ(launch(-1, 8, 2, 0.1f), cudaErrorInvalidValue);   // negative
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
  d.c = {heads, 16, {int(cache.latent.rows())}};
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
