// What the MLA attention op cases (mla_cases.cpp) share with the plain MLA tests beside them
// (tests/kernels/mla_gpu_test.cpp): the fp64 attention references, a batch's paged latent cache, the decode kernel on
// device copies, and the decode algorithms the current device runs.
#pragma once

#include "engine/reference/tensor.h"
#include "kernels/mla_decode_paged.h"
#include "kernels/mla_prefill.h"
#include "tests/kernels/op_cases/device_data.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace k3::gpu_test::mla {

inline constexpr int kWidth = kernels::kMlaDecodeCacheWidth;  // 576
inline constexpr int kLatent = kernels::kMlaDecodeLatentDim;  // 512
inline constexpr int kQk = kernels::kMlaPrefillQkDim;         // 192
inline constexpr int kValue = kernels::kMlaPrefillValueDim;   // 128
inline const double kK3Scale = 1.0 / std::sqrt(double(kQk));  // 192^-1/2

// Every decode algorithm the current device runs: the wgmma ones only on compute capability 9.0 (on an H200 all).
std::vector<kernels::MlaDecodeAlgorithm> decode_algorithms();
std::string name(kernels::MlaDecodeAlgorithm a);

// out[h, :] = Σ_t softmax_t(scale · q[h] · rows[t]) rows[t, 0:512] in fp64; q [heads, 576], rows [tokens, 576].
ref::MatrixD absorbed_attention(const ref::MatrixD& q, const ref::MatrixD& rows, double scale);
// out[i, h, :] = Σ_{j ≤ p_i} softmax_j(scale · q[i, h] · k[j, h]) v[j, h], p_i = kv_tokens − q_tokens + i, in fp64;
// q [q_tokens, heads·192], k [kv_tokens, heads·192], v [kv_tokens, heads·128]; returns [q_tokens, heads·128].
ref::MatrixD causal_attention(const ref::MatrixD& q, const ref::MatrixD& k, const ref::MatrixD& v, int heads,
                              double scale);
inline ref::MatrixD to_double(const ref::Matrix& m) { return m.cast<double>(); }

// A batch's cache laid out in scattered pages: every sequence's pages taken from a shuffled list of page ids; the
// slots past a sequence's length and one spare page (which the page-table entries past each sequence name) hold
// NaN, so a kernel that reads anything outside the context fails.
struct PagedCache {
  kernels::MlaDecodeShape shape{};
  std::vector<__nv_bfloat16> pages;  // [num_pages, page_tokens, 576]
  std::vector<int32_t> page_table;   // [batch, max_pages_per_sequence]
  std::vector<int32_t> contexts;
};
PagedCache build_paged_cache(const std::vector<ref::Matrix>& rows, int heads, int page_tokens, int64_t max_context,
                             std::mt19937& rng);

struct DecodeData {
  int heads = 0;
  ref::Matrix q;                  // [batch·heads, 576], bf16 values
  std::vector<ref::Matrix> rows;  // per sequence [context, 576], bf16 values
  PagedCache cache;
};
// The reference for the first `contexts[b]` rows of each sequence: [batch·heads, 512].
ref::Matrix decode_reference(const ref::Matrix& q, const std::vector<ref::Matrix>& rows,
                             const std::vector<int32_t>& contexts, int heads, double scale);

// The decode kernel on device copies (output poisoned with NaN).
struct DecodeDevice {
  DeviceBuffer<__nv_bfloat16> q, pages;
  DeviceBuffer<int32_t> page_table, contexts;
  DeviceBuffer<float> out, workspace;
  explicit DecodeDevice(const DecodeData& d);
  cudaError_t launch(const kernels::MlaDecodeShape& shape, cudaStream_t stream, kernels::MlaDecodeAlgorithm algorithm);
};

// Per sequence of the batch: its normalised error against `want`, or, for an empty context, 0 when its rows are
// exactly zero and infinity otherwise.
std::vector<double> decode_errors(const ref::Matrix& got, const ref::Matrix& want, int heads,
                                  const std::vector<int32_t>& contexts);

// The prefill kernel on bf16 copies of q, k, v: [q_tokens, heads·128].
ref::Matrix run_prefill(const ref::Matrix& q, const ref::Matrix& k, const ref::Matrix& v, int heads, double scale,
                        kernels::MlaPrefillAlgorithm algorithm);

}  // namespace k3::gpu_test::mla
