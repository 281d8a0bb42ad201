#include "core/hardware.h"

#include "core/comma_list.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "core/op_graph.h"
#include "core/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

namespace k3 {

static_assert(static_cast<int>(CollectiveKind::reduce_scatter) + 1 == kCollectiveKindCount,
              "LinkSpec::base_latency_us has one entry per CollectiveKind");

namespace {

// Defaults for classes a hardware file does not calibrate, all "default, uncalibrated".
// Basis of each (compute = fraction of the dense peak, memory = fraction of peak HBM bandwidth):
//   gemm          DeepGEMM reaches 1550 of 1979 FP8 TFLOP/s on H800 (0.78); cuBLAS bf16 on our
//                 H200 reaches ~890 of 989 (0.90). Skinny decode GEMMs stream weights at about
//                 the device-copy rate (0.83 measured on H200), so 0.85 with a good kernel.
//   grouped_gemm  routed experts see small, uneven per-expert M and in-GEMM dequantisation, so
//                 tensor cores idle on tile padding; well below dense GEMM.
//   attention     FlashMLA README, H800 SXM5: 660 of 989 TFLOP/s compute-bound (0.67) and
//                 3000 of 3350 GB/s memory-bound decode (0.90).
//   recurrent     KDA chunked scan / recurrent step: small per-head matmuls with a sequential
//                 dependency across chunks; no published roofline figure, so set low.
//   elementwise   bandwidth-bound; a plain device copy reaches 0.83 on H200, fused norms and
//                 gates a little less. Compute rarely binds.
//   gather        embedding rows are scattered reads of a few KB each; poor DRAM efficiency.
struct DefaultRow {
  EfficiencyClass cls;
  Efficiency eff;
};
constexpr DefaultRow kDefaultEfficiency[] = {
    {EfficiencyClass::gemm, {0.80, 0.85}},         {EfficiencyClass::grouped_gemm, {0.60, 0.80}},
    {EfficiencyClass::attention, {0.67, 0.90}},    {EfficiencyClass::recurrent, {0.30, 0.70}},
    {EfficiencyClass::elementwise, {0.50, 0.80}},  {EfficiencyClass::gather, {0.50, 0.50}},
    {EfficiencyClass::chunked_scan, {0.30, 0.70}},  // recurrent's: the class was split from it
};

const Efficiency& default_efficiency_ref(EfficiencyClass c) {
  for (const auto& row : kDefaultEfficiency) {
    if (row.cls == c) return row.eff;
  }
  K3_CHECK(false, "no default efficiency for class {}", static_cast<int>(c));
  return kDefaultEfficiency[0].eff;  // unreachable
}

bool is_kebab_case(const std::string& id) {
  if (id.empty() || id.front() == '-' || id.back() == '-') return false;
  return std::all_of(id.begin(), id.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

class HardwareParser {
 public:
  explicit HardwareParser(const YamlNode& root) : root_(root) {}

  Hardware parse() {
    root_.expect_keys({"name", "sources", "calibrated_on", "gpu", "interconnect", "overheads", "efficiency",
                       "collectives", "kernel_latency_us", "serial_step_us", "ridge"});
    Hardware hw;
    hw.source_file = root_.file();
    hw.name = root_["name"].as_string();
    if (hw.name.empty()) root_["name"].fail("expected a non-empty name");
    parse_sources(root_["sources"], &hw);
    if (auto c = root_.find("calibrated_on")) {
      c->expect_keys({"engine_sources", "commit"});
      hw.calibrated_engine_sources = (*c)["engine_sources"].as_string();
      if (hw.calibrated_engine_sources.size() != 16 ||
          hw.calibrated_engine_sources.find_first_not_of("0123456789abcdef") != std::string::npos) {
        (*c)["engine_sources"].fail("expected 16 lowercase hex digits (scripts/engine-sources-hash.sh)");
      }
      if (auto commit = c->find("commit")) hw.calibrated_commit = commit->as_string();
    }
    parse_gpu(root_["gpu"], &hw);
    parse_interconnect(root_["interconnect"], &hw);
    parse_overheads(root_["overheads"], &hw);
    parse_efficiency(root_.find("efficiency"), &hw);
    if (auto c = root_.find("collectives")) parse_collectives(*c, &hw);
    if (auto l = root_.find("kernel_latency_us")) {
      hw.kernel_latency_source = parse_per_kind(*l, "microseconds per kernel", &hw.kernel_latency_us, hw);
    }
    if (auto l = root_.find("serial_step_us")) {
      hw.serial_step_source = parse_per_kind(*l, "microseconds per serial step", &hw.serial_step_us, hw);
    }
    if (auto r = root_.find("ridge")) {
      r->expect_keys({"smooth_max_exponent"});
      const YamlNode p = (*r)["smooth_max_exponent"];
      hw.ridge_smooth_max_exponent = sourced(p, Check::positive, hw);
      if (hw.ridge_smooth_max_exponent <= 1)
        p["value"].fail("expected an exponent above 1 (1 would add the two times)");
    }
    return hw;
  }

 private:
  enum class Check { positive, non_negative, fraction };

  void parse_sources(const YamlNode& node, Hardware* hw) {
    if (!node.is_map() || node.keys().empty()) {
      node.fail("expected a mapping of source id -> citation (title, URL, the figure it gives)");
    }
    for (const auto& [id, citation] : node.entries()) {
      if (!is_kebab_case(id)) citation.fail("source ids are kebab-case: a-z, 0-9 and '-'");
      const std::string text = citation.as_string();
      if (text.empty()) citation.fail("expected a citation: title, URL and the figure it gives");
      hw->sources[id] = text;
    }
  }

  // The source id named at `node`, which must be listed under `sources`.
  std::string source_id(const YamlNode& node, const Hardware& hw) {
    const std::string id = node.as_string();
    if (hw.sources.count(id) == 0) {
      std::vector<std::string> known;
      for (const auto& [k, v] : hw.sources) known.push_back(k);
      node.fail(fmt::format("source '{}' is not listed under 'sources' (listed: {})", id, comma_list(known)));
    }
    return id;
  }

  // A number in the form {value: <number>, source: <id>}.
  double sourced(const YamlNode& node, Check check, const Hardware& hw) {
    if (!node.is_map()) {
      node.fail("expected {value: <number>, source: <id>}; every number needs a source");
    }
    node.expect_keys({"value", "source"});
    source_id(node["source"], hw);
    const YamlNode value = node["value"];
    switch (check) {
      case Check::positive: return value.as_positive();
      case Check::non_negative: return value.as_non_negative();
      case Check::fraction: return value.as_fraction();
    }
    return 0.0;
  }

  int sourced_positive_int(const YamlNode& node, const Hardware& hw) {
    if (!node.is_map()) {
      node.fail("expected {value: <integer>, source: <id>}; every number needs a source");
    }
    node.expect_keys({"value", "source"});
    source_id(node["source"], hw);
    const YamlNode value = node["value"];
    const long long n = value.as_positive_int();
    if (n > std::numeric_limits<int>::max()) value.fail("integer too large");
    return static_cast<int>(n);
  }

  void parse_gpu(const YamlNode& gpu, Hardware* hw) {
    gpu.expect_keys(
        {"sm_count", "peak_flops_per_s", "hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s", "l2_cache_bytes"});
    hw->sm_count = sourced_positive_int(gpu["sm_count"], *hw);
    hw->hbm_capacity_bytes = sourced(gpu["hbm_capacity_bytes"], Check::positive, *hw);
    hw->hbm_bandwidth_bytes_per_s = sourced(gpu["hbm_bandwidth_bytes_per_s"], Check::positive, *hw);
    hw->l2_cache_bytes = sourced(gpu["l2_cache_bytes"], Check::positive, *hw);

    const YamlNode peaks = gpu["peak_flops_per_s"];
    const std::vector<std::string> allowed = {"fp32", "tf32", "bf16", "fp8", "fp4"};
    if (!peaks.is_map()) {
      peaks.fail(fmt::format("expected a mapping with keys {{{}}}", comma_list(allowed)));
    }
    for (const auto& [key, peak] : peaks.entries()) {
      ComputeType type;
      if (!parse_compute_type(key, &type)) {
        peak.fail(fmt::format("unknown compute type '{}'; expected one of {{{}}}", key, comma_list(allowed)));
      }
      hw->peak_flops_per_s[type] = sourced(peak, Check::positive, *hw);
    }
    // bf16 is the rate of the tensor-core ops; fp32 (CUDA cores) times norms, mixers, gates and
    // the KDA recurrent step. A file without either is incomplete.
    for (const char* required : {"bf16", "fp32"}) {
      ComputeType type;
      parse_compute_type(required, &type);
      if (hw->peak_flops_per_s.count(type) == 0) {
        peaks.fail(fmt::format("missing required key '{}' (the dense {} peak is required)", required, required));
      }
    }
  }

  // latency_us is one {value, source} for every collective (the form before per-step terms) or one per
  // collective; the optional step terms default to none, so an older file times as it did.
  LinkSpec parse_link(const YamlNode& node, const Hardware& hw) {
    node.expect_keys({"bandwidth_bytes_per_s", "latency_us", "step_latency_us", "tree_level_latency_us",
                      "nvls_latency_us", "efficiency"});
    LinkSpec link;
    link.bandwidth_bytes_per_s = sourced(node["bandwidth_bytes_per_s"], Check::positive, hw);
    const YamlNode latency = node["latency_us"];
    if (latency.is_map() && !latency.has("value")) {
      std::vector<std::string> kinds;
      for (int k = 0; k < kCollectiveKindCount; ++k) kinds.push_back(to_string(static_cast<CollectiveKind>(k)));
      latency.expect_keys(kinds);
      for (int k = 0; k < kCollectiveKindCount; ++k) {
        if (!latency.has(kinds[k])) {
          latency.fail(fmt::format("missing '{}': give every collective ({}) or one {{value, source}} for all",
                                   kinds[k], comma_list(kinds)));
        }
        link.base_latency_us[k] = sourced(latency[kinds[k]], Check::non_negative, hw);
      }
    } else {
      const double all = sourced(latency, Check::non_negative, hw);
      for (double& b : link.base_latency_us) b = all;
    }
    if (auto step = node.find("step_latency_us")) link.step_latency_us = sourced(*step, Check::non_negative, hw);
    if (auto tree = node.find("tree_level_latency_us"))
      link.tree_level_latency_us = sourced(*tree, Check::positive, hw);
    if (auto nvls = node.find("nvls_latency_us")) link.nvls_latency_us = sourced(*nvls, Check::positive, hw);
    link.efficiency = sourced(node["efficiency"], Check::fraction, hw);
    return link;
  }

  void parse_interconnect(const YamlNode& node, Hardware* hw) {
    node.expect_keys({"scale_up_domain_gpus", "nvlink", "network"});
    hw->scale_up_domain_gpus = sourced_positive_int(node["scale_up_domain_gpus"], *hw);
    hw->nvlink = parse_link(node["nvlink"], *hw);
    hw->network = parse_link(node["network"], *hw);
  }

  void parse_overheads(const YamlNode& node, Hardware* hw) {
    node.expect_keys({"kernel_launch_overhead_us", "graph_kernel_overhead_us"});
    hw->kernel_launch_overhead_us = sourced(node["kernel_launch_overhead_us"], Check::non_negative, *hw);
    hw->graph_kernel_overhead_us = sourced(node["graph_kernel_overhead_us"], Check::non_negative, *hw);
  }

  void parse_efficiency(const std::optional<YamlNode>& block, Hardware* hw) {
    std::vector<std::string> calibrated;
    std::string block_source;
    if (block) {
      std::vector<std::string> classes;
      for (EfficiencyClass c : kAllEfficiencyClasses) classes.push_back(to_string(c));
      if (!block->is_map()) block->fail("expected a mapping: source, then one entry per class");
      for (const auto& key : block->keys()) {
        EfficiencyClass unused;
        if (key != "source" && !parse_efficiency_class(key, &unused)) {
          (*block)[key].fail(
              fmt::format("unknown efficiency class '{}'; expected one of {{{}}}", key, comma_list(classes)));
        }
      }
      block_source = source_id((*block)["source"], *hw);
      for (const auto& key : block->keys()) {
        if (key == "source") continue;
        EfficiencyClass cls = EfficiencyClass::gemm;
        parse_efficiency_class(key, &cls);  // checked above
        const YamlNode entry = (*block)[key];
        entry.expect_keys({"compute", "memory"});
        hw->efficiency[cls] = {entry["compute"].as_fraction(), entry["memory"].as_fraction()};
        calibrated.push_back(key);
      }
    }
    std::vector<std::string> defaulted;
    for (EfficiencyClass c : kAllEfficiencyClasses) {
      if (hw->efficiency.count(c) == 0) {
        hw->efficiency[c] = default_efficiency_ref(c);
        defaulted.push_back(to_string(c));
      }
    }
    if (calibrated.empty()) {
      hw->efficiency_source = "default, uncalibrated";
    } else if (defaulted.empty()) {
      hw->efficiency_source = fmt::format("all classes from source '{}'", block_source);
    } else {
      hw->efficiency_source = fmt::format("{} from source '{}'; default, uncalibrated: {}", comma_list(calibrated),
                                          block_source, comma_list(defaulted));
    }
  }

  // kernel_latency_us, serial_step_us: {source: <id>, <op kind>: <us, >= 0>, ...}; returns the source id.
  std::string parse_per_kind(const YamlNode& block, const char* what, std::map<OpKind, double>* out,
                             const Hardware& hw) {
    std::vector<std::string> kinds;
    for (int k = 0; k < static_cast<int>(OpKind::collective); ++k) kinds.push_back(to_string(static_cast<OpKind>(k)));
    if (!block.is_map() || !block.has("source")) {
      block.fail(fmt::format("expected a mapping: source, then {} by op kind", what));
    }
    std::string source = source_id(block["source"], hw);
    for (const auto& [key, us] : block.entries()) {
      if (key == "source") continue;
      const auto it = std::find(kinds.begin(), kinds.end(), key);
      if (it == kinds.end()) {
        us.fail(fmt::format("unknown op kind '{}'; expected one of {{{}}}{}", key, comma_list(kinds),
                            key == "collective" ? " (collectives are timed by the link model)" : ""));
      }
      (*out)[static_cast<OpKind>(it - kinds.begin())] = us.as_non_negative();
    }
    return source;
  }

  // collectives: {source: <id>, curves: [{collective, link, group_size, latency_us,
  //               busbw_knots: [[size_bytes, busbw_bytes_per_s], ...],
  //               measured_us: [[size_bytes, time_us], ...]  (optional: the samples fitted)}, ...]}
  void parse_collectives(const YamlNode& node, Hardware* hw) {
    node.expect_keys({"source", "curves"});
    const std::string source = source_id(node["source"], *hw);
    for (const YamlNode& c : node["curves"].items()) {
      c.expect_keys({"collective", "link", "group_size", "latency_us", "busbw_knots", "measured_us"});
      MeasuredCollective m;
      m.source = source;
      m.collective = c["collective"].as_choice({"all_reduce", "all_gather", "reduce_scatter", "all_to_all"});
      m.link = c["link"].as_choice({"nvlink", "network"});
      const long long n = c["group_size"].as_positive_int();
      if (n < 2 || n > 1 << 20) c["group_size"].fail("expected a group of at least 2 GPUs");
      m.group_size = static_cast<int>(n);
      m.latency_us = c["latency_us"].as_non_negative();
      for (const YamlNode& knot : c["busbw_knots"].items()) {
        const std::vector<YamlNode> pair = knot.items();
        if (pair.size() != 2) knot.fail("expected [size_bytes, busbw_bytes_per_s]");
        const double size = pair[0].as_positive();
        if (!m.knot_sizes_bytes.empty() && size <= m.knot_sizes_bytes.back()) {
          pair[0].fail("knot sizes must increase");
        }
        m.knot_sizes_bytes.push_back(size);
        m.knot_busbw_bytes_per_s.push_back(pair[1].as_positive());
      }
      if (auto measured = c.find("measured_us")) {
        for (const YamlNode& point : measured->items()) {
          const std::vector<YamlNode> pair = point.items();
          if (pair.size() != 2) point.fail("expected [size_bytes, time_us]");
          m.measured_sizes_bytes.push_back(pair[0].as_positive());
          m.measured_times_us.push_back(pair[1].as_positive());
        }
      }
      if (m.knot_sizes_bytes.empty())
        c["busbw_knots"].fail("expected at least one [size_bytes, busbw_bytes_per_s] knot");
      if (hw->measured_collective(m.collective, m.link, m.group_size)) {
        c.fail(fmt::format("a second curve for {} over {} on {} GPUs", m.collective, m.link, m.group_size));
      }
      hw->measured_collectives.push_back(std::move(m));
    }
  }

  const YamlNode& root_;
};

}  // namespace

std::string to_string(EfficiencyClass c) {
  switch (c) {
    case EfficiencyClass::gemm: return "gemm";
    case EfficiencyClass::grouped_gemm: return "grouped_gemm";
    case EfficiencyClass::attention: return "attention";
    case EfficiencyClass::recurrent: return "recurrent";
    case EfficiencyClass::elementwise: return "elementwise";
    case EfficiencyClass::gather: return "gather";
    case EfficiencyClass::chunked_scan: return "chunked_scan";
  }
  return "?";
}

bool parse_efficiency_class(const std::string& name, EfficiencyClass* out) {
  for (EfficiencyClass c : kAllEfficiencyClasses) {
    if (to_string(c) == name) {
      *out = c;
      return true;
    }
  }
  return false;
}

Efficiency default_efficiency(EfficiencyClass c) { return default_efficiency_ref(c); }

double nccl_bus_factor(const std::string& collective, int n) {
  if (n <= 1) return 0.0;
  if (collective == "all_reduce") return 2.0 * (n - 1) / n;
  if (collective == "all_gather" || collective == "reduce_scatter" || collective == "all_to_all")
    return double(n - 1) / n;
  throw InputError(fmt::format("unknown collective '{}'; expected all_reduce, all_gather, reduce_scatter or all_to_all",
                               collective));
}

double MeasuredCollective::bus_factor() const { return nccl_bus_factor(collective, group_size); }

double MeasuredCollective::busbw_at(double size) const {
  const std::vector<double>& x = knot_sizes_bytes;
  const std::vector<double>& y = knot_busbw_bytes_per_s;
  K3_CHECK(!x.empty() && x.size() == y.size(), "measured {} curve has {} sizes and {} bandwidths", collective, x.size(),
           y.size());
  if (size <= x.front()) return y.front();
  if (size >= x.back()) return y.back();
  const std::size_t hi = static_cast<std::size_t>(std::upper_bound(x.begin(), x.end(), size) - x.begin());
  const double f = std::log(size / x[hi - 1]) / std::log(x[hi] / x[hi - 1]);
  return y[hi - 1] + f * (y[hi] - y[hi - 1]);
}

double MeasuredCollective::time_us(double size) const {
  if (size <= 0) return latency_us;
  return latency_us + size * bus_factor() / busbw_at(size) * 1e6;
}

const MeasuredCollective* Hardware::measured_collective(const std::string& collective, const std::string& link,
                                                        int group_size) const {
  for (const MeasuredCollective& m : measured_collectives) {
    if (m.collective == collective && m.link == link && m.group_size == group_size) return &m;
  }
  return nullptr;
}

double Hardware::peak(ComputeType c) const {
  const auto it = peak_flops_per_s.find(c);
  if (it != peak_flops_per_s.end()) return it->second;
  std::vector<std::string> supported;
  for (const auto& [type, rate] : peak_flops_per_s) supported.push_back(to_string(type));
  throw Error(fmt::format("hardware '{}' ({}) has no {} peak rate; it supports {{{}}}", name,
                          source_file.empty() ? "not loaded from a file" : source_file, to_string(c),
                          comma_list(supported)));
}

const Efficiency& Hardware::efficiency_of(EfficiencyClass c) const {
  const auto it = efficiency.find(c);
  return it != efficiency.end() ? it->second : default_efficiency_ref(c);
}

double LinkSpec::base_latency_of(CollectiveKind k) const {
  const int i = static_cast<int>(k);
  K3_CHECK(i >= 0 && i < kCollectiveKindCount, "collective kind {} out of range", i);
  return base_latency_us[i];
}

void LinkSpec::set_flat_latency_us(double us) {
  for (double& b : base_latency_us) b = us;
  step_latency_us = 0;
  tree_level_latency_us.reset();
  nvls_latency_us.reset();
}

double Hardware::kernel_latency_of(OpKind k) const {
  const auto it = kernel_latency_us.find(k);
  return it != kernel_latency_us.end() ? it->second : 0.0;
}

double Hardware::serial_step_of(OpKind k) const {
  const auto it = serial_step_us.find(k);
  return it != serial_step_us.end() ? it->second : 0.0;
}

Hardware load_hardware(const std::string& path) {
  const YamlNode root = YamlNode::load_file(path);
  return HardwareParser(root).parse();
}

Hardware parse_hardware(const std::string& yaml_text, const std::string& origin) {
  const YamlNode root = YamlNode::load_string(yaml_text, origin);
  return HardwareParser(root).parse();
}

std::vector<std::string> list_hardware_names(const std::string& hardware_dir) {
  return list_names(hardware_dir, ".yaml");
}

Hardware load_hardware_by_name(const std::string& name_or_path, const std::string& hardware_dir) {
  return load_hardware(DataPaths::find_hardware_file(name_or_path, hardware_dir));
}

}  // namespace k3
