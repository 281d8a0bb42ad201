// MLA's absorbed-form per-head products against fp64 loops (attend_absorbed and attend_naive re-derived):
// absorb_q = q_nope·W_uk | q_r, apply_v = lat·W_uvᵀ ⊙ sigmoid(gate), every MlaAbsorbAlgorithm; the prefill form's
// assemble_kv against direct indexing (bit-exact). Elementwise bounds:
// one bf16 rounding (≤ 2^-8 relative) of an fp32 result whose accumulation error is at most (n + 1)·2^-24·Σ|terms|.
#include "kernels/mla_absorb.h"
#include "tests/kernels/op_cases/cases.h"

#include <cmath>
#include <limits>

namespace k3::gpu_test {
namespace {

using kernels::MlaAbsorbAlgorithm;
using kernels::MlaDims;

// |got − want| within one bf16 rounding of a value that is itself within accumulation_error of want.
bool within_bf16(float got, double want, double accumulation_error) {
  constexpr double kBf16Rounding = 1.0 / 256;  // 2^-8: RNE to bf16 moves a value by at most this, relatively
  return std::isfinite(got) &&
         std::abs(double(got) - want) <= kBf16Rounding * (std::abs(want) + accumulation_error) + accumulation_error;
}
// fp32 sum of n products, any order: at most (n + 1)·2^-24·Σ|terms| from the exact sum (a 1 % margin on top).
double accumulation_error(int n, double abs_sum) { return 1.01 * (n + 1) * std::ldexp(1.0, -24) * abs_sum; }

MlaDims dims_of(const Shape& s) { return {int(s["heads"]), int(s["dn"]), int(s["dr"]), int(s["dv"]), int(s["r"])}; }
int kv_b_rows(const MlaDims& d) { return d.heads * (d.nope_dim + d.value_dim); }

std::vector<Shape> absorb_shapes() {
  const int dims[][5] = {
      {3, 16, 8, 16, 32},       // small
      {96, 128, 64, 128, 512},  // K3
      {2, 24, 8, 8, 40},        // r not a multiple of 32: a partial column tile
      {1, 8, 0, 24, 16},        // no rope dims
      {2, 8, 4, 8, 20},         // r not a multiple of 8: weight_stream does not apply (automatic: per_column)
      {2, 6, 2, 8, 16},         // dn = 6: weight_stream's q tile padded to 16 bytes before its partial sums
  };
  std::vector<Shape> out;
  for (const auto& d : dims) {
    // Token tiles of weight_stream: 1, 2, 4 (partly filled), then tiles of 8 with a partial last one; 70: two of
    // mma_tiled's 64-token tiles, the second partial (and automatic's mma_tiled at K3's dims).
    for (int tokens : {1, 2, 3, 9, 17, 70}) {
      out.push_back(
          shape({{"heads", d[0]}, {"dn", d[1]}, {"dr", d[2]}, {"dv", d[3]}, {"r", d[4]}, {"tokens", tokens}}));
    }
  }
  return out;
}

std::vector<Variant> absorb_variants() {
  return {variant(MlaAbsorbAlgorithm::automatic, "automatic"), variant(MlaAbsorbAlgorithm::per_column, "per_column"),
          variant(MlaAbsorbAlgorithm::weight_stream, "weight_stream"),
          variant(MlaAbsorbAlgorithm::mma_tiled, "mma_tiled")};
}
std::vector<Variant> absorb_perf_variants() {
  const std::vector<Variant> all = absorb_variants();
  return {all.begin() + 1, all.end()};
}

// weight_stream and mma_tiled need r a multiple of 8 (16-byte rows of kv_b); elsewhere they refuse.
bool runs(MlaAbsorbAlgorithm a, const MlaDims& d) {
  const bool vectorised = a == MlaAbsorbAlgorithm::weight_stream || a == MlaAbsorbAlgorithm::mma_tiled;
  return !vectorised || d.latent_rank % 8 == 0;
}

// K3's widths (96 heads, dn = dv = 128, dr = 64, r = 512): each product reads its half of kv_b (12.6 MB, rotated over
// sets larger than L2) for T = 1 … 64 tokens.
std::vector<Shape> absorb_perf_shapes() {
  std::vector<Shape> out;
  for (const int tokens : {1, 4, 8, 16, 32, 64}) {
    out.push_back(shape({{"heads", 96}, {"dn", 128}, {"dr", 64}, {"dv", 128}, {"r", 512}, {"tokens", tokens}}));
  }
  return out;
}
// Half of kv_b in bf16 (its elements × 2 bytes / 2) and 2 FLOPs per multiply-add of the per-head product.
double half_kv_b_bytes(const MlaDims& d) { return double(kv_b_rows(d)) * d.latent_rank; }
double absorb_flops(const MlaDims& d, int tokens) { return 2.0 * tokens * d.heads * d.nope_dim * d.latent_rank; }

OpCase absorb_q_case() {
  OpCase c{"mla_absorb_q_bf16", OpKind::mla_attention};  // part of the absorbed decode's attention
  c.shapes = absorb_shapes();
  c.variants = absorb_variants();
  // q_abs[t, h, j] = Σ_i q_nope[t, h, i]·kv_b[h·(dn+dv) + i, j] (fp64), then q_r copied.
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    const MlaDims d = dims_of(s);
    const int tokens = int(s["tokens"]), qk = d.nope_dim + d.rope_dim, r = d.latent_rank;
    const int64_t q_stride = int64_t(d.heads) * qk + 5;
    const std::vector<__nv_bfloat16> q = random_bf16(size_t(tokens * q_stride), rng, -2.0f, 2.0f);
    const std::vector<__nv_bfloat16> kv_b = random_bf16(size_t(kv_b_rows(d)) * r, rng, -1.0f, 1.0f);
    std::vector<double> want(size_t(tokens) * d.heads * r), error(want.size());
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < d.heads; ++h) {
        for (int j = 0; j < r; ++j) {
          double sum = 0, abs_sum = 0;
          for (int i = 0; i < d.nope_dim; ++i) {
            const double term = double(__bfloat162float(q[size_t(t * q_stride + h * qk + i)])) *
                                __bfloat162float(kv_b[(size_t(h) * (d.nope_dim + d.value_dim) + i) * r + j]);
            sum += term;
            abs_sum += std::abs(term);
          }
          const size_t at = (size_t(t) * d.heads + h) * r + j;
          want[at] = sum;
          error[at] = accumulation_error(d.nope_dim, abs_sum);
        }
      }
    }
    return [=](const Variant& v, Checks& gpu) {
      const auto algorithm = algorithm_of<MlaAbsorbAlgorithm>(v);
      const int out_width = r + d.rope_dim;
      DeviceBuffer<__nv_bfloat16> dq(q), dkv_b(kv_b), q_abs(size_t(tokens) * d.heads * out_width);
      const cudaError_t status =
          kernels::mla_absorb_q_bf16(dq.get(), q_stride, dkv_b.get(), d, tokens, q_abs.get(), nullptr, algorithm);
      if (!runs(algorithm, d)) {
        gpu.equal("refused for r not a multiple of 8", status, cudaErrorInvalidValue);
        return;
      }
      CUDA_CHECK(status);
      const std::vector<__nv_bfloat16> got = q_abs.download();
      int64_t bad_latent = 0, bad_rope = 0;
      for (int t = 0; t < tokens; ++t) {
        for (int h = 0; h < d.heads; ++h) {
          const size_t row = (size_t(t) * d.heads + h) * out_width;
          for (int j = 0; j < r; ++j) {
            const size_t at = (size_t(t) * d.heads + h) * r + j;
            bad_latent += within_bf16(__bfloat162float(got[row + j]), want[at], error[at]) ? 0 : 1;
          }
          for (int i = 0; i < d.rope_dim; ++i) {
            bad_rope += bits_of(got[row + r + i]) == bits_of(q[size_t(t * q_stride + h * qk + d.nope_dim + i)]) ? 0 : 1;
          }
        }
      }
      gpu.none("latent columns within the bound", bad_latent);
      gpu.none("rope columns copied exactly", bad_rope);
    };
  };
  c.perf_shapes = absorb_perf_shapes();
  c.perf_variants = absorb_perf_variants();
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("mla_absorb_q_{} T={} {} heads r {}", v.name, s["tokens"], s["heads"], s["r"]);
  };
  // Half of kv_b, q read and q_abs written per token.
  c.cost = [](const Shape& s) {
    const MlaDims d = dims_of(s);
    const double q_stride = double(d.heads) * (d.nope_dim + d.rope_dim);
    Cost cost;
    cost.bytes = half_kv_b_bytes(d) + s["tokens"] * (q_stride * 2.0 + d.heads * (d.latent_rank + d.rope_dim) * 2.0);
    cost.flops = absorb_flops(d, int(s["tokens"]));
    cost.cls = EfficiencyClass::gemm;
    cost.compute = ComputeType::bf16;
    cost.rotated_bytes = half_kv_b_bytes(d);
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int sets) -> Launch {
    const MlaDims d = dims_of(s);
    const int tokens = int(s["tokens"]);
    const int64_t q_stride = int64_t(d.heads) * (d.nope_dim + d.rope_dim);
    auto kv_b =
        rotated(sets, [&](int) { return device_bytes<__nv_bfloat16>(size_t(kv_b_rows(d)) * d.latent_rank, 0x3C); });
    auto q = device_bytes<__nv_bfloat16>(size_t(tokens * q_stride), 0x3C);
    auto q_abs = device_bytes<__nv_bfloat16>(size_t(tokens) * d.heads * (d.latent_rank + d.rope_dim), 0);
    const auto algorithm = algorithm_of<MlaAbsorbAlgorithm>(v);
    return [=](int set, cudaStream_t stream) {
      CUDA_CHECK(kernels::mla_absorb_q_bf16(q->get(), q_stride, kv_b[size_t(set)]->get(), d, tokens, q_abs->get(),
                                            stream, algorithm));
    };
  };
  return c;
}

