// lab_common: what the standalone experiments of bench/lab share (llm.c's dev/cuda shape: one .cu per experiment,
// a main that checks the GPU result against a CPU function on random inputs and times it). Exit codes: 0 every check
// passed, 1 a check failed, 77 the device cannot run the experiment (ctest counts it as skipped).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace k3::lab {

inline constexpr int kSkipped = 77;

// Aborts the experiment with the failing call and CUDA's message.
#define LAB_CUDA(call)                                                                                     \
  do {                                                                                                     \
    const cudaError_t lab_status_ = (call);                                                                \
    if (lab_status_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(lab_status_)); \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

// The current device's compute capability as 10 · major + minor; 0 without a device.
inline int device_capability() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return 10 * major + minor;
}

// n values uniform in [-1, 1), rounded to bf16 (so the CPU side sees exactly the GPU's inputs).
inline std::vector<float> random_bf16_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = __bfloat162float(__float2bfloat16_rn(uniform(rng)));
  return v;
}

// ‖got − want‖ / ‖want‖ (Frobenius); infinite when got has a non-finite value.
inline double normalized_error(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / (norm > 0.0 ? norm : 1.0));
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* d = nullptr;
  LAB_CUDA(cudaMalloc(&d, host.size() * sizeof(T)));
  LAB_CUDA(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<T> host_copy(const T* device, size_t n) {
  std::vector<T> host(n);
  LAB_CUDA(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

inline std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16_rn(v[i]);
  return out;
}

// Median µs of `launch` over `repeats` timed runs of `per_run` launches each (one warm-up run first).
template <typename Launch>
double time_us(Launch launch, int repeats = 11, int per_run = 20) {
  cudaEvent_t start, stop;
  LAB_CUDA(cudaEventCreate(&start));
  LAB_CUDA(cudaEventCreate(&stop));
  std::vector<double> runs;
  for (int r = -1; r < repeats; ++r) {
    LAB_CUDA(cudaEventRecord(start));
    for (int i = 0; i < per_run; ++i) launch();
    LAB_CUDA(cudaEventRecord(stop));
    LAB_CUDA(cudaEventSynchronize(stop));
    float ms = 0.0f;
    LAB_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 0) runs.push_back(1e3 * ms / per_run);
  }
  LAB_CUDA(cudaEventDestroy(start));
  LAB_CUDA(cudaEventDestroy(stop));
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace k3::lab
