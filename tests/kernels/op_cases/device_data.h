// Device data for the GPU op harness and the kernel tests: buffers poisoned with NaN on creation, random host
// matrices, conversions between the CPU reference's fp32 matrices and device element types, the normalised error
// and the tolerances scaled to the output dtype. No GoogleTest here: the perf driver uses it too.
#pragma once

#include "engine/reference/tensor.h"
#include "engine/runtime/cuda_check.h"
#include "kernels/random_fill.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace k3::gpu_test {

inline bool gpu_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Device memory of n elements, poisoned (all bytes 0xFF: NaN for float types) on creation.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : DeviceBuffer(n, 0xFF) {}
  // Every byte `fill_byte` (perf inputs of a known value: 0x3F gives bf16 0x3F3F, about 0.75).
  DeviceBuffer(size_t n, uint8_t fill_byte) : n_(n) {
    CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(1, n) * sizeof(T)));
    CUDA_CHECK(cudaMemset(data_, fill_byte, std::max<size_t>(1, n) * sizeof(T)));
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

// Bit patterns and random values of bf16 host data, for cases that compare exactly.
inline uint16_t bits_of(__nv_bfloat16 v) {
  uint16_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
inline std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = __float2bfloat16_rn(dist(rng));
  return v;
}

// Shared device buffers for the perf closures (OpCase::perf), on seeded random data from kernels/random_fill
// (constant or zero operands can run faster than real ones) or of a known byte.
template <typename T>
using Shared = std::shared_ptr<DeviceBuffer<T>>;
template <typename T>
Shared<T> device_bytes(size_t n, uint8_t fill_byte) {
  return std::make_shared<DeviceBuffer<T>>(n, fill_byte);
}
inline Shared<float> device_normal_f32(size_t n, float mean, float stddev, uint64_t key) {
  auto b = std::make_shared<DeviceBuffer<float>>(n);
  CUDA_CHECK(kernels::fill_normal_f32(b->get(), int64_t(n), mean, stddev, key, nullptr));
  return b;
}
inline Shared<__nv_bfloat16> device_normal_bf16(size_t n, float mean, float stddev, uint64_t key) {
  auto b = std::make_shared<DeviceBuffer<__nv_bfloat16>>(n);
  CUDA_CHECK(kernels::fill_normal_bf16(b->get(), int64_t(n), mean, stddev, key, nullptr));
  return b;
}
inline Shared<float> device_uniform_f32(size_t n, float lo, float hi, uint64_t key) {
  auto b = std::make_shared<DeviceBuffer<float>>(n);
  CUDA_CHECK(kernels::fill_uniform_f32(b->get(), int64_t(n), lo, hi, key, nullptr));
  return b;
}
// `sets` buffers of the same kind, one per rotated input set.
template <typename Make>
auto rotated(int sets, Make make) {
  std::vector<decltype(make(0))> out;
  for (int s = 0; s < sets; ++s) out.push_back(make(s));
  return out;
}

// Tolerances scaled to the output dtype's precision (bf16 has 8 significant bits).
template <typename T>
constexpr double tolerance_for();
template <>
constexpr double tolerance_for<float>() {
  return 1e-5;
}
template <>
constexpr double tolerance_for<__nv_bfloat16>() {
  return 8e-3;
}

}  // namespace k3::gpu_test
