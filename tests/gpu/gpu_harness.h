// The table-driven op harness for kernels/: every kernel against the CPU reference on fresh random
// inputs (never zeros), odd sizes, dtype-scaled tolerances, and an output buffer poisoned with NaN
// before the kernel runs (so an element the kernel forgets to write fails the comparison).
// The CPU side runs everywhere; the GPU side skips when no CUDA device is present.
//
// Adding an op: write a test that builds its cases (a small struct of sizes), computes the
// reference with engine/reference, calls K3_REQUIRE_GPU(), runs the kernel on DeviceBuffers and
// checks normalized_error(...) <= tolerance_for<T>().
#pragma once

#include "engine/reference/tensor.h"
#include "kernels/cuda_check.h"

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace k3::gpu_test {

inline bool gpu_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define K3_REQUIRE_GPU() \
  if (!::k3::gpu_test::gpu_available()) GTEST_SKIP() << "no CUDA device: GPU side skipped"

// Device memory of n elements, poisoned (all bytes 0xFF: NaN for float types) on creation.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(1, n) * sizeof(T)));
    CUDA_CHECK(cudaMemset(data_, 0xFF, std::max<size_t>(1, n) * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }
  void upload(const std::vector<T>& host) {
    CUDA_CHECK(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    CUDA_CHECK(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T* get() { return data_; }
  const T* get() const { return data_; }
  size_t size() const { return n_; }

 private:
  T* data_ = nullptr;
  size_t n_ = 0;
};

inline ref::Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937& rng, float lo = -1.0f,
                                 float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  ref::Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = dist(rng);
  return m;
}

// Row-major host copies in a device element type, and back.
inline std::vector<__nv_bfloat16> to_bf16(const ref::Matrix& m) {
  std::vector<__nv_bfloat16> out(m.size());
  for (Eigen::Index i = 0; i < m.size(); ++i) out[i] = __float2bfloat16_rn(m.data()[i]);
  return out;
}
inline std::vector<float> to_f32(const ref::Matrix& m) { return {m.data(), m.data() + m.size()}; }
inline ref::Matrix from_bf16(const std::vector<__nv_bfloat16>& v, Eigen::Index rows, Eigen::Index cols) {
  ref::Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = __bfloat162float(v[i]);
  return m;
}
inline ref::Matrix from_f32(const std::vector<float>& v, Eigen::Index rows, Eigen::Index cols) {
  return Eigen::Map<const ref::Matrix>(v.data(), rows, cols);
}
// The bf16-rounded values the kernel actually reads, so the reference sees the same inputs.
inline ref::Matrix round_to_bf16(const ref::Matrix& m) { return from_bf16(to_bf16(m), m.rows(), m.cols()); }

// ||gpu - ref||₂ / ||ref||₂; infinite when the GPU result holds a NaN (e.g. an unwritten element).
inline double normalized_error(const ref::Matrix& gpu, const ref::Matrix& ref) {
  if (!gpu.allFinite()) return INFINITY;
  return double((gpu - ref).norm()) / std::max(1e-30, double(ref.norm()));
}

// Tolerances scaled to the output dtype's precision (bf16 has 8 significant bits).
template <typename T> constexpr double tolerance_for();
template <> constexpr double tolerance_for<float>() { return 1e-5; }
template <> constexpr double tolerance_for<__nv_bfloat16>() { return 8e-3; }

}  // namespace k3::gpu_test
