// One GPU type and the fabric around it, loaded from scenarios/hardware/*.yaml.
// Every published or measured number in the file carries a source id (see docs/hardware.md);
// the loader refuses a number without one. Rates are dense (no structured sparsity).
#pragma once

#include "core/dtype.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace k3 {

enum class OpKind;          // core/op_graph.h
enum class CollectiveKind;  // core/op_graph.h
inline constexpr int kCollectiveKindCount = 5;

// Classes of operation that share an achievable fraction of the peak. Every Op maps to one.
enum class EfficiencyClass {
  gemm,          // dense matrix products (projections, dense/shared MLP, router, lm_head)
  grouped_gemm,  // routed-expert grouped GEMM (MoE), incl. in-GEMM dequantisation
  attention,     // MLA attention (prefill and absorbed decode)
  recurrent,     // KDA recurrent step (decode, verify)
  elementwise,   // norms, conv, gates, AttnRes mixers, activations
  gather,        // embedding lookup
  chunked_scan,  // KDA chunked scan (prefill): tensor-core chunk products and a state pass over the chunks
};
inline constexpr EfficiencyClass kAllEfficiencyClasses[] = {
    EfficiencyClass::gemm,         EfficiencyClass::grouped_gemm, EfficiencyClass::attention,
    EfficiencyClass::recurrent,    EfficiencyClass::elementwise,  EfficiencyClass::gather,
    EfficiencyClass::chunked_scan,
};
std::string to_string(EfficiencyClass c);
bool parse_efficiency_class(const std::string& name, EfficiencyClass* out);

// Achievable fraction of peak compute and of peak HBM bandwidth for one class.
struct Efficiency {
  double compute = 1.0;  // fraction of peak FLOP/s, in (0, 1]
  double memory = 1.0;   // fraction of peak HBM bytes/s, in (0, 1]
};
// The documented default for a class ("default, uncalibrated"; basis in hardware.cpp).
Efficiency default_efficiency(EfficiencyClass c);

// One fabric's collective terms (sim/collective_time.h, docs/comm.md): a call costs its collective's base latency,
// plus per-step latencies that grow with the group (ring steps, all-to-all peers, tree levels) or NVLS's fixed
// latency, plus its bytes at the bus bandwidth.
struct LinkSpec {
  double bandwidth_bytes_per_s = 0;                   // per GPU, one direction
  double efficiency = 1.0;                            // achievable fraction of bandwidth for collectives (bus bw)
  double base_latency_us[kCollectiveKindCount] = {};  // by CollectiveKind: per call, whatever the group size
  double step_latency_us = 0;                         // per ring step or all-to-all peer over this link
  std::optional<double> tree_level_latency_us;        // per tree level over this link; absent = no tree
  std::optional<double> nvls_latency_us;              // NVLS (NVSwitch multicast) over the base; absent = no NVLS

  double base_latency_of(CollectiveKind k) const;
  void set_flat_latency_us(double us);  // every collective `us` per call, whatever the group (no step terms)
};

// A collective measured on this hardware (nccl-tests style), fitted by `k3perf comm fit` (docs/comm.md):
//   time(S) = latency_us + S · bus_factor / busbw(S)
// busbw(S) is interpolated linearly in log S between knots and held constant outside them. Collectives
// of this kind, link and group size are timed with it instead of the link's alpha-beta numbers.
struct MeasuredCollective {
  std::string collective;  // all_reduce, all_gather, reduce_scatter, all_to_all
  std::string link;        // nvlink or network
  int group_size = 2;      // GPUs it was measured on
  double latency_us = 0;
  std::vector<double> knot_sizes_bytes;        // increasing
  std::vector<double> knot_busbw_bytes_per_s;  // one per knot, positive
  std::string source;                          // a source id of the file
  std::vector<double> measured_sizes_bytes;    // the samples it was fitted to (provenance), may be empty
  std::vector<double> measured_times_us;
  double bus_factor() const;  // nccl-tests: all_reduce 2(n-1)/n, others (n-1)/n
  double busbw_at(double size_bytes) const;
  double time_us(double size_bytes) const;  // one call of `size_bytes` (nccl-tests "size")
};
// nccl-tests bus-bandwidth factor of a collective by name over n GPUs; throws InputError for an unknown name.
double nccl_bus_factor(const std::string& collective, int n);

