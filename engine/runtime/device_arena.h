// One device allocation handed out in 256-byte-aligned pieces. Built twice by the same code: first a
// measuring arena (no memory; take() returns nullptr and only counts), then a real one of the measured
// size — so the buffers a model needs are sized by exactly the code that lays them out.
#pragma once

#include <cstdint>
#include <string>

namespace k3::runtime {

class DeviceArena {
 public:
  static DeviceArena measuring() { return DeviceArena(); }
  // Allocates `bytes` of device memory; Error naming `what`, the size and the free memory when it fails.
  DeviceArena(uint64_t bytes, const std::string& what);
  DeviceArena(DeviceArena&& other) noexcept;
  DeviceArena& operator=(DeviceArena&& other) noexcept;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena();

  void* take(uint64_t bytes);  // nullptr while measuring; Error when the arena is exhausted
  template <typename T>
  T* take_n(int64_t n) {
    return static_cast<T*>(take(uint64_t(n) * sizeof(T)));
  }
  bool is_measuring() const { return base_ == nullptr; }
  uint64_t used_bytes() const { return used_; }
  uint64_t capacity_bytes() const { return capacity_; }

 private:
  DeviceArena() = default;
  uint8_t* base_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t used_ = 0;
  std::string what_;
};

}  // namespace k3::runtime
