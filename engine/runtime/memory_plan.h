// The GPU runtime's memory plan: every buffer `k3perf run` will allocate, as items that the engine sizes with
// the code that lays them out (DeviceWeights::device_bytes, GpuCache::device_bytes, GpuModel::workspace_bytes:
// measuring arenas, device_arena.h), checked before anything is allocated, so that a run that cannot fit is
// refused with what needs how much against how much is free — instead of failing halfway through loading.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace k3::runtime {

struct MemoryPlan {
  struct Item {
    std::string what;
    uint64_t bytes = 0;
  };
  std::vector<Item> items;
  uint64_t total_bytes() const;
  std::string describe() const;  // one line per item, GiB, then the total
};

// Throws InputError when the plan does not fit in `free_bytes`: names the device, the total, the free
// bytes and every item, largest first.
void require_fits(const MemoryPlan& plan, uint64_t free_bytes, const std::string& device);

}  // namespace k3::runtime