OpCase apply_v_case() {
  OpCase c{"mla_apply_v_bf16", OpKind::mla_attention};
  c.shapes = absorb_shapes();
  c.variants = absorb_variants();
  // out[t, h·dv + c] = Σ_j lat[t, h, j]·kv_b[h·(dn+dv) + dn + c, j] (fp64), times sigmoid(gate) when gated; the gate
  // [tokens, heads·dv + 3], its padding NaN.
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    const MlaDims d = dims_of(s);
    const int tokens = int(s["tokens"]), r = d.latent_rank, out_width = d.heads * d.value_dim;
    const int64_t gate_stride = out_width + 3;
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> lat(size_t(tokens) * d.heads * r);
    for (float& x : lat) x = dist(rng);
    const std::vector<__nv_bfloat16> kv_b = random_bf16(size_t(kv_b_rows(d)) * r, rng, -1.0f, 1.0f);
    std::vector<__nv_bfloat16> gate = random_bf16(size_t(tokens * gate_stride), rng, -5.0f, 5.0f);
    for (int t = 0; t < tokens; ++t) {
      for (int64_t i = out_width; i < gate_stride; ++i) {
        gate[size_t(t * gate_stride + i)] = __float2bfloat16_rn(std::numeric_limits<float>::quiet_NaN());
      }
    }
    std::vector<double> plain, gated, error, sigmoid;  // error bounds the ungated sum
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < d.heads; ++h) {
        for (int col = 0; col < d.value_dim; ++col) {
          double sum = 0, abs_sum = 0;
          const size_t w_row = size_t(h) * (d.nope_dim + d.value_dim) + d.nope_dim + col;
          for (int j = 0; j < r; ++j) {
            const double term = double(lat[(size_t(t) * d.heads + h) * r + j]) * __bfloat162float(kv_b[w_row * r + j]);
            sum += term;
            abs_sum += std::abs(term);
          }
          const double g = __bfloat162float(gate[size_t(t * gate_stride + h * d.value_dim + col)]);
          const double sg = 1.0 / (1.0 + std::exp(-g));
          plain.push_back(sum);
          sigmoid.push_back(sg);
          gated.push_back(sum * sg);
          error.push_back(accumulation_error(r, abs_sum));
        }
      }
    }
    return [=](const Variant& v, Checks& gpu) {
      const auto algorithm = algorithm_of<MlaAbsorbAlgorithm>(v);
      DeviceBuffer<float> dlat(lat);
      DeviceBuffer<__nv_bfloat16> dkv_b(kv_b), dgate(gate), dplain(plain.size()), dgated(gated.size());
      const cudaError_t status =
          kernels::mla_apply_v_bf16(dlat.get(), dkv_b.get(), nullptr, 0, d, tokens, dplain.get(), nullptr, algorithm);
      if (!runs(algorithm, d)) {
        gpu.equal("refused for r not a multiple of 8", status, cudaErrorInvalidValue);
        return;
      }
      CUDA_CHECK(status);
      CUDA_CHECK(kernels::mla_apply_v_bf16(dlat.get(), dkv_b.get(), dgate.get(), gate_stride, d, tokens, dgated.get(),
                                           nullptr, algorithm));
      const std::vector<__nv_bfloat16> got_plain = dplain.download(), got_gated = dgated.download();
      int64_t bad_plain = 0, bad_gated = 0;
      for (size_t i = 0; i < plain.size(); ++i) {
        bad_plain += within_bf16(__bfloat162float(got_plain[i]), plain[i], error[i]) ? 0 : 1;
        // The gate scales the sum's error by sigmoid ≤ 1; expf and the division add a few fp32 ulp.
        const double gated_error = error[i] * sigmoid[i] + 1e-6 * std::abs(gated[i]);
        bad_gated += within_bf16(__bfloat162float(got_gated[i]), gated[i], gated_error) ? 0 : 1;
      }
      gpu.none("without gate, within the bound", bad_plain);
      gpu.none("with gate, within the bound", bad_gated);
    };
  };
  c.perf_shapes = absorb_perf_shapes();
  c.perf_variants = absorb_perf_variants();
  c.perf_name = [](const Shape& s, const Variant& v) {
    return fmt::format("mla_apply_v_{} T={} {} heads r {} gated", v.name, s["tokens"], s["heads"], s["r"]);
  };
  // Half of kv_b; per token the fp32 latent read and the output counted at 4 bytes an element.
  c.cost = [](const Shape& s) {
    const MlaDims d = dims_of(s);
    Cost cost;
    cost.bytes = half_kv_b_bytes(d) + s["tokens"] * d.heads * (d.latent_rank * 4.0 + d.value_dim * 4.0);
    cost.flops = absorb_flops(d, int(s["tokens"]));
    cost.cls = EfficiencyClass::gemm;
    cost.compute = ComputeType::bf16;
    cost.rotated_bytes = half_kv_b_bytes(d);
    return cost;
  };
  c.perf = [](const Shape& s, const Variant& v, int sets) -> Launch {
    const MlaDims d = dims_of(s);
    const int tokens = int(s["tokens"]);
    auto kv_b =
        rotated(sets, [&](int) { return device_bytes<__nv_bfloat16>(size_t(kv_b_rows(d)) * d.latent_rank, 0x3C); });
    auto latent = device_bytes<float>(size_t(tokens) * d.heads * d.latent_rank, 0);
    auto gate = device_bytes<__nv_bfloat16>(size_t(tokens) * d.heads * d.value_dim, 0x3C);
    auto out = device_bytes<__nv_bfloat16>(size_t(tokens) * d.heads * d.value_dim, 0);
    const auto algorithm = algorithm_of<MlaAbsorbAlgorithm>(v);
    return [=](int set, cudaStream_t stream) {
      CUDA_CHECK(kernels::mla_apply_v_bf16(latent->get(), kv_b[size_t(set)]->get(), gate->get(),
                                           int64_t(d.heads) * d.value_dim, d, tokens, out->get(), stream, algorithm));
    };
  };
  return c;
}

