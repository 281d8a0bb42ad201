// MLA glue kernels against the CPU. The paged latent cache: append writes ref::mla's append_latent rows
// [ref::rmsnorm(c)·w | k_r] at (page_table[seq, pos / page_tokens], pos % page_tokens) and nothing else (pages
// pre-filled with a pattern, unused page-table entries pointing at a trap page), for one sequence from a position
// inside a page and for a decode batch with device positions and sequence rows; gather copies exactly the stored
// rows. The absorbed form's assemble_kv against direct indexing, and its argument checks (absorb_q and apply_v
// against fp64 loops are cases of the op table, tests/gpu/op_cases/mla_absorb_cases.cpp). Elementwise bounds: one
// bf16 rounding (≤ 2^-8 relative) of an fp32 result within a stated error of the exact value.
#include "engine/reference/basic_ops.h"
#include "gpu_harness.h"
#include "kernels/mla_absorb.h"
#include "kernels/mla_latent_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace k3::gpu_test {
namespace {

using Eigen::Index;

constexpr float kLatentEps = 1e-6f;          // the K3 reference's kv_a norm epsilon
constexpr double kBf16Rounding = 1.0 / 256;  // 2^-8: RNE to bf16 moves a value by at most this, relatively

using gpu_test::bits_of;  // the bf16 one (device_data.h), beside this overload
std::vector<uint16_t> bits_of(const std::vector<__nv_bfloat16>& v) {
  std::vector<uint16_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(uint16_t));
  return b;
}
float value_of(__nv_bfloat16 v) { return __bfloat162float(v); }

// |got − want| within one bf16 rounding of a value that is itself within accumulation_error of want.
bool within_bf16(float got, double want, double accumulation_error) {
  return std::isfinite(got) &&
         std::abs(double(got) - want) <= kBf16Rounding * (std::abs(want) + accumulation_error) + accumulation_error;
}

// ---- Latent cache: append ----

struct CacheShape {
  int r, dr, page_tokens;
};
const CacheShape kCacheShapes[] = {{16, 8, 16}, {16, 8, 64}, {512, 64, 64}, {512, 64, 16}};

std::string describe(const CacheShape& s) {
  return "r " + std::to_string(s.r) + " dr " + std::to_string(s.dr) + " page_tokens " + std::to_string(s.page_tokens);
}

// One append call's inputs and the pool's contents before and after, as the reference expects them.
struct AppendScenario {
  std::string name;
  CacheShape s;
  int tokens = 0, kv_pad = 0, max_pages = 0, num_pages = 0;
  int64_t first_position = 0;
  std::vector<int32_t> positions, sequence_rows;  // empty: the kernel gets null
  std::vector<int32_t> page_table;                // [sequence rows, max_pages]
  std::vector<__nv_bfloat16> kv, weight, pool;    // kv [tokens, r + dr + pad]; pool [num_pages, page_tokens, r + dr]
  std::vector<int64_t> written_row;               // per token: its row in the pool (page · page_tokens + slot)
  ref::Matrix want_latent;                        // [tokens, r]: ref::rmsnorm(c)·w
  std::vector<int64_t> sequence_length;           // per sequence row: cached tokens after the append
};

int64_t width_of(const CacheShape& s) { return s.r + s.dr; }