struct Hardware {
  std::string name;                            // e.g. "H200 SXM"
  std::string source_file;                     // where it was loaded from
  std::map<std::string, std::string> sources;  // source id -> citation, as in the file
  // A calibrated file's engine (optional `calibrated_on` block, written by `k3perf calibrate`): the content hash of
  // the engine sources that ran the traces it was fitted on, and their commit (core/engine_sources.h).
  std::string calibrated_engine_sources, calibrated_commit;

  // Compute and memory of one GPU.
  int sm_count = 0;
  std::map<ComputeType, double> peak_flops_per_s;  // dense; absent = not supported by the chip
  double hbm_capacity_bytes = 0;
  double hbm_bandwidth_bytes_per_s = 0;
  double l2_cache_bytes = 0;

  // Fabric. GPUs inside one scale-up domain talk over NVLink, others over the network.
  int scale_up_domain_gpus = 1;
  LinkSpec nvlink;
  LinkSpec network;

  // Fixed costs.
  double kernel_launch_overhead_us = 0;  // per kernel, eager launches
  double graph_kernel_overhead_us = 0;   // per kernel, replayed from a CUDA graph

  std::vector<MeasuredCollective> measured_collectives;  // optional `collectives` block
  // The measured curve for a collective, link ("nvlink"/"network") and group size; nullptr if none.
  const MeasuredCollective* measured_collective(const std::string& collective, const std::string& link,
                                                int group_size) const;

  std::map<EfficiencyClass, Efficiency> efficiency;  // every class present after loading
  std::string efficiency_source;                     // "default, uncalibrated" or a calibration

  // Fixed GPU time per kernel of an op kind, added to its roofline time (optional `kernel_latency_us`
  // block, fitted by `k3perf calibrate`): what a small kernel costs beyond its bytes and FLOPs (ramp-up,
  // serial reductions, one block per token). Kinds left out add nothing.
  std::map<OpKind, double> kernel_latency_us;
  std::string kernel_latency_source;         // the block's source id; empty without the block
  double kernel_latency_of(OpKind k) const;  // 0 when absent

  // GPU time of one step of an op's serial chain (optional `serial_step_us` block): an op whose kernels walk
  // Op::serial_steps dependent steps (the KDA state pass, chunk after chunk) takes at least steps · this, however
  // few bytes and FLOPs it has (sim/roofline.h). Kinds left out have no chain term.
  std::map<OpKind, double> serial_step_us;
  std::string serial_step_source;         // the block's source id; empty without the block
  double serial_step_of(OpKind k) const;  // 0 when absent

  // Optional `ridge` block: an op whose compute and memory times are both near its bound runs slower than the
  // larger of the two (the board's power limit lowers the SM clock when both run). The roofline then takes the
  // smooth max (c^p + m^p)^(1/p) of the two times (sim/roofline.h, ridge_max); 0 = the plain max.
  double ridge_smooth_max_exponent = 0;  // p > 1

  bool supports(ComputeType c) const { return peak_flops_per_s.count(c) != 0; }
  double peak(ComputeType c) const;                          // throws k3::Error naming the hardware when unsupported
  const Efficiency& efficiency_of(EfficiencyClass c) const;  // the default when absent
  // Ridge point: FLOP per byte where compute time equals memory time, at peak.
  double ridge_flops_per_byte(ComputeType c) const { return peak(c) / hbm_bandwidth_bytes_per_s; }
};

// Loads and validates a hardware file. Errors name file:line and key.
Hardware load_hardware(const std::string& path);
// The same from text; `origin` names it in errors and becomes source_file.
Hardware parse_hardware(const std::string& yaml_text, const std::string& origin);
// Resolves a name ("h200-sxm") or a path. Names are looked up in `hardware_dir`.
Hardware load_hardware_by_name(const std::string& name_or_path, const std::string& hardware_dir);
// The names load_hardware_by_name accepts from `hardware_dir` (its *.yaml files), sorted.
std::vector<std::string> list_hardware_names(const std::string& hardware_dir);

}  // namespace k3
