// Fits a measured collective curve (core/hardware.h MeasuredCollective) to nccl-tests-style samples
// (docs/comm.md):
//   1. latency α = the smallest measured time (the floor every call pays);
//   2. each sample implies a bus bandwidth busbw_i = S_i · factor / (t_i − α), with the excess
//      t_i − α taken as at least 1 % of t_i (a latency-dominated sample bounds the bandwidth only);
//   3. knots start at every implied bandwidth and are removed greedily (the one whose removal
//      leaves the smallest worst error first) while the worst relative error over all samples
//      stays within the target.
// Deterministic; the result interpolates busbw linearly in log size between knots.
#pragma once

#include "core/hardware.h"
#include "sim/comm/nccl_table.h"

#include <string>
#include <vector>

namespace k3 {

// `samples`: one collective and group size (select_samples), at least two distinct sizes.
MeasuredCollective fit_collective(const std::vector<NcclSample>& samples, const std::string& link,
                                  double target_relative_error = 0.05);
// Largest |predicted / measured − 1| over the samples.
double max_relative_error(const MeasuredCollective& curve, const std::vector<NcclSample>& samples);

// Fits every (collective, group size) in the table; link = nvlink when the group fits in the base
// hardware's scale-up domain, else network.
std::vector<MeasuredCollective> fit_table(const std::vector<NcclSample>& table, const Hardware& base,
                                          double target_relative_error = 0.05);

// A hardware YAML file: the base file's content with `name` replaced, `source_id: citation` added to
// its sources and a `collectives` block with the curves (and the samples each was fitted to).
std::string measured_hardware_yaml(const std::string& base_file, const std::string& name, const std::string& source_id,
                                   const std::string& citation, const std::vector<MeasuredCollective>& curves);

}  // namespace k3
