// Shared method of the GPU benchmark drivers in bench/gpu/ (DESIGN §6): count the fewest bytes and
// the FLOPs of each op first; warm up; rotate over input buffers larger than L2 so every timed
// launch reads from HBM; median of many launches timed with CUDA events. Each result is reported
// as achieved bytes/s and FLOP/s beside
//   - the ceilings measured in the same run (device copy bandwidth, read + write counted), and
//   - the roofline time that sim/ predicts for the same op on this GPU's hardware file
//     (max(FLOPs / (peak·η_compute), bytes / (bandwidth·η_memory)) of the op's efficiency class).
// Every driver prints one JSON object: {"gpu", "hardware_file", "repeats", "measured_copy_bytes_per_s",
// "results": [...]}.
#pragma once

#include "core/hardware.h"
#include "engine/runtime/cuda_check.h"
#include "kernels/random_fill.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace k3::bench {

struct Result {
  std::string name;
  double bytes = 0, flops = 0, median_us = 0, roofline_us = 0;
  EfficiencyClass cls = EfficiencyClass::elementwise;
};

// Median microseconds of `launch(i)` over `repeats` timed launches after `warmup` untimed ones;
// `i` selects the rotated buffer set.
inline double time_us(const std::function<void(int)>& launch, int repeats, int warmup = 5) {
  for (int i = 0; i < warmup; ++i) launch(i);
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    CUDA_CHECK(cudaEventRecord(start));
    launch(i);
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(ms * 1000.0);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// Median µs per launch when `count` launches of `launch(stream)` are replayed from one CUDA graph (as a decode
// step runs them): the host API's launch gaps are gone.
inline double graph_us_per_launch(const std::function<void(cudaStream_t)>& launch, int count, int repeats) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < count; ++i) launch(stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double us = time_us([&](int) { CUDA_CHECK(cudaGraphLaunch(exec, nullptr)); }, repeats) / count;
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return us;
}

// Device buffers of n seeded random values (kernels/random_fill): benchmarks run on random data, since constant or zero
// operands can run faster than real ones (on an H200 the bf16 GEMM ran 895 against 789 TFLOP/s).
template <typename T, typename Fill>
T* device_filled(size_t n, Fill fill) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T)));
  CUDA_CHECK(fill(p, int64_t(n)));
  return p;
}
inline float* device_normal_f32(size_t n, float mean, float stddev, uint64_t key) {
  return device_filled<float>(
      n, [&](float* p, int64_t count) { return kernels::fill_normal_f32(p, count, mean, stddev, key, nullptr); });
}
inline __nv_bfloat16* device_normal_bf16(size_t n, float mean, float stddev, uint64_t key) {
  return device_filled<__nv_bfloat16>(n, [&](__nv_bfloat16* p, int64_t count) {
    return kernels::fill_normal_bf16(p, count, mean, stddev, key, nullptr);
  });
}
inline float* device_uniform_f32(size_t n, float lo, float hi, uint64_t key) {
  return device_filled<float>(
      n, [&](float* p, int64_t count) { return kernels::fill_uniform_f32(p, count, lo, hi, key, nullptr); });
}

template <typename T>
T* device_alloc(size_t n, uint8_t fill) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T)));
  CUDA_CHECK(cudaMemset(p, fill, std::max<size_t>(1, n) * sizeof(T)));
  return p;
}

// Number of copies of a `bytes`-sized working set needed to exceed twice the L2.
inline int rotation(double bytes, double l2_bytes) {
  return std::max(1, int(2.0 * l2_bytes / std::max(1.0, bytes)) + 1);
}

// The command line every driver shares, the GPU, the hardware file and the measured copy ceiling.
class Session {
 public:
  Session(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
      if (std::strcmp(argv[i], "--hardware") == 0) hardware_path = argv[i + 1];
      if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::atoi(argv[i + 1]);
      if (std::strcmp(argv[i], "--filter") == 0) filter = argv[i + 1];
    }
    hw = load_hardware(hardware_path);
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    l2_bytes = prop.l2CacheSize;
    // Measured ceiling: device-to-device copy of 1 GiB (read + write counted).
    const size_t copy_bytes = size_t(1) << 30;
    uint8_t* a = device_alloc<uint8_t>(copy_bytes, 1);
    uint8_t* b = device_alloc<uint8_t>(copy_bytes, 2);
    const double copy_us =
        time_us([&](int) { CUDA_CHECK(cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice)); }, repeats);
    copy_bytes_per_s = 2.0 * copy_bytes / (copy_us * 1e-6);
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
  }

  // The roofline time sim/ gives an op of this class on this hardware file.
  double roofline_us(double flops, double bytes, EfficiencyClass cls, ComputeType ct) const {
    const Efficiency& e = hw.efficiency_of(cls);
    return std::max(flops / (hw.peak(ct) * e.compute), bytes / (hw.hbm_bandwidth_bytes_per_s * e.memory)) * 1e6;
  }

  int rotation_for(double bytes) const { return rotation(bytes, l2_bytes); }

  // Whether a result of this name is wanted: `--filter TEXT` keeps the names containing TEXT, or any of its
  // '|'-separated parts (drivers that honour it say so in their usage line).
  bool wants(const std::string& name) const {
    if (filter.empty()) return true;
    for (size_t begin = 0;;) {
      const size_t end = filter.find('|', begin);
      const std::string part = filter.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
      if (!part.empty() && name.find(part) != std::string::npos) return true;
      if (end == std::string::npos) return false;
      begin = end + 1;
    }
  }

  // Prints the JSON object of all results; `extra` (already-formatted `"key": value` pairs) is
  // added to the top level, e.g. a measured GEMM ceiling.
  void print(const std::vector<Result>& results, const std::string& extra = "") const {
    fmt::print("{{\n  \"gpu\": \"{}\",\n  \"hardware_file\": \"{}\",\n  \"repeats\": {},\n", prop.name, hardware_path,
               repeats);
    if (!extra.empty()) fmt::print("  {},\n", extra);
    fmt::print("  \"measured_copy_bytes_per_s\": {:.4g},\n  \"results\": [\n", copy_bytes_per_s);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      const double bw = r.bytes / (r.median_us * 1e-6);
      // JSON has no infinity: a row without a bound has no ratio.
      const std::string over = r.roofline_us > 0 ? fmt::format("{:.2f}", r.median_us / r.roofline_us) : "null";
      fmt::print(
          "    {{\"op\": \"{}\", \"class\": \"{}\", \"median_us\": {:.3f}, \"bytes\": {:.6g}, "
          "\"flops\": {:.6g}, \"bytes_per_s\": {:.4g}, \"flops_per_s\": {:.4g}, "
          "\"percent_of_measured_copy_bw\": {:.1f}, \"roofline_us\": {:.3f}, \"time_over_roofline\": {}}}{}\n",
          r.name, to_string(r.cls), r.median_us, r.bytes, r.flops, bw, r.flops / (r.median_us * 1e-6),
          100.0 * bw / copy_bytes_per_s, r.roofline_us, over, i + 1 < results.size() ? "," : "");
    }
    fmt::print("  ]\n}}\n");
  }

  std::string hardware_path = "scenarios/hardware/h200-sxm.yaml";
  int repeats = 50;
  std::string filter;
  Hardware hw;
  cudaDeviceProp prop{};
  double l2_bytes = 0;
  double copy_bytes_per_s = 0;
};

}  // namespace k3::bench
