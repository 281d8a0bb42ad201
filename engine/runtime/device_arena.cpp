#include "engine/runtime/device_arena.h"

#include "core/error.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <utility>

namespace k3::runtime {

namespace {
constexpr uint64_t kAlignBytes = 256;
uint64_t aligned(uint64_t n) { return (n + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }
}  // namespace

DeviceArena::DeviceArena(uint64_t bytes, const std::string& what) : capacity_(aligned(bytes)), what_(what) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, std::max<uint64_t>(capacity_, kAlignBytes));
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw Error(fmt::format("cannot allocate {:.3f} GiB for {} on the GPU ({}): {:.3f} GiB free of {:.3f} GiB",
                            capacity_ / 1073741824.0, what, cudaGetErrorString(status), free_bytes / 1073741824.0,
                            total_bytes / 1073741824.0));
  }
  base_ = static_cast<uint8_t*>(p);
}

DeviceArena::DeviceArena(DeviceArena&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      capacity_(other.capacity_),
      used_(other.used_),
      what_(std::move(other.what_)) {}

DeviceArena& DeviceArena::operator=(DeviceArena&& other) noexcept {
  if (this != &other) {
    if (base_) cudaFree(base_);
    base_ = std::exchange(other.base_, nullptr);
    capacity_ = other.capacity_;
    used_ = other.used_;
    what_ = std::move(other.what_);
  }
  return *this;
}

DeviceArena::~DeviceArena() {
  if (base_) cudaFree(base_);
}

void* DeviceArena::take(uint64_t bytes) {
  const uint64_t offset = used_;
  used_ += aligned(bytes);
  if (is_measuring()) return nullptr;
  K3_CHECK(used_ <= capacity_, "{}: the device arena of {} bytes is exhausted (asked {} more at {})", what_, capacity_,
           bytes, offset);
  return base_ + offset;
}

}  // namespace k3::runtime
