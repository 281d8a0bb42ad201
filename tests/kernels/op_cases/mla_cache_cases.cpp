// MLA's paged latent cache against the CPU. Append writes ref::mla's append_latent rows [ref::rmsnorm(c)·w | k_r]
// at (page_table[seq, pos / page_tokens], pos % page_tokens) and nothing else (pages pre-filled with a pattern,
// unused page-table entries pointing at a trap page), for one sequence from a position inside a page and for a
// decode batch with device positions and sequence rows; gather then copies exactly the stored rows, and on its own
// (the scalar path for widths not a multiple of 8). Elementwise bound: one bf16 rounding (≤ 2^-8 relative) of an
// fp32 result within a stated error of the exact value.
#include "engine/reference/basic_ops.h"
#include "kernels/mla_latent_cache.h"
#include "tests/kernels/op_cases/cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>

namespace k3::gpu_test {
namespace {

constexpr float kLatentEps = 1e-6f;          // the K3 reference's kv_a norm epsilon
constexpr double kBf16Rounding = 1.0 / 256;  // 2^-8: RNE to bf16 moves a value by at most this, relatively

std::vector<uint16_t> bits_of(const std::vector<__nv_bfloat16>& v) {
  std::vector<uint16_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(uint16_t));
  return b;
}
uint16_t bits_of(__nv_bfloat16 v) { return gpu_test::bits_of(v); }
float value_of(__nv_bfloat16 v) { return __bfloat162float(v); }

// |got − want| within one bf16 rounding of a value that is itself within accumulation_error of want.
bool within_bf16(float got, double want, double accumulation_error) {
  return std::isfinite(got) &&
         std::abs(double(got) - want) <= kBf16Rounding * (std::abs(want) + accumulation_error) + accumulation_error;
}

struct CacheShape {
  int r, dr, page_tokens;
};
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
void check_pool(const AppendScenario& a, const std::vector<__nv_bfloat16>& got, Checks& gpu) {
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
  gpu.none("latent within one bf16 rounding of ref::rmsnorm(c)·w", bad_latent);
  gpu.none("k_r copied exactly", bad_rope);
  gpu.none("elements outside the appended rows unchanged", changed);
}

// The first sequence_length rows of every sequence row through gather, against direct indexing of the pool.
void check_gather(const AppendScenario& a, DeviceBuffer<__nv_bfloat16>& pool, DeviceBuffer<int32_t>& page_table,
                  const std::vector<__nv_bfloat16>& pool_after, Checks& gpu) {
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
    gpu.expect(bits_of(out.download()) == bits_of(want), fmt::format("gather of sequence row {}, bit for bit", row));
  }
}

// The append scenarios (the shape's "scenario": 0 one sequence, 1 a decode batch) over latent widths r + dr and
// page sizes.
OpCase append_case() {
  OpCase c{"mla_cache_append_bf16", OpKind::mla_attention};  // the latent cache write of MLA's attention
  const int dims[][3] = {{16, 8, 16}, {16, 8, 64}, {512, 64, 64}, {512, 64, 16}};
  for (const auto& d : dims) {
    for (const int scenario : {0, 1}) {
      c.shapes.push_back(shape({{"r", d[0]}, {"dr", d[1]}, {"page_tokens", d[2]}, {"scenario", scenario}}));
    }
  }
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937& rng, Checks& cpu) -> GpuRun {
    const CacheShape cs{int(s["r"]), int(s["dr"]), int(s["page_tokens"])};
    const auto a =
        std::make_shared<const AppendScenario>(s["scenario"] == 0 ? one_sequence(cs, rng) : decode_batch(cs, rng));
    // The scenario is what it claims: distinct target rows, a page boundary crossed, a finite reference.
    std::vector<int64_t> rows = a->written_row;
    std::sort(rows.begin(), rows.end());
    cpu.expect(std::adjacent_find(rows.begin(), rows.end()) == rows.end(), "distinct target rows");
    std::vector<int64_t> pages;
    for (int64_t row : a->written_row) pages.push_back(row / cs.page_tokens);
    std::sort(pages.begin(), pages.end());
    cpu.expect(std::unique(pages.begin(), pages.end()) - pages.begin() >= 2, "a page boundary crossed");
    cpu.expect(a->want_latent.allFinite(), "reference finite");
    return [a](const Variant&, Checks& gpu) {
      const CacheShape& cs = a->s;
      DeviceBuffer<__nv_bfloat16> kv(a->kv), weight(a->weight), pool(a->pool);
      DeviceBuffer<int32_t> page_table(a->page_table);
      std::unique_ptr<DeviceBuffer<int32_t>> positions, sequence_rows;
      if (!a->positions.empty()) positions = std::make_unique<DeviceBuffer<int32_t>>(a->positions);
      if (!a->sequence_rows.empty()) sequence_rows = std::make_unique<DeviceBuffer<int32_t>>(a->sequence_rows);
      CUDA_CHECK(kernels::mla_cache_append_bf16(kv.get(), width_of(cs) + a->kv_pad, weight.get(), kLatentEps, cs.r,
                                                cs.dr, a->tokens, positions ? positions->get() : nullptr,
                                                a->first_position, sequence_rows ? sequence_rows->get() : nullptr,
                                                page_table.get(), a->max_pages, cs.page_tokens, pool.get(), nullptr));
      const std::vector<__nv_bfloat16> after = pool.download();
      check_pool(*a, after, gpu);
      check_gather(*a, pool, page_table, after, gpu);
    };
  };
  return c;
}

OpCase gather_case() {
  OpCase c{"mla_cache_gather_bf16", OpKind::mla_attention};
  const int dims[][3] = {{21, 16, 50}, {21, 64, 1}, {24, 16, 33}, {576, 64, 200}, {576, 16, 1}, {5, 7, 29}};
  for (const auto& d : dims) c.shapes.push_back(shape({{"width", d[0]}, {"page_tokens", d[1]}, {"tokens", d[2]}}));
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    const int width = int(s["width"]), page_tokens = int(s["page_tokens"]);
    const int64_t tokens = s["tokens"];
    const int64_t pages_used = (tokens + page_tokens - 1) / page_tokens, num_pages = pages_used + 4;
    std::vector<int32_t> ids(static_cast<size_t>(num_pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const std::vector<int32_t> table(ids.begin(), ids.begin() + pages_used);
    const std::vector<__nv_bfloat16> pool = random_bf16(size_t(num_pages * page_tokens * width), rng, -2, 2);
    std::vector<__nv_bfloat16> want(static_cast<size_t>(tokens * width));
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t row = int64_t(table[size_t(t / page_tokens)]) * page_tokens + t % page_tokens;
      std::copy_n(pool.begin() + row * width, width, want.begin() + t * width);
    }
    return [=](const Variant&, Checks& gpu) {
      DeviceBuffer<__nv_bfloat16> dpool(pool), out(want.size());
      DeviceBuffer<int32_t> dtable(table);
      CUDA_CHECK(
          kernels::mla_cache_gather_bf16(dpool.get(), dtable.get(), page_tokens, width, tokens, out.get(), nullptr));
      gpu.expect(bits_of(out.download()) == bits_of(want), "rows copied bit for bit");
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> mla_latent_cache_cases() { return {append_case(), gather_case()}; }

}  // namespace k3::gpu_test
