// Collective timings in the form nccl-tests reports them, and its bandwidth definitions
// (github.com/NVIDIA/nccl-tests doc/PERFORMANCE.md): for a buffer of S bytes ("size") taking t,
//   algbw = S / t,   busbw = algbw · factor,   factor = 2(n-1)/n (all-reduce), (n-1)/n (all-gather,
//   reduce-scatter, all-to-all).
// The table is CSV with the header `collective,group_size,size_bytes,time_us` (extra columns such as
// algbw_gb_s and busbw_gb_s are allowed and ignored); bench/nccl_sweep writes it.
#pragma once

#include <string>
#include <vector>

namespace k3 {

struct NcclSample {
  std::string collective;  // all_reduce, all_gather, reduce_scatter, all_to_all
  int group_size = 0;
  double size_bytes = 0;
  double time_us = 0;
  double algbw_bytes_per_s() const { return size_bytes / (time_us * 1e-6); }
  double busbw_bytes_per_s() const;
};

// Errors name `origin`, the line and the column.
std::vector<NcclSample> parse_nccl_table(const std::string& csv_text, const std::string& origin);
std::vector<NcclSample> load_nccl_table(const std::string& path);
std::string to_csv(const std::vector<NcclSample>& samples);  // the same format, with algbw and busbw in GB/s

// The samples of one collective and group size, sorted by size.
std::vector<NcclSample> select_samples(const std::vector<NcclSample>& all, const std::string& collective,
                                       int group_size);

}  // namespace k3
