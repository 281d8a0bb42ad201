// MLA attention against direct fp64 computations: the absorbed decode over a paged latent cache
// (mla_decode_paged_bf16, every MlaDecodeAlgorithm the device runs: scattered pages, mixed and empty lengths in one
// batch, empty splits) and the causal prefill in the expanded form (mla_prefill_attention_bf16, every
// MlaPrefillAlgorithm, with a cached prefix). Graph replays with new lengths, the split counts and the layer end to
// end: plain tests in tests/kernels/mla_gpu_test.cpp.
#include "kernels/mla_decode_wgmma.h"
#include "kernels/mla_decode_wgmma_cluster.h"
#include "tests/kernels/op_cases/cases.h"
#include "tests/kernels/op_cases/mla_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace k3::gpu_test {
namespace mla {

using Eigen::Index;
using kernels::MlaDecodeAlgorithm;
using kernels::MlaDecodeShape;

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

namespace {

__nv_bfloat16 bf16_nan() {
  __nv_bfloat16_raw raw;
  raw.x = 0xFFFF;
  return __nv_bfloat16(raw);
}

}  // namespace

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
      if (t % page_tokens == 0)
        pc.page_table[size_t(b) * pc.shape.max_pages_per_sequence + t / page_tokens] = ids[next++];
      const int32_t page = pc.page_table[size_t(b) * pc.shape.max_pages_per_sequence + t / page_tokens];
      std::copy_n(values.begin() + t * kWidth, kWidth,
                  pc.pages.begin() + (int64_t(page) * page_tokens + t % page_tokens) * kWidth);
    }
  }
  return pc;
}

// The reference for the first `contexts[b]` rows of each sequence.
ref::Matrix decode_reference(const ref::Matrix& q, const std::vector<ref::Matrix>& rows,
                             const std::vector<int32_t>& contexts, int heads, double scale) {
  ref::Matrix want(q.rows(), kLatent);
  for (size_t b = 0; b < rows.size(); ++b)
    want.middleRows(Index(b) * heads, heads) = absorbed_attention(to_double(q.middleRows(Index(b) * heads, heads)),
                                                                  to_double(rows[b].topRows(contexts[b])), scale)
                                                   .cast<float>();
  return want;
}

DecodeDevice::DecodeDevice(const DecodeData& d)
    : q(to_bf16(d.q)),
      pages(d.cache.pages),
      page_table(d.cache.page_table),
      contexts(d.cache.contexts),
      out(size_t(d.q.rows()) * kLatent),
      workspace(std::max<size_t>(1, kernels::mla_decode_workspace_bytes(d.cache.shape) / sizeof(float))) {}

cudaError_t DecodeDevice::launch(const MlaDecodeShape& shape, cudaStream_t stream, MlaDecodeAlgorithm algorithm) {
  return kernels::mla_decode_paged_bf16(q.get(), pages.get(), page_table.get(), contexts.get(), float(kK3Scale), shape,
                                        out.get(), workspace.get(), workspace.size() * sizeof(float), stream,
                                        algorithm);
}

std::vector<double> decode_errors(const ref::Matrix& got, const ref::Matrix& want, int heads,
                                  const std::vector<int32_t>& contexts) {
  std::vector<double> errors;
  for (size_t b = 0; b < contexts.size(); ++b) {
    const ref::Matrix got_b = got.middleRows(Index(b) * heads, heads),
                      want_b = want.middleRows(Index(b) * heads, heads);
    errors.push_back(contexts[b] == 0 ? (got_b.isZero(0.0) ? 0.0 : INFINITY) : normalized_error(got_b, want_b));
  }
  return errors;
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

}  // namespace mla

