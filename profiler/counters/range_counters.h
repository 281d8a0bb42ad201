// Hardware counters per op range, as the Range Profiler measures them (docs/profile.md, "Counter mode"):
// one entry per occurrence of a range, in the order the ranges ran, each with its metric values
// (metric name → value, in the metric's own unit: bytes, math ops, nanoseconds). Ranges of the same
// name are kept per occurrence; compare_counters takes the median per op. (The CUPTI collector gets one
// range per name from CUPTI, which sums that name's pushes: it records the mean per push, once.)
// On disk: JSON, written atomically; reading names the file, the key and what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace k3::profiler {

// The metrics counter mode collects, all in one pass on GH100 (checked at run time by the collector).
inline constexpr const char* kDramBytesRead = "dram__bytes_read.sum";    // bytes read from DRAM (HBM)
inline constexpr const char* kDramBytesWrite = "dram__bytes_write.sum";  // bytes written to DRAM
inline constexpr const char* kTensorOpsBf16 = "sm__ops_path_tensor_src_bf16_dst_fp32.sum";  // tensor math ops
inline constexpr const char* kTensorOpsFp8 = "sm__ops_path_tensor_src_fp8.sum";             // tensor math ops
inline constexpr const char* kGpuTimeNs = "gpu__time_duration.sum";                         // the range's GPU time, ns
std::vector<std::string> counter_mode_metrics();  // the five above, in this order

// FLOPs per tensor "math op" of the sm__ops_path_tensor_* counters: one op is one FLOP (a multiply-add
// counts two), as the GEMM of known size in tests/profiler/cupti/range_profiler_gpu_test.cpp checks.
inline constexpr double kTensorFlopsPerMathOp = 1.0;

struct CounterRange {
  std::string name;                      // the op's name, "L003.moe.experts"
  int occurrence = 0;                    // 0, 1, … among the ranges of this name (one per decode step)
  std::map<std::string, double> values;  // metric name → value
};

struct RangeCounters {
  std::string origin;                           // the file it was read from (not written)
  std::vector<std::string> metrics;             // what was collected
  std::vector<CounterRange> ranges;             // in the order they ran
  int64_t lost_ranges = 0;                      // pushed beyond the pass's range limit, or dropped by CUPTI
  std::map<std::string, std::string> metadata;  // gpu, chip, command, date, commit, shape
};

std::string to_json_text(const RangeCounters& counters);
void write_range_counters(const RangeCounters& counters, const std::string& path);  // atomic
RangeCounters parse_range_counters(const std::string& text, const std::string& origin);
RangeCounters read_range_counters(const std::string& path);

}  // namespace k3::profiler
