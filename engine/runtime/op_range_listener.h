// An optional listener of the engine's op ranges: every op range the GPU model opens (an NVTX range
// named as in the op graph, "L004.mla.attn_decode") is also reported to it, e.g. to open a Range
// Profiler range of the same name (`k3perf run --counters`). Process-wide and null by default (then
// nothing changes). Set it and clear it outside any op range, on the thread that runs the model;
// pop() must not throw. Ranges replayed from a CUDA graph are not reported (nothing runs on the host).
#pragma once

#include <string>

namespace k3::runtime {

class OpRangeListener {
 public:
  virtual ~OpRangeListener() = default;
  virtual void push(const std::string& name) = 0;
  virtual void pop() noexcept = 0;
};

inline OpRangeListener*& op_range_listener() {
  static OpRangeListener* listener = nullptr;
  return listener;
}

}  // namespace k3::runtime
