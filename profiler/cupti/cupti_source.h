// The CUPTI collector: an ActivitySource (profiler/attribution/activity.h) that records, in-process,
// what a CUDA program does between start() and stop():
//   activity records  CONCURRENT_KERNEL (never KERNEL, which serialises kernels), MEMCPY, MEMSET,
//                     RUNTIME and DRIVER API calls, SYNCHRONIZATION (host waits), MARKER (NVTX push/pop
//                     and start/end ranges),
//                     EXTERNAL_CORRELATION (the ids the program pushes with push_step, e.g. per decode step);
//   callbacks         RESOURCE GRAPHNODE_CREATED (the node id tied to the correlation id of the API
//                     call that created it during stream capture, so replayed kernels find their op
//                     range) and GRAPHNODE_CLONED (instantiated graphs copy their nodes);
// into a pool of 8 MB buffers (at most `max_buffers` in flight; CUPTI drops records beyond it and the
// count of dropped records is reported, never silent). CUPTI's worker flushes completed buffers every
// `flush_period_ms`, so a long run returns them to the pool instead of holding them all until stop().
// Kernel names are demangled. Timestamps: CUPTI asks our clock (std::chrono::steady_clock, ns) for
// every timestamp and maps the GPU's onto it, so GPU records, host records and the program's own
// steady_clock readings share one time base (the trace's metadata says so: "clock").
// NVTX ranges reach CUPTI only through NVTX's injection: call enable_nvtx_injection() before the
// program's first NVTX call (it points NVTX_INJECTION64_PATH at the loaded libcupti).
#pragma once

#include "profiler/attribution/activity.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace k3::profiler {

class CuptiActivitySource final : public ActivitySource {
 public:
  explicit CuptiActivitySource(std::size_t max_buffers = 256, std::uint32_t flush_period_ms = 100);
  ~CuptiActivitySource() override;
  void start() override;            // Error naming the CUPTI call that failed (e.g. another subscriber)
  ActivityRecords stop() override;  // flushes every buffer (synchronise with the device first)

  // Tags the CUDA API calls this thread makes until pop_step() with `step` (an external correlation id,
  // kind CUSTOM0): attribution turns them into "step N" ranges. No-ops while no collector runs.
  static void push_step(std::uint64_t step);
  static void pop_step();

  struct State;  // buffers and records, shared with CUPTI's callbacks (cupti_source.cpp)

 private:
  std::unique_ptr<State> state_;
  bool running_ = false;
};

// Sets NVTX_INJECTION64_PATH to the libcupti this process loaded (unless already set); returns the
// path, or "" when it cannot be found (NVTX ranges are then not recorded).
std::string enable_nvtx_injection();

}  // namespace k3::profiler
