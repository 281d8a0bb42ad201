// Seeded random fill against the header's host functions (random_normal and random_uniform are __host__ __device__):
// fp32 normals to a few ulp (host and device logf/cosf may differ in the last bits), bf16 normals the rounding of the
// device's fp32 normals, uniforms, and the MXFP4 fill bit-identical to weights::mxfp4_quantize of the device's fp32
// normals of the same key and stddev. Lengths past one grid (65536 blocks of 256 threads) exercise the grid-stride
// loops. The statistics of 10^6 samples: plain tests in tests/kernels/random_fill_gpu_test.cpp.
#include "engine/weights/mx_format.h"
#include "kernels/random_fill.h"
#include "tests/kernels/op_cases/cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace k3::gpu_test {
namespace {

constexpr int64_t kOneGridElements = int64_t(65536) * 256;

uint32_t float_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

std::vector<float> host_normals(uint64_t key, int64_t n) {
  std::vector<float> z(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) z[size_t(i)] = kernels::random_normal(key, uint64_t(i));
  return z;
}

// "n 3: 2 mismatches, the first at 1"-style detail for a count of bad elements.
void none_of(Checks& checks, const std::string& what, int64_t bad, int64_t first_bad) {
  checks.expect(bad == 0, what, fmt::format("{} mismatches, the first at {}", bad, first_bad));
}

enum class NormalOut { f32, bf16 };

OpCase fill_normal_case() {
  OpCase c{"fill_normal", OpKind::elementwise};
  // n, mean and stddev in thousandths, key (-1: all 64 bits set)
  const int64_t dims[][4] = {
      {1, 0, 1000, 3}, {257, 0, 1000, -1}, {100003, 250, 20, 42}, {kOneGridElements + 4099, 0, 1000, 20261207}};
  for (const auto& d : dims) {
    c.shapes.push_back(shape({{"n", d[0]}, {"mean_milli", d[1]}, {"stddev_milli", d[2]}, {"key", d[3]}}));
  }
  c.variants = {variant(NormalOut::f32, "f32"), variant(NormalOut::bf16, "bf16")};
  c.test = [](const Shape& s, std::mt19937&, Checks&) -> GpuRun {
    const int64_t n = s["n"];
    const float mean = float(s["mean_milli"]) / 1000.0f, stddev = float(s["stddev_milli"]) / 1000.0f;
    const auto key = uint64_t(s["key"]);
    const std::vector<float> z = host_normals(key, n);
    std::vector<double> expected(z.size());
    for (size_t i = 0; i < z.size(); ++i) expected[i] = double(mean) + double(stddev) * z[i];
    return [=](const Variant& v, Checks& gpu) {
      DeviceBuffer<float> f32(static_cast<size_t>(n));
      CUDA_CHECK(kernels::fill_normal_f32(f32.get(), n, mean, stddev, key, nullptr));
      const std::vector<float> got_f32 = f32.download();
      int64_t bad = 0, first_bad = -1;
      if (algorithm_of<NormalOut>(v) == NormalOut::f32) {
        // Host and device logf and cosf are each within a few ulp of the exact value; a sample differs from the
        // host's by ≤ ~5 fp32 ulp of |stddev·z| (≤ 6e-7 relative), and mean + stddev·z adds at most one rounding of
        // each term.
        for (int64_t i = 0; i < n; ++i) {
          const double want = expected[size_t(i)];
          const double tolerance = 1e-6 * (std::abs(double(mean)) + std::abs(want - double(mean)));
          if (!(std::abs(double(got_f32[size_t(i)]) - want) <= tolerance) && bad++ == 0) first_bad = i;
        }
        none_of(gpu, "within a few ulp of the host function", bad, first_bad);
      } else {
        // The bf16 fill is the bf16 rounding (RNE) of the fp32 fill's value, bit for bit.
        DeviceBuffer<__nv_bfloat16> bf16(static_cast<size_t>(n));
        CUDA_CHECK(kernels::fill_normal_bf16(bf16.get(), n, mean, stddev, key, nullptr));
        const std::vector<__nv_bfloat16> got = bf16.download();
        for (int64_t i = 0; i < n; ++i) {
          if (bits_of(got[size_t(i)]) != bits_of(__float2bfloat16_rn(got_f32[size_t(i)])) && bad++ == 0) first_bad = i;
        }
        none_of(gpu, "the rounding of the fp32 fill", bad, first_bad);
      }
    };
  };
  return c;
}

// u = (h mod 2^24)/2^24 is exact in fp32, so on [0, 1) the fill equals the host value bit for bit; on another range
// lo + (hi − lo)·u is within two roundings (≤ 2 ulp of max(|lo|, |hi|)) of the exact value, inside [lo, hi].
OpCase fill_uniform_case() {
  OpCase c{"fill_uniform_f32", OpKind::elementwise};
  // n, lo and hi in thousandths, key
  const int64_t dims[][4] = {{1, 0, 1000, 9},
                             {100003, 0, 1000, 11},
                             {kOneGridElements + 17, 0, 1000, 13},
                             {4099, -300, 700, 15},
                             {65537, 2000, 2500, 17}};
  for (const auto& d : dims) {
    c.shapes.push_back(shape({{"n", d[0]}, {"lo_milli", d[1]}, {"hi_milli", d[2]}, {"key", d[3]}}));
  }
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937&, Checks&) -> GpuRun {
    const int64_t n = s["n"];
    const float lo = float(s["lo_milli"]) / 1000.0f, hi = float(s["hi_milli"]) / 1000.0f;
    const auto key = uint64_t(s["key"]);
    std::vector<double> expected(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      expected[size_t(i)] = double(lo) + (double(hi) - double(lo)) * kernels::random_uniform(key, uint64_t(i));
    }
    return [=](const Variant&, Checks& gpu) {
      DeviceBuffer<float> out(static_cast<size_t>(n));
      CUDA_CHECK(kernels::fill_uniform_f32(out.get(), n, lo, hi, key, nullptr));
      const std::vector<float> got = out.download();
      const bool exact = lo == 0.0f && hi == 1.0f;
      const double tolerance = 2.0 * std::ldexp(1.0, -23) * std::max(std::abs(lo), std::abs(hi));
      int64_t bad = 0, first_bad = -1;
      for (int64_t i = 0; i < n; ++i) {
        const float g = got[size_t(i)];
        const double want = expected[size_t(i)];
        const bool ok = exact ? float_bits(g) == float_bits(float(want))
                              : (g >= lo && g <= hi && std::abs(double(g) - want) <= tolerance);
        if (!ok && bad++ == 0) first_bad = i;
      }
      none_of(gpu, exact ? "the host function, bit for bit" : "within two roundings, inside [lo, hi]", bad, first_bad);
    };
  };
  return c;
}