// assemble_kv: k[s, h] = [kv[s, h·(dn+dv) : +dn] | latent[s, r : r+dr]], v[s, h] = kv[s, h·(dn+dv) + dn : +dv];
// the shapes of 17 tokens take a longer prefix (301) than the decode shapes.
OpCase assemble_kv_case() {
  OpCase c{"mla_assemble_kv_bf16", OpKind::mla_attention};
  c.shapes = absorb_shapes();
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937& rng, Checks&) -> GpuRun {
    const MlaDims d = dims_of(s);
    const int64_t S = s["tokens"] == 17 ? 301 : s["tokens"];
    const int kv_width = d.nope_dim + d.value_dim, qk = d.nope_dim + d.rope_dim, lat_width = d.latent_rank + d.rope_dim;
    const std::vector<__nv_bfloat16> kv = random_bf16(size_t(S * d.heads * kv_width), rng, -2.0f, 2.0f);
    const std::vector<__nv_bfloat16> latent = random_bf16(size_t(S * lat_width), rng, -2.0f, 2.0f);
    std::vector<uint16_t> want_k(static_cast<size_t>(S * d.heads * qk)),
        want_v(static_cast<size_t>(S * d.heads * d.value_dim));
    for (int64_t t = 0; t < S; ++t) {
      for (int h = 0; h < d.heads; ++h) {
        for (int i = 0; i < qk; ++i) {
          want_k[size_t((t * d.heads + h) * qk + i)] =
              bits_of(i < d.nope_dim ? kv[size_t((t * d.heads + h) * kv_width + i)]
                                     : latent[size_t(t * lat_width + d.latent_rank + (i - d.nope_dim))]);
        }
        for (int i = 0; i < d.value_dim; ++i) {
          want_v[size_t((t * d.heads + h) * d.value_dim + i)] =
              bits_of(kv[size_t((t * d.heads + h) * kv_width + d.nope_dim + i)]);
        }
      }
    }
    return [=](const Variant&, Checks& gpu) {
      DeviceBuffer<__nv_bfloat16> dkv(kv), dlatent(latent), k(want_k.size()), v(want_v.size());
      CUDA_CHECK(kernels::mla_assemble_kv_bf16(dkv.get(), dlatent.get(), d, S, k.get(), v.get(), nullptr));
      const auto differing = [](const std::vector<__nv_bfloat16>& got, const std::vector<uint16_t>& want) {
        int64_t bad = 0;
        for (size_t i = 0; i < got.size(); ++i) bad += bits_of(got[i]) == want[i] ? 0 : 1;
        return bad;
      };
      gpu.none("k, bit for bit", differing(k.download(), want_k));
      gpu.none("v, bit for bit", differing(v.download(), want_v));
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> mla_absorb_cases() { return {absorb_q_case(), apply_v_case(), assemble_kv_case()}; }

}  // namespace k3::gpu_test