// Fills the page table: each sequence row gets distinct pages for its first `length` tokens, shuffled over the pool;
// every other entry points at the trap page (the last one), which a correct kernel never writes.
void assign_pages(AppendScenario& a, int sequence_rows, std::mt19937& rng) {
  std::vector<int32_t> pages_needed(static_cast<size_t>(sequence_rows));
  int total = 0;
  for (int row = 0; row < sequence_rows; ++row) {
    pages_needed[size_t(row)] = int32_t((a.sequence_length[size_t(row)] + a.s.page_tokens - 1) / a.s.page_tokens);
    a.max_pages = std::max(a.max_pages, int(pages_needed[size_t(row)]) + 1);
    total += pages_needed[size_t(row)];
  }
  a.num_pages = total + 3;  // two spare pages and the trap page
  std::vector<int32_t> ids(static_cast<size_t>(a.num_pages - 1));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const int32_t trap = a.num_pages - 1;
  a.page_table.assign(size_t(sequence_rows) * a.max_pages, trap);
  size_t next = 0;
  for (int row = 0; row < sequence_rows; ++row) {
    for (int p = 0; p < pages_needed[size_t(row)]; ++p) a.page_table[size_t(row) * a.max_pages + p] = ids[next++];
  }
}

// kv, weight, the pool's pattern, and the reference rows, once the positions and page table are set.
void prepare_rows(AppendScenario& a, std::mt19937& rng) {
  const CacheShape& s = a.s;
  const int64_t width = width_of(s), kv_stride = width + a.kv_pad;
  a.kv = random_bf16(size_t(a.tokens) * kv_stride, rng, -2.0f, 2.0f);
  for (int t = 0; t < a.tokens; ++t) {
    for (int64_t i = width; i < kv_stride; ++i) {
      a.kv[size_t(t * kv_stride + i)] = __float2bfloat16_rn(std::numeric_limits<float>::quiet_NaN());
    }
  }
  a.weight = random_bf16(size_t(s.r), rng, 0.5f, 1.5f);
  a.pool = random_bf16(size_t(a.num_pages) * s.page_tokens * width, rng, 10.0f, 20.0f);  // the known pattern

  ref::Matrix c(a.tokens, s.r);
  ref::Vector w(s.r);
  for (int i = 0; i < s.r; ++i) w(i) = value_of(a.weight[size_t(i)]);
  for (int t = 0; t < a.tokens; ++t) {
    for (int i = 0; i < s.r; ++i) c(t, i) = value_of(a.kv[size_t(t * kv_stride + i)]);
    const int64_t pos = a.positions.empty() ? a.first_position + t : a.positions[size_t(t)];
    const int seq = a.sequence_rows.empty() ? 0 : a.sequence_rows[size_t(t)];
    const int32_t page = a.page_table[size_t(seq) * a.max_pages + size_t(pos / s.page_tokens)];
    a.written_row.push_back(int64_t(page) * s.page_tokens + pos % s.page_tokens);
  }
  a.want_latent = ref::rmsnorm(c, w, kLatentEps);
}

// One sequence (row 0), positions first_position.. with first_position inside a page and the tokens crossing
// at least one page boundary.
AppendScenario one_sequence(const CacheShape& s, std::mt19937& rng) {
  AppendScenario a;
  a.name = "one sequence";
  a.s = s;
  a.first_position = s.page_tokens + s.page_tokens / 2 + 3;
  a.tokens = s.page_tokens + 5;
  a.kv_pad = 3;
  a.sequence_length = {a.first_position + a.tokens};
  assign_pages(a, 1, rng);
  prepare_rows(a, rng);
  return a;
}

// A decode-style batch: tokens for sequence rows {4, 0, 5, 2, 2} (row 2 gets two consecutive positions, rows 1 and
// 3 nothing), at lengths 0, one short of a page, a full page and several pages.
AppendScenario decode_batch(const CacheShape& s, std::mt19937& rng) {
  AppendScenario a;
  a.name = "decode batch";
  a.s = s;
  const int P = s.page_tokens;
  const std::vector<int64_t> length_before = {P - 1, 2 * P + 3, 3 * P + 7, 5, P, 0};  // per sequence row
  a.sequence_rows = {4, 0, 5, 2, 2};
  a.sequence_length = length_before;
  for (const int32_t row : a.sequence_rows) a.positions.push_back(int32_t(a.sequence_length[size_t(row)]++));
  a.tokens = int(a.sequence_rows.size());
  a.kv_pad = 0;
  assign_pages(a, int(length_before.size()), rng);
  prepare_rows(a, rng);
  return a;
}

