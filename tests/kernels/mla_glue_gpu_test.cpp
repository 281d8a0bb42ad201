// MLA glue kernels beside their op cases (tests/kernels/op_cases/mla_cache_cases.cpp: the paged latent cache's append
// and gather; mla_absorb_cases.cpp: absorb_q, apply_v and assemble_kv): argument rejection.
#include "gpu_harness.h"
#include "kernels/mla_absorb.h"
#include "kernels/mla_latent_cache.h"

#include <cstdint>

namespace k3::gpu_test {
namespace {

constexpr float kLatentEps = 1e-6f;  // the K3 reference's kv_a norm epsilon

// Argument checks come before any launch, so they hold (and run) without a device.
TEST(GpuMlaLatentCache, RejectsBadArguments) {
  alignas(16) static __nv_bfloat16 kv[64], w[16], pages[64], out[64];
  static int32_t table[4];
  const auto append = [&](int r, int dr, int64_t stride, int tokens, int64_t first, int max_pages, int page_tokens) {
    return kernels::mla_cache_append_bf16(kv, stride, w, kLatentEps, r, dr, tokens, nullptr, first, nullptr, table,
                                          max_pages, page_tokens, pages, nullptr);
  };
  EXPECT_EQ(append(0, 8, 8, 1, 0, 4, 16), cudaErrorInvalidValue);
  EXPECT_EQ(append(16, -1, 16, 1, 0, 4, 16), cudaErrorInvalidValue);
  EXPECT_EQ(append(16, 8, 23, 1, 0, 4, 16), cudaErrorInvalidValue);  // kv row stride below r + dr
  EXPECT_EQ(append(16, 8, 24, -1, 0, 4, 16), cudaErrorInvalidValue);
  EXPECT_EQ(append(16, 8, 24, 1, -1, 4, 16), cudaErrorInvalidValue);
  EXPECT_EQ(append(16, 8, 24, 1, 0, 0, 16), cudaErrorInvalidValue);
  EXPECT_EQ(append(16, 8, 24, 1, 0, 4, 0), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_cache_append_bf16(kv, 24, w, kLatentEps, 16, 8, 1, nullptr, 0, nullptr, nullptr, 4, 16, pages,
                                           nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_cache_append_bf16(nullptr, 24, w, kLatentEps, 16, 8, 1, nullptr, 0, nullptr, table, 4, 16,
                                           pages, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(append(16, 8, 24, 0, 0, 4, 16), cudaSuccess);

  EXPECT_EQ(kernels::mla_cache_gather_bf16(pages, table, 0, 24, 1, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_cache_gather_bf16(pages, table, 16, 0, 1, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_cache_gather_bf16(pages, table, 16, 24, -1, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_cache_gather_bf16(pages, nullptr, 16, 24, 1, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_cache_gather_bf16(pages + 1, table, 16, 24, 1, out, nullptr), cudaErrorMisalignedAddress);
  EXPECT_EQ(kernels::mla_cache_gather_bf16(pages, table, 16, 24, 1, out + 4, nullptr), cudaErrorMisalignedAddress);
  EXPECT_EQ(kernels::mla_cache_gather_bf16(pages + 1, table, 16, 21, 0, out, nullptr), cudaSuccess);  // scalar path
}

// Argument checks come before any launch, so they hold (and run) without a device.
TEST(GpuMlaAbsorb, RejectsBadArguments) {
  alignas(16) static __nv_bfloat16 q[64], kv_b[64], out[64], gate[64];
  alignas(16) static float lat[64];
  const kernels::MlaDims ok{3, 16, 8, 16, 32};
  for (kernels::MlaDims bad :
       {kernels::MlaDims{0, 16, 8, 16, 32}, kernels::MlaDims{3, 0, 8, 16, 32}, kernels::MlaDims{3, 16, -1, 16, 32},
        kernels::MlaDims{3, 16, 8, 0, 32}, kernels::MlaDims{3, 16, 8, 16, 0}}) {
    EXPECT_EQ(kernels::mla_absorb_q_bf16(q, 1000, kv_b, bad, 1, out, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(kernels::mla_apply_v_bf16(lat, kv_b, nullptr, 0, bad, 1, out, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(kernels::mla_assemble_kv_bf16(kv_b, q, bad, 1, out, out, nullptr), cudaErrorInvalidValue);
  }
  EXPECT_EQ(kernels::mla_absorb_q_bf16(q, 3 * 24 - 1, kv_b, ok, 1, out, nullptr), cudaErrorInvalidValue);  // stride
  EXPECT_EQ(kernels::mla_absorb_q_bf16(q, 3 * 24, kv_b, ok, -1, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_absorb_q_bf16(nullptr, 3 * 24, kv_b, ok, 1, out, nullptr), cudaErrorInvalidValue);
  // dn = 2048 needs 64 KiB of shared memory for per_column's token tile of 8: refused rather than a failed launch;
  // weight_stream refuses dn = 12288 at one token (48 KiB of q + 8 KiB of partial sums) and r not a multiple of 8.
  EXPECT_EQ(kernels::mla_absorb_q_bf16(q, 2048 + 8, kv_b, kernels::MlaDims{1, 2048, 8, 16, 32}, 1, out, nullptr,
                                       kernels::MlaAbsorbAlgorithm::per_column),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_absorb_q_bf16(q, 12288 + 8, kv_b, kernels::MlaDims{1, 12288, 8, 16, 32}, 1, out, nullptr,
                                       kernels::MlaAbsorbAlgorithm::weight_stream),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_absorb_q_bf16(q, 3 * 24, kv_b, kernels::MlaDims{3, 16, 8, 16, 20}, 1, out, nullptr,
                                       kernels::MlaAbsorbAlgorithm::weight_stream),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_apply_v_bf16(lat, kv_b, nullptr, 0, kernels::MlaDims{3, 16, 8, 16, 20}, 1, out, nullptr,
                                      kernels::MlaAbsorbAlgorithm::weight_stream),
            cudaErrorInvalidValue);
  // mma_tiled: r a multiple of 8 (as weight_stream), and apply_v's latent 16-byte aligned.
  EXPECT_EQ(kernels::mla_absorb_q_bf16(q, 3 * 24, kv_b, kernels::MlaDims{3, 16, 8, 16, 20}, 1, out, nullptr,
                                       kernels::MlaAbsorbAlgorithm::mma_tiled),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_apply_v_bf16(lat, kv_b, nullptr, 0, kernels::MlaDims{3, 16, 8, 16, 20}, 1, out, nullptr,
                                      kernels::MlaAbsorbAlgorithm::mma_tiled),
            cudaErrorInvalidValue);
  EXPECT_EQ(
      kernels::mla_apply_v_bf16(lat + 1, kv_b, nullptr, 0, ok, 1, out, nullptr, kernels::MlaAbsorbAlgorithm::mma_tiled),
      cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_absorb_q_bf16(q, 3 * 24, kv_b, ok, 0, out, nullptr), cudaSuccess);

  EXPECT_EQ(kernels::mla_apply_v_bf16(lat, kv_b, nullptr, 0, kernels::MlaDims{3, 16, 8, 12, 32}, 1, out, nullptr),
            cudaErrorInvalidValue);  // dv not a multiple of 8
  EXPECT_EQ(kernels::mla_apply_v_bf16(lat, kv_b, gate, 3 * 16 - 1, ok, 1, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_apply_v_bf16(lat, kv_b, nullptr, 0, kernels::MlaDims{3, 16, 8, 16, 2048}, 1, out, nullptr,
                                      kernels::MlaAbsorbAlgorithm::per_column),
            cudaErrorInvalidValue);  // 64 KiB of latent tile (8 tokens)
  EXPECT_EQ(kernels::mla_apply_v_bf16(lat, kv_b, nullptr, 0, kernels::MlaDims{3, 16, 8, 16, 16384}, 1, out, nullptr,
                                      kernels::MlaAbsorbAlgorithm::weight_stream),
            cudaErrorInvalidValue);  // 64 KiB of latent tile (1 token)
  EXPECT_EQ(kernels::mla_apply_v_bf16(lat, kv_b, nullptr, 0, ok, -1, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_apply_v_bf16(lat, kv_b, nullptr, 0, ok, 0, out, nullptr), cudaSuccess);

  EXPECT_EQ(kernels::mla_assemble_kv_bf16(kv_b, q, ok, -1, out, out, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_assemble_kv_bf16(kv_b, q, ok, 1, out, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::mla_assemble_kv_bf16(kv_b, q, ok, 0, out, out, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace k3::gpu_test