namespace {

using namespace mla;
using kernels::MlaDecodeAlgorithm;

// The decode shapes' "contexts" dimension: one sequence per entry. 1, 63, 64, 65 sit around a page and a tile; 1000
// and 5000 span many splits; the order differs per set. 35 heads leave the second group of 32 part-filled (and
// wgmma's one group of 64); set 4 (max context 100) runs as one split. Set 5: around wgmma_alternating's 32-token
// tiles (31/32/33/95/96/97), an empty sequence, and 1999 = 63 tiles over its 9 splits, 7 (odd) each; 97 gives 4
// splits of one tile. Set 6: empty sequences among odd lengths, batch 8: 127/129/191 sit around wgmma's 64-token
// tiles, 4097 and 8191 span many of its splits.
const std::vector<int> kContexts[] = {
    {1, 63, 64, 65, 1000, 5000},         {5000, 65, 1, 1000, 64, 63}, {63, 1, 5000, 64, 1000, 65},
    {1000, 5000, 1, 65, 63, 64},         {1, 17, 63, 64, 65, 100},    {31, 97, 0, 33, 1999, 32, 96},
    {0, 129, 4097, 1, 0, 191, 8191, 127}};

std::vector<Variant> decode_variants() {
  return {variant(MlaDecodeAlgorithm::register_q, "register_q"),
          variant(MlaDecodeAlgorithm::wgmma_alternating, "wgmma_alternating"),
          variant(MlaDecodeAlgorithm::wgmma_cluster, "wgmma_cluster")};
}

OpCase decode_case() {
  OpCase c{"mla_decode_paged_bf16", OpKind::mla_attention};
  const int dims[][3] = {{3, 64, 0}, {35, 16, 1}, {96, 16, 2}, {96, 64, 3}, {96, 16, 4}, {96, 16, 5}, {96, 64, 6}};
  for (const auto& d : dims) c.shapes.push_back(shape({{"heads", d[0]}, {"page_tokens", d[1]}, {"contexts", d[2]}}));
  c.variants = decode_variants();
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int heads = int(s["heads"]), page_tokens = int(s["page_tokens"]);
    const std::vector<int>& contexts = kContexts[s["contexts"]];
    const int batch = int(contexts.size());
    auto d = std::make_shared<DecodeData>();
    d->heads = heads;
    d->q = round_to_bf16(random_matrix(Index(batch) * heads, kWidth, rng, -2.0f, 2.0f));
    for (int t : contexts) d->rows.push_back(round_to_bf16(random_matrix(t, kWidth, rng)));
    const int64_t max_context = *std::max_element(contexts.begin(), contexts.end()) + 37;
    d->cache = build_paged_cache(d->rows, heads, page_tokens, max_context, rng);
    const ref::Matrix want = decode_reference(d->q, d->rows, d->cache.contexts, heads, kK3Scale);
    // One cached token gives its own latent back; a long context mixes many (its output is much shorter than a
    // single row, whose norm is ≈ sqrt(512/3)).
    for (int b = 0; b < batch; ++b) {
      const ref::Matrix want_b = want.middleRows(Index(b) * heads, heads);
      if (contexts[size_t(b)] == 1) {
        for (int h = 0; h < heads; ++h) {
          cpu.expect((want_b.row(h) - d->rows[size_t(b)].row(0).head(kLatent)).norm() <= 1e-5,
                     "one token gives its latent back");
        }
      }
      if (contexts[size_t(b)] >= 1000) {
        cpu.expect(want_b.row(0).norm() < 0.5 * std::sqrt(kLatent / 3.0), "a long context mixes many rows");
      }
    }
    // The sets reach the split structure they are for.
    const MlaDecodeShape& shape = d->cache.shape;
    switch (s["contexts"]) {
      case 0:
        cpu.expect(kernels::mla_decode_num_splits(shape) > 6, "1-token sequences get empty splits");
        cpu.expect(kernels::mla_decode_wgmma_num_splits(shape) > 6, "wgmma: more than 6 splits");
        break;
      case 4: cpu.equal("one split", kernels::mla_decode_num_splits(shape), 1); break;
      case 5: cpu.equal("wgmma: 9 splits", kernels::mla_decode_wgmma_num_splits(shape), 9); break;
      case 6: cpu.expect(kernels::mla_decode_wgmma_num_splits(shape) > 1, "wgmma: several splits"); break;
      default: break;
    }
    return [d, want](const Variant& v, Checks& gpu) {
      const auto algorithm = algorithm_of<MlaDecodeAlgorithm>(v);
      const std::vector<MlaDecodeAlgorithm> runs = decode_algorithms();
      DecodeDevice dev(*d);
      const cudaError_t status = dev.launch(d->cache.shape, nullptr, algorithm);
      if (std::find(runs.begin(), runs.end(), algorithm) == runs.end()) {  // not compute capability 9.0
        gpu.expect(status != cudaSuccess, "refused on a device that cannot run it");
        (void)cudaGetLastError();
        return;
      }
      CUDA_CHECK(status);
      const std::vector<double> errors =
          decode_errors(from_f32(dev.out.download(), d->q.rows(), kLatent), want, d->heads, d->cache.contexts);
      for (size_t b = 0; b < errors.size(); ++b) {
        gpu.near(fmt::format("sequence {} (context {})", b, d->cache.contexts[b]), errors[b],
                 tolerance_for<__nv_bfloat16>());
      }
    };
  };
  return c;
}