// Every pool row: the written ones hold [≈ want_latent | k_r exactly], every other row its pattern, bit for bit.
void check_pool(const AppendScenario& a, const std::vector<__nv_bfloat16>& got) {
  const CacheShape& s = a.s;
  const int64_t width = width_of(s), kv_stride = width + a.kv_pad, rows = int64_t(a.num_pages) * s.page_tokens;
  std::vector<int> token_of_row(size_t(rows), -1);
  for (int t = 0; t < a.tokens; ++t) token_of_row[size_t(a.written_row[size_t(t)])] = t;
  int64_t bad_latent = 0, bad_rope = 0, changed = 0;
  for (int64_t row = 0; row < rows; ++row) {
    const int t = token_of_row[size_t(row)];
    for (int64_t i = 0; i < width; ++i) {
      const size_t at = size_t(row * width + i);
      if (t < 0) {
        changed += bits_of(got[at]) == bits_of(a.pool[at]) ? 0 : 1;
      } else if (i < s.r) {
        const double want = a.want_latent(t, i);
        // fp32 sum of r squares, rsqrtf and two products: within 3e-5 relative (r ≤ 512).
        bad_latent += within_bf16(value_of(got[at]), want, 3e-5 * std::abs(want)) ? 0 : 1;
      } else {
        bad_rope += bits_of(got[at]) == bits_of(a.kv[size_t(t * kv_stride + i)]) ? 0 : 1;
      }
    }
  }
  EXPECT_EQ(bad_latent, 0) << a.name << " " << describe(s);
  EXPECT_EQ(bad_rope, 0) << a.name << " " << describe(s);
  EXPECT_EQ(changed, 0) << a.name << " " << describe(s) << ": elements outside the appended rows changed";
}

// The first sequence_length rows of every sequence row through gather, against direct indexing of the pool.
void check_gather(const AppendScenario& a, DeviceBuffer<__nv_bfloat16>& pool, DeviceBuffer<int32_t>& page_table,
                  const std::vector<__nv_bfloat16>& pool_after) {
  const CacheShape& s = a.s;
  const int64_t width = width_of(s);
  for (size_t row = 0; row < a.sequence_length.size(); ++row) {
    const int64_t tokens = a.sequence_length[row];
    if (tokens == 0) continue;
    DeviceBuffer<__nv_bfloat16> out(static_cast<size_t>(tokens * width));
    CUDA_CHECK(kernels::mla_cache_gather_bf16(pool.get(), page_table.get() + row * a.max_pages, s.page_tokens,
                                              int(width), tokens, out.get(), nullptr));
    std::vector<__nv_bfloat16> want(static_cast<size_t>(tokens * width));
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t page = a.page_table[row * a.max_pages + size_t(t / s.page_tokens)];
      std::copy_n(pool_after.begin() + (page * s.page_tokens + t % s.page_tokens) * width, width,
                  want.begin() + t * width);
    }
    EXPECT_TRUE(bits_of(out.download()) == bits_of(want)) << a.name << " " << describe(s) << " sequence row " << row;
  }
}

