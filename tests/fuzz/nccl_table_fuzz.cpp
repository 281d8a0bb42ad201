// An nccl-tests style CSV table (sim/comm/nccl_table); a small one is fitted as `k3perf comm fit` does and the
// hardware file it writes must load.
#include "core/hardware.h"
#include "fuzz_data.h"
#include "fuzz_target.h"
#include "sim/comm/collective_fit.h"
#include "sim/comm/nccl_table.h"

K3PERF_FUZZ_TEXT_TARGET(nccl_table) {
  const std::vector<k3::NcclSample> samples = k3::parse_nccl_table(text, "fuzz.csv");
  if (samples.size() > 64) return;  // the greedy knot removal is cubic in the samples of one curve
  const std::string base = k3::fuzz::data().hardware_file("h200-sxm");
  const std::vector<k3::MeasuredCollective> curves = k3::fit_table(samples, k3::load_hardware(base));
  k3::parse_hardware(k3::measured_hardware_yaml(base, "fuzz", "fuzz_source", "fuzzed table", curves), "fuzz (written)");
}