OpCase prefill_case() {
  OpCase c{"mla_prefill_attention_bf16", OpKind::mla_attention};
  // Partial query blocks and key tiles (37, 65, 130, 200), a prefix (kv_tokens > q_tokens) that is and is not a
  // multiple of the 64-key tile, one query over 300 keys, and the single-token case.
  const int dims[][3] = {{1, 1, 1},    {37, 37, 3},  {64, 64, 1},   {130, 130, 5},
                         {70, 200, 2}, {65, 129, 3}, {200, 333, 2}, {1, 300, 4}};
  for (const auto& d : dims) c.shapes.push_back(shape({{"q_tokens", d[0]}, {"kv_tokens", d[1]}, {"heads", d[2]}}));
  using kernels::MlaPrefillAlgorithm;
  c.variants = {variant(MlaPrefillAlgorithm::automatic, "automatic"),
                variant(MlaPrefillAlgorithm::flash_q64, "flash_q64"),
                variant(MlaPrefillAlgorithm::flash_q128, "flash_q128"),
                variant(MlaPrefillAlgorithm::flash_q256, "flash_q256"), variant(MlaPrefillAlgorithm::wgmma, "wgmma")};
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const int q_tokens = int(s["q_tokens"]), kv_tokens = int(s["kv_tokens"]), heads = int(s["heads"]);
    const ref::Matrix q = round_to_bf16(random_matrix(q_tokens, Index(heads) * kQk, rng, -3.0f, 3.0f));
    const ref::Matrix k = round_to_bf16(random_matrix(kv_tokens, Index(heads) * kQk, rng));
    const ref::Matrix v = round_to_bf16(random_matrix(kv_tokens, Index(heads) * kValue, rng));
    const ref::Matrix want = causal_attention(to_double(q), to_double(k), to_double(v), heads, kK3Scale).cast<float>();
    // Query i sees keys 0 .. kv_tokens − q_tokens + i only: changing a later key leaves it alone.
    if (kv_tokens > q_tokens) {
      ref::Matrix k_later = k;
      k_later.row(kv_tokens - 1).setConstant(5.0f);
      const ref::Matrix moved =
          causal_attention(to_double(q), to_double(k_later), to_double(v), heads, kK3Scale).cast<float>();
      cpu.expect(moved.topRows(q_tokens - 1) == want.topRows(q_tokens - 1), "earlier queries do not see a later key");
      cpu.expect(!(moved.bottomRows(1) == want.bottomRows(1)), "the last query sees the last key");
    }
    return [=](const Variant& variant, Checks& gpu) {
      const ref::Matrix got = run_prefill(q, k, v, heads, kK3Scale, algorithm_of<MlaPrefillAlgorithm>(variant));
      gpu.near("out", normalized_error(got, want), tolerance_for<__nv_bfloat16>());
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> mla_attention_cases() { return {decode_case(), prefill_case()}; }

}  // namespace k3::gpu_test