TEST(GpuMlaLatentCache, AppendWritesNormalisedRowsAndNothingElse) {
  std::mt19937 rng(20261212);
  std::vector<AppendScenario> scenarios;
  for (const CacheShape& s : kCacheShapes) {
    scenarios.push_back(one_sequence(s, rng));
    scenarios.push_back(decode_batch(s, rng));
  }
  for (const AppendScenario& a : scenarios) {
    // CPU side: the scenario is what it claims: distinct target rows, a page boundary crossed, a finite reference.
    std::vector<int64_t> rows = a.written_row;
    std::sort(rows.begin(), rows.end());
    EXPECT_TRUE(std::adjacent_find(rows.begin(), rows.end()) == rows.end()) << a.name;
    std::vector<int64_t> pages;
    for (int64_t row : a.written_row) pages.push_back(row / a.s.page_tokens);
    std::sort(pages.begin(), pages.end());
    EXPECT_GE(std::unique(pages.begin(), pages.end()) - pages.begin(), 2) << a.name << " " << describe(a.s);
    ASSERT_TRUE(a.want_latent.allFinite()) << a.name;
  }

  K3_REQUIRE_GPU();
  for (const AppendScenario& a : scenarios) {
    const CacheShape& s = a.s;
    DeviceBuffer<__nv_bfloat16> kv(a.kv), weight(a.weight), pool(a.pool);
    DeviceBuffer<int32_t> page_table(a.page_table);
    std::unique_ptr<DeviceBuffer<int32_t>> positions, sequence_rows;
    if (!a.positions.empty()) positions = std::make_unique<DeviceBuffer<int32_t>>(a.positions);
    if (!a.sequence_rows.empty()) sequence_rows = std::make_unique<DeviceBuffer<int32_t>>(a.sequence_rows);
    CUDA_CHECK(kernels::mla_cache_append_bf16(kv.get(), width_of(s) + a.kv_pad, weight.get(), kLatentEps, s.r, s.dr,
                                              a.tokens, positions ? positions->get() : nullptr, a.first_position,
                                              sequence_rows ? sequence_rows->get() : nullptr, page_table.get(),
                                              a.max_pages, s.page_tokens, pool.get(), nullptr));
    const std::vector<__nv_bfloat16> after = pool.download();
    check_pool(a, after);
    check_gather(a, pool, page_table, after);
  }
}

// ---- Latent cache: gather on its own (scalar path for widths not a multiple of 8) ----

