// The Range Profiler (profiler/cupti/range_profiler.h) on the GPU, against work of known size:
//   an elementwise add of n bf16 values reads 4n and writes 2n bytes of DRAM (buffers of 1 GiB each,
//   far past L2; a warm-up run first, so L2 starts each run in the same state: what the previous run
//   left dirty is written back during this one, as much as this one leaves behind) — within ±10 %;
//   a cuBLASLt bf16 GEMM of m = n = k = 3072 does 2·m·n·k tensor FLOPs (3072 is a multiple of every tile
//   edge cuBLASLt uses, so no tile is padded) — within ±3 %;
//   range names and occurrences as pushed, nested ranges folded into the outer one, pushes past the
//   range limit counted as lost, an open range at stop() refused.
// Needs permission to read the GPU's counters (root, or NVreg_RestrictProfilingToAdminUsers=0).
#include "engine/runtime/gemm_cublaslt.h"
#include "kernels/elementwise.h"
#include "kernels/gpu_harness.h"
#include "profiler/cupti/range_profiler.h"

#include <cuda_runtime.h>

namespace k3::gpu_test {
namespace {

using profiler::CounterRange;
using profiler::CuptiRangeProfiler;
using profiler::RangeCounters;
using profiler::RangeProfilerOptions;

double value(const CounterRange& r, const char* metric) {
  const auto v = r.values.find(metric);
  EXPECT_NE(v, r.values.end()) << "range " << r.name << " has no " << metric;
  return v == r.values.end() ? -1 : v->second;
}

TEST(RangeProfiler, DramBytesOfAnAddAreItsTraffic) {
  K3_REQUIRE_GPU();
  const int64_t n = int64_t(1) << 29;  // 1 GiB of bf16 per buffer
  DeviceBuffer<__nv_bfloat16> a(n), b(n), out(n);
  ASSERT_EQ(kernels::add_bf16(a.get(), b.get(), out.get(), n, nullptr), cudaSuccess);  // warm-up
  CUDA_CHECK(cudaDeviceSynchronize());

  CuptiRangeProfiler counters(RangeProfilerOptions{profiler::counter_mode_metrics(), 16});
  counters.start();
  counters.push_range("add");
  ASSERT_EQ(kernels::add_bf16(a.get(), b.get(), out.get(), n, nullptr), cudaSuccess);
  counters.pop_range();
  const RangeCounters c = counters.stop();

  ASSERT_EQ(c.ranges.size(), 1u);
  EXPECT_EQ(c.ranges[0].name, "add");
  EXPECT_EQ(c.lost_ranges, 0);
  const double bytes = 2.0 * double(n);  // one buffer
  const double read = value(c.ranges[0], profiler::kDramBytesRead);
  const double written = value(c.ranges[0], profiler::kDramBytesWrite);
  EXPECT_NEAR(read / (2 * bytes), 1.0, 0.10) << "DRAM bytes read " << read << ", expected " << 2 * bytes;
  EXPECT_NEAR(written / bytes, 1.0, 0.10) << "DRAM bytes written " << written << ", expected " << bytes;
  EXPECT_GT(value(c.ranges[0], profiler::kGpuTimeNs), 0);
  EXPECT_EQ(value(c.ranges[0], profiler::kTensorOpsBf16), 0);  // no tensor-core work
  EXPECT_FALSE(c.metadata.at("chip").empty());
}

TEST(RangeProfiler, TensorOpsOfAGemmAreItsFlops) {
  K3_REQUIRE_GPU();
  const int64_t m = 3072, n = 3072, k = 3072;
  DeviceBuffer<__nv_bfloat16> x(m * k), w(n * k);
  DeviceBuffer<float> y(m * n);
  CUDA_CHECK(cudaMemset(x.get(), 0x3C, m * k * sizeof(__nv_bfloat16)));  // bf16 0x3C3C ≈ 0.0115
  CUDA_CHECK(cudaMemset(w.get(), 0x3C, n * k * sizeof(__nv_bfloat16)));
  runtime::GemmRunner gemm;
  auto run = [&] { return gemm.bf16_to_f32(x.get(), k, w.get(), nullptr, 1.0f, 0.0f, y.get(), n, m, n, k, nullptr); };
  ASSERT_EQ(run(), cudaSuccess) << gemm.last_error();  // plans the shape
  CUDA_CHECK(cudaDeviceSynchronize());

  CuptiRangeProfiler counters;
  counters.start();
  counters.push_range("gemm");
  ASSERT_EQ(run(), cudaSuccess) << gemm.last_error();
  counters.pop_range();
  const RangeCounters c = counters.stop();

  ASSERT_EQ(c.ranges.size(), 1u);
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const double ops = value(c.ranges[0], profiler::kTensorOpsBf16) + value(c.ranges[0], profiler::kTensorOpsFp8);
  EXPECT_NEAR(ops * profiler::kTensorFlopsPerMathOp / flops, 1.0, 0.03)
      << "tensor math ops " << ops << " for " << flops << " FLOPs: " << ops / flops
      << " ops per FLOP (kTensorFlopsPerMathOp assumes " << 1 / profiler::kTensorFlopsPerMathOp << ")";
}

TEST(RangeProfiler, RangesKeepTheirNamesAndTheLimitCountsLostOnes) {
  K3_REQUIRE_GPU();
  const int64_t n = 1 << 20;
  DeviceBuffer<__nv_bfloat16> a(n), b(n), out(n);
  auto add = [&] { ASSERT_EQ(kernels::add_bf16(a.get(), b.get(), out.get(), n, nullptr), cudaSuccess); };
  add();
  CUDA_CHECK(cudaDeviceSynchronize());

  CuptiRangeProfiler counters(RangeProfilerOptions{profiler::counter_mode_metrics(), 3});
  counters.start();
  for (const char* name : {"a", "b", "a", "c"}) {  // "c" is the fourth top-level range: past the limit of 3
    counters.push_range(name);
    add();
    if (std::string(name) == "b") {
      counters.push_range("inner");  // nested: counted in "b"
      add();
      counters.pop_range();
    }
    counters.pop_range();
  }
  const RangeCounters c = counters.stop();
  // CUPTI keeps one range per name ("a" twice is one range; its values are made per push).
  ASSERT_EQ(c.ranges.size(), 2u);
  EXPECT_EQ(c.ranges[0].name, "a");
  EXPECT_EQ(c.ranges[0].occurrence, 0);
  EXPECT_EQ(c.ranges[1].name, "b");
  EXPECT_EQ(c.lost_ranges, 1);
  EXPECT_EQ(c.metadata.at("ranges_pushed"), "4");
  for (const CounterRange& r : c.ranges) EXPECT_GT(value(r, profiler::kGpuTimeNs), 0) << r.name;
}

TEST(RangeProfiler, StopWithAnOpenRangeIsRefused) {
  K3_REQUIRE_GPU();
  const int64_t n = 1 << 20;
  DeviceBuffer<__nv_bfloat16> a(n), b(n), out(n);  // (and a current context)
  CuptiRangeProfiler counters;
  counters.start();
  counters.push_range("open");
  try {
    counters.stop();
    ADD_FAILURE() << "stop() with an open range did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 ranges still open"), std::string::npos) << e.what();
  }
  // Released: a new session on the same context works.
  CuptiRangeProfiler again;
  again.start();
  again.push_range("add");
  ASSERT_EQ(kernels::add_bf16(a.get(), b.get(), out.get(), n, nullptr), cudaSuccess);
  again.pop_range();
  const RangeCounters c = again.stop();
  ASSERT_EQ(c.ranges.size(), 1u);
  EXPECT_EQ(c.ranges[0].name, "add");
}

}  // namespace
}  // namespace k3::gpu_test
