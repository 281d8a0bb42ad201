// The counter collector: a CounterSession (profiler/counters/counter_session.h) on the CUPTI Range
// Profiler and the profiler host API (CUDA 13), for the CUDA context current at start():
//   user ranges (push/pop by name), user replay with exactly one pass: the metrics (by default
//   counter_mode_metrics(): DRAM bytes read and written, bf16 and fp8 tensor math ops, GPU time) must
//   fit one pass on the device's chip, else start() refuses, naming the pass count;
//   each metric is checked against the chip's metric list first (an unknown one is named);
//   at most `max_ranges` top-level ranges per pass (the counter data image and CUPTI's
//   maxRangesPerPass): pushes beyond it are not profiled and are counted in lost_ranges, as are the
//   ranges CUPTI reports dropped when decoding; nested pushes fold into their outermost range.
// Ranges are kept per occurrence (never summed); compare_counters takes the median per op.
// Failures throw k3::Error naming the CUPTI call and its status; no permission to read the counters
// (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) says how to allow it. No CUDA runtime call: the two driver calls
// it makes are looked up in the loaded libcuda (k3perf links no libcuda and starts without a driver).
// One collector per context at a time; not together with the activity collector (cupti_source.h).
#pragma once

#include "profiler/counters/counter_session.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace k3::profiler {

struct RangeProfilerOptions {
  std::vector<std::string> metrics = counter_mode_metrics();
  std::size_t max_ranges = 4096;  // top-level ranges one pass holds
};

class CuptiRangeProfiler final : public CounterSession {
 public:
  explicit CuptiRangeProfiler(RangeProfilerOptions options = {});
  ~CuptiRangeProfiler() override;
  CuptiRangeProfiler(const CuptiRangeProfiler&) = delete;
  CuptiRangeProfiler& operator=(const CuptiRangeProfiler&) = delete;

  void start() override;
  void push_range(const std::string& name) override;
  void pop_range() noexcept override;
  RangeCounters stop() override;

  struct State;  // CUPTI objects, images and the range bookkeeping (range_profiler.cpp)

 private:
  RangeProfilerOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace k3::profiler