TEST(GpuMlaLatentCache, GatherCopiesPagedRows) {
  struct Case {
    int width, page_tokens;
    int64_t tokens;
  };
  const Case cases[] = {{21, 16, 50}, {21, 64, 1}, {24, 16, 33}, {576, 64, 200}, {576, 16, 1}, {5, 7, 29}};
  std::mt19937 rng(20261213);
  for (const Case& c : cases) {
    const int64_t pages_used = (c.tokens + c.page_tokens - 1) / c.page_tokens, num_pages = pages_used + 4;
    std::vector<int32_t> ids(static_cast<size_t>(num_pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const std::vector<int32_t> table(ids.begin(), ids.begin() + pages_used);
    const std::vector<__nv_bfloat16> pool = random_bf16(size_t(num_pages * c.page_tokens * c.width), rng, -2, 2);
    std::vector<__nv_bfloat16> want(static_cast<size_t>(c.tokens * c.width));
    for (int64_t t = 0; t < c.tokens; ++t) {
      const int64_t row = int64_t(table[size_t(t / c.page_tokens)]) * c.page_tokens + t % c.page_tokens;
      std::copy_n(pool.begin() + row * c.width, c.width, want.begin() + t * c.width);
    }
    K3_REQUIRE_GPU();
    DeviceBuffer<__nv_bfloat16> dpool(pool), out(want.size());
    DeviceBuffer<int32_t> dtable(table);
    CUDA_CHECK(kernels::mla_cache_gather_bf16(dpool.get(), dtable.get(), c.page_tokens, c.width, c.tokens, out.get(),
                                              nullptr));
    EXPECT_TRUE(bits_of(out.download()) == bits_of(want))
        << "width " << c.width << " page_tokens " << c.page_tokens << " tokens " << c.tokens;
  }
}

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

// ---- Absorbed-form products ----

struct AbsorbCase {
  kernels::MlaDims d;
  int tokens;
};

std::vector<AbsorbCase> absorb_cases() {
  const kernels::MlaDims dims[] = {
      {3, 16, 8, 16, 32},       // small
      {96, 128, 64, 128, 512},  // K3
      {2, 24, 8, 8, 40},        // r not a multiple of 32: a partial column tile
      {1, 8, 0, 24, 16},        // no rope dims
      {2, 8, 4, 8, 20},         // r not a multiple of 8: weight_stream does not apply (automatic: per_column)
      {2, 6, 2, 8, 16},         // dn = 6: weight_stream's q tile padded to 16 bytes before its partial sums
  };
  std::vector<AbsorbCase> cases;
  for (const kernels::MlaDims& d : dims) {
    // Token tiles of weight_stream: 1, 2, 4 (partly filled), then tiles of 8 with a partial last one; 70: two of
    // mma_tiled's 64-token tiles, the second partial (and automatic's mma_tiled at K3's dims).
    for (int tokens : {1, 2, 3, 9, 17, 70}) cases.push_back({d, tokens});
  }
  return cases;
}

std::string describe(const AbsorbCase& c) {
  const kernels::MlaDims& d = c.d;
  return "heads " + std::to_string(d.heads) + " dn " + std::to_string(d.nope_dim) + " dr " +
         std::to_string(d.rope_dim) + " dv " + std::to_string(d.value_dim) + " r " + std::to_string(d.latent_rank) +
         " tokens " + std::to_string(c.tokens);
}

// assemble_kv: k[s, h] = [kv[s, h·(dn+dv) : +dn] | latent[s, r : r+dr]], v[s, h] = kv[s, h·(dn+dv) + dn : +dv].
TEST(GpuMlaAbsorb, AssembleKvIndexesDirectly) {
  std::mt19937 rng(20261216);
  for (const AbsorbCase& c : absorb_cases()) {
    const kernels::MlaDims& d = c.d;
    const int64_t S = c.tokens == 17 ? 301 : c.tokens;  // also a longer prefix than the decode cases
    const int kv_width = d.nope_dim + d.value_dim, qk = d.nope_dim + d.rope_dim, lat_width = d.latent_rank + d.rope_dim;
    const std::vector<__nv_bfloat16> kv = random_bf16(size_t(S * d.heads * kv_width), rng, -2.0f, 2.0f);
    const std::vector<__nv_bfloat16> latent = random_bf16(size_t(S * lat_width), rng, -2.0f, 2.0f);
    std::vector<__nv_bfloat16> want_k(static_cast<size_t>(S * d.heads * qk)),
        want_v(static_cast<size_t>(S * d.heads * d.value_dim));
    for (int64_t s = 0; s < S; ++s) {
      for (int h = 0; h < d.heads; ++h) {
        for (int i = 0; i < qk; ++i) {
          want_k[size_t((s * d.heads + h) * qk + i)] =
              i < d.nope_dim ? kv[size_t((s * d.heads + h) * kv_width + i)]
                             : latent[size_t(s * lat_width + d.latent_rank + (i - d.nope_dim))];
        }
        for (int i = 0; i < d.value_dim; ++i) {
          want_v[size_t((s * d.heads + h) * d.value_dim + i)] =
              kv[size_t((s * d.heads + h) * kv_width + d.nope_dim + i)];
        }
      }
    }
    K3_REQUIRE_GPU();
    DeviceBuffer<__nv_bfloat16> dkv(kv), dlatent(latent), k(want_k.size()), v(want_v.size());
    CUDA_CHECK(kernels::mla_assemble_kv_bf16(dkv.get(), dlatent.get(), d, S, k.get(), v.get(), nullptr));
    EXPECT_TRUE(bits_of(k.download()) == bits_of(want_k)) << describe(c) << " S " << S;
    EXPECT_TRUE(bits_of(v.download()) == bits_of(want_v)) << describe(c) << " S " << S;
  }
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
  EXPECT_EQ(kernels::mla_apply_v_bf16(lat + 1, kv_b, nullptr, 0, ok, 1, out, nullptr,
                                      kernels::MlaAbsorbAlgorithm::mma_tiled),
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