struct Quantized {
  std::vector<uint8_t> packed, scales;
};

Quantized quantize_on_host(const std::vector<float>& values) {
  const auto n = int64_t(values.size());
  Quantized q{std::vector<uint8_t>(static_cast<size_t>(n / 2)),
              std::vector<uint8_t>(static_cast<size_t>(n / weights::kMxBlockElements))};
  weights::mxfp4_quantize(values.data(), n, q.packed.data(), q.scales.data());
  return q;
}

// Blocks (of 32 elements) whose scale or any packed byte differs.
int64_t differing_blocks(const Quantized& a, const Quantized& b) {
  int64_t count = 0;
  for (size_t block = 0; block < a.scales.size(); ++block) {
    const bool same =
        a.scales[block] == b.scales[block] && std::memcmp(&a.packed[block * 16], &b.packed[block * 16], 16) == 0;
    count += same ? 0 : 1;
  }
  return count;
}

// The kernel's values are stddev·random_normal(key, i), bit for bit what fill_normal_f32 with mean 0 writes, except
// the sign of a zero: z = ±0 exactly when u1 = 1 (once in 2^24 elements; the 3072 × 3584 shape has one), and
// 0 + stddev·(−0) is +0 while the kernel encodes −0 as the nibble 8. So the exact check quantises the device's own
// fp32 normals on the host with each zero replaced by the host's stddev·z (u1 = 1 is an integer condition, the same
// on both sides). Against normals computed on the host a block can differ only where a few-ulp difference crosses an
// E2M1 rounding midpoint or the block maximum crosses a power of two: at most 1 % of the blocks, or one (in practice
// none). Odd row counts, one block per row (cols 32), K3's latent width 3584, and a whole K3 expert matrix.
OpCase mxfp4_fill_case() {
  OpCase c{"mxfp4_fill_normal", OpKind::elementwise};
  // rows, cols, stddev in millionths, key
  const int64_t dims[][4] = {
      {1, 32, 1000000, 1}, {7, 32, 20000, 2}, {13, 3584, 20000, 3}, {3, 3584, 500, 4}, {3072, 3584, 17300, 5}};
  for (const auto& d : dims) {
    c.shapes.push_back(shape({{"rows", d[0]}, {"cols", d[1]}, {"stddev_micro", d[2]}, {"key", d[3]}}));
  }
  c.variants = single_variant();
  c.test = [](const Shape& s, std::mt19937&, Checks& cpu) -> GpuRun {
    const int64_t rows = s["rows"], cols = s["cols"], n = rows * cols;
    const float stddev = float(s["stddev_micro"]) / 1000000.0f;
    const auto key = uint64_t(s["key"]);
    std::vector<float> values = host_normals(key, n);
    for (float& v : values) v *= stddev;
    const Quantized from_host_normals = quantize_on_host(values);
    // MXFP4 keeps a normal sample to within 25 % (normalised error), so the reference is meaningful.
    std::vector<float> dequantized(values.size());
    weights::mxfp4_dequantize(from_host_normals.packed.data(), from_host_normals.scales.data(), n, dequantized.data());
    double err = 0, norm = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      err += (double(dequantized[i]) - values[i]) * (double(dequantized[i]) - values[i]);
      norm += double(values[i]) * values[i];
    }
    cpu.near("MXFP4 keeps the sample", std::sqrt(err / norm), 0.25);
    return [=](const Variant&, Checks& gpu) {
      DeviceBuffer<float> dvalues(static_cast<size_t>(n));
      DeviceBuffer<uint8_t> packed(static_cast<size_t>(n / 2)), scales(static_cast<size_t>(n / 32));
      CUDA_CHECK(kernels::fill_normal_f32(dvalues.get(), n, 0.0f, stddev, key, nullptr));
      CUDA_CHECK(kernels::mxfp4_fill_normal(packed.get(), scales.get(), rows, cols, stddev, key, nullptr));
      const Quantized got{packed.download(), scales.download()};
      std::vector<float> device_values = dvalues.download();
      for (size_t i = 0; i < device_values.size(); ++i) {
        if (device_values[i] == 0.0f) device_values[i] = stddev * kernels::random_normal(key, i);
      }
      const Quantized want = quantize_on_host(device_values);
      gpu.none("blocks differing from the quantised device normals", differing_blocks(got, want));
      const int64_t near_host = differing_blocks(got, from_host_normals);
      gpu.expect(near_host <= std::max<int64_t>(1, int64_t(want.scales.size()) / 100),
                 "blocks differing from the quantised host normals: at most 1 % or one",
                 fmt::format("{} of {}", near_host, want.scales.size()));
    };
  };
  return c;
}

}  // namespace

std::vector<OpCase> random_fill_cases() { return {fill_normal_case(), fill_uniform_case(), mxfp4_fill_case()}; }

}  // namespace k3::gpu_test
