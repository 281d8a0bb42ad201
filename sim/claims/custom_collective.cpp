// P17-style claims: a hand-written collective against NCCL at given message sizes. NCCL's time comes
// from the hardware file: its measured curve for the collective and group size when it has one
// (docs/comm.md), else the fabric model (sim/collective_time.h). The hand-written one is modelled as a single
// kernel that exchanges a flag with its peers and then moves the bytes over NVLink at the link's
// full rate: custom_latency_us + S·factor / link bandwidth. Predicted: the smallest and largest
// speedup over the sizes. The breakdown shows NCCL's latency share per size. Alternatives: custom
// latencies of 1, 2, 5, 8 us (which of them reproduce the claim is check_claim's search step).
#include "core/error.h"
#include "sim/claims/claim.h"
#include "sim/claims/claim_scenario.h"
#include "sim/collective_time.h"

#include <fmt/format.h>

#include <algorithm>

namespace k3 {
namespace {

double nccl_time_us(const Hardware& hw, const std::string& collective, int n, double size, std::string* how) {
  const std::string link = n <= hw.scale_up_domain_gpus ? "nvlink" : "network";
  if (how) {
    const MeasuredCollective* m = hw.measured_collective(collective, link, n);
    const LinkSpec& spec = link == "nvlink" ? hw.nvlink : hw.network;
    const CollectiveLatency l = collective_latency(hw, collective_kind(collective), n);
    *how = m ? fmt::format("measured curve (source '{}')", m->source)
             : fmt::format("the fabric model: {:.1f} us ({}) + S / ({:.0f} GB/s x {:.2f})", l.latency_us,
                           to_string(l.algorithm), spec.bandwidth_bytes_per_s / 1e9, spec.efficiency);
  }
  return collective_call_time_us(hw, collective, n, size);
}

class CustomCollectiveEvaluator : public ClaimEvaluator {
 public:
  Evaluation evaluate(const ClaimInputs& c, const DataPaths& data) const override {
    expect_params(c, {"hardware", "collective", "group_size", "message_bytes", "custom_latency_us"});
    const Hardware hw = load_hardware_by_name(param_string(c, "hardware", "h200-sxm"), data.hardware_dir);
    const std::string collective = param_string(c, "collective", "all_gather");
    const int n = static_cast<int>(param_count(c, "group_size", 8, limit::gpus));
    if (n > hw.scale_up_domain_gpus) {
      throw InputError(fmt::format("{}: key 'params.group_size': {} GPUs leave the {}-GPU NVLink domain of {}", c.file,
                                   n, hw.scale_up_domain_gpus, hw.name));
    }
    const double factor = nccl_bus_factor(collective, n);
    const std::vector<double> sizes = param_list(c, "message_bytes");
    const double latency = param_double(c, "custom_latency_us", 3.0);
    auto speedups = [&](double lat) {
      std::vector<double> out;
      for (double s : sizes) {
        const double custom = lat + s * factor / hw.nvlink.bandwidth_bytes_per_s * 1e6;
        out.push_back(nccl_time_us(hw, collective, n, s, nullptr) / custom);
      }
      return out;
    };
    Evaluation e;
    const std::vector<double> sp = speedups(latency);
    e.predicted["speedup_min"] = *std::min_element(sp.begin(), sp.end());
    e.predicted["speedup_max"] = *std::max_element(sp.begin(), sp.end());
    std::string how;
    nccl_time_us(hw, collective, n, sizes.front(), &how);
    e.breakdown.push_back(fmt::format("{} over {} GPUs of {} (NVLink {:.0f} GB/s per direction); NCCL by {}",
                                      collective, n, hw.name, hw.nvlink.bandwidth_bytes_per_s / 1e9, how));
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const double t = nccl_time_us(hw, collective, n, sizes[i], nullptr);
      const double floor = nccl_time_us(hw, collective, n, 1.0, nullptr);
      e.breakdown.push_back(
          fmt::format("  {:>12.0f} B: NCCL {:7.1f} us ({:3.0f}% latency), hand-written {:6.1f} us -> {:.2f}x", sizes[i],
                      t, 100 * std::min(1.0, floor / t), t / sp[i], sp[i]));
    }
    e.breakdown.push_back(
        "small messages are NCCL's latency-dominated regime: a fixed cost per call that one fused "
        "kernel avoids; at large sizes both approach the link rate and the gap closes");
    for (double lat : {1.0, 2.0, 5.0, 8.0}) {
      const std::vector<double> s = speedups(lat);
      e.alternatives.push_back({fmt::format("with a hand-written latency of {:.0f} us", lat),
                                {{"speedup_min", *std::min_element(s.begin(), s.end())},
                                 {"speedup_max", *std::max_element(s.begin(), s.end())}}});
    }
    return e;
  }
};

}  // namespace
K3PERF_REGISTER_CLAIM_EVALUATOR(CustomCollectiveEvaluator, "custom_collective");
}  // namespace k3
