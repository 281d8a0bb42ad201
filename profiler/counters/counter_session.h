// A counter collector: hardware counters per named range of GPU work, in one pass. The CUPTI Range
// Profiler implements it (profiler/cupti/range_profiler.h); code that only pushes and pops ranges (the
// engine's op ranges in `k3perf run --counters`) sees this interface and needs no CUDA.
//   start()          before the first range (the collector is bound to the CUDA context current then);
//   push_range(name) opens a range on the calling thread: the work launched until the matching pop
//                    is counted under `name` (one CounterRange per push, never merged with others);
//   pop_range()      closes the innermost open range; never throws (errors are reported by stop());
//   stop()           waits for the work, decodes, and returns one CounterRange per range in push order.
#pragma once

#include "profiler/counters/range_counters.h"

#include <string>

namespace k3::profiler {

class CounterSession {
 public:
  virtual ~CounterSession() = default;
  virtual void start() = 0;
  virtual void push_range(const std::string& name) = 0;
  virtual void pop_range() noexcept = 0;
  virtual RangeCounters stop() = 0;
};

}  // namespace k3::profiler
