// Hardware files: the shipped ones load with the published numbers, and every malformed input
// fails with an InputError that names the file and the key.
#include "core/hardware.h"
#include "core/error.h"
#include "core/op_graph.h"
#include "core/op_names.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#ifndef K3PERF_SOURCE_DIR
#error "tests/CMakeLists.txt defines K3PERF_SOURCE_DIR as the repository root"
#endif

namespace k3 {
namespace {

namespace fs = std::filesystem;

const std::string kHardwareDir = std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware";

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = fs::temp_directory_path() / fmt::format("k3perf-hardware-test-{}-{}", stamp, counter++);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }
  std::string dir() const { return path_.string(); }

 private:
  fs::path path_;
};

// Smallest valid file; the error tests each change one thing in it.
const std::string kValid = R"yaml(name: Test GPU
sources:
  test-sheet: "Test datasheet, https://example.com/sheet (every figure below)"
gpu:
  sm_count: {value: 100, source: test-sheet}
  peak_flops_per_s:
    fp32: {value: 60.0e12, source: test-sheet}
    bf16: {value: 1.0e15, source: test-sheet}
    fp8: {value: 2.0e15, source: test-sheet}
  hbm_capacity_bytes: {value: 100.0e9, source: test-sheet}
  hbm_bandwidth_bytes_per_s: {value: 4.0e12, source: test-sheet}
  l2_cache_bytes: {value: 50.0e6, source: test-sheet}
interconnect:
  scale_up_domain_gpus: {value: 8, source: test-sheet}
  nvlink:
    bandwidth_bytes_per_s: {value: 450.0e9, source: test-sheet}
    latency_us: {value: 10, source: test-sheet}
    efficiency: {value: 0.8, source: test-sheet}
  network:
    bandwidth_bytes_per_s: {value: 50.0e9, source: test-sheet}
    latency_us: {value: 0, source: test-sheet}
    efficiency: {value: 0.9, source: test-sheet}
overheads:
  kernel_launch_overhead_us: {value: 4.0, source: test-sheet}
  graph_kernel_overhead_us: {value: 0.5, source: test-sheet}
)yaml";

// kValid with `from` replaced by `to` (which must occur exactly once).
std::string with(const std::string& from, const std::string& to) {
  std::string text = kValid;
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Loads `text` from a temp file and expects an InputError whose message names the file
// and contains every one of `needles`.
void expect_input_error(const std::string& text, std::initializer_list<std::string> needles) {
  TempDir tmp;
  const std::string path = tmp.write("bad.yaml", text);
  try {
    load_hardware(path);
    ADD_FAILURE() << "expected an InputError for:\n" << text;
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    for (const auto& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in " << message;
    }
  }
}

TEST(Hardware, EveryShippedFileLoads) {
  const std::vector<std::string> names = list_hardware_names(kHardwareDir);
  for (const char* expected : {"b200", "b300", "gb300-nvl72", "h100-sxm", "h200-sxm"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const Hardware hw = load_hardware_by_name(name, kHardwareDir);
    EXPECT_FALSE(hw.name.empty());
    EXPECT_TRUE(hw.supports(ComputeType::bf16));
    EXPECT_GT(hw.sm_count, 0);
    EXPECT_GT(hw.hbm_capacity_bytes, 0);
    EXPECT_GT(hw.hbm_bandwidth_bytes_per_s, 0);
    EXPECT_GT(hw.l2_cache_bytes, 0);
    EXPECT_GT(hw.nvlink.bandwidth_bytes_per_s, hw.network.bandwidth_bytes_per_s);
    EXPECT_FALSE(hw.sources.empty());
    // Every class has an efficiency, whether calibrated or defaulted.
    for (EfficiencyClass c : kAllEfficiencyClasses) {
      const Efficiency& e = hw.efficiency_of(c);
      EXPECT_EQ(hw.efficiency.count(c), 1u) << to_string(c);
      EXPECT_GT(e.compute, 0);
      EXPECT_LE(e.compute, 1);
      EXPECT_GT(e.memory, 0);
      EXPECT_LE(e.memory, 1);
    }
  }
}

TEST(Hardware, H200MatchesDatasheetAndMeasurement) {
  const Hardware hw = load_hardware_by_name("h200-sxm", kHardwareDir);
  EXPECT_EQ(hw.name, "H200 SXM");
  EXPECT_EQ(hw.source_file, kHardwareDir + "/h200-sxm.yaml");
  EXPECT_EQ(hw.sm_count, 132);
  EXPECT_DOUBLE_EQ(hw.hbm_capacity_bytes, 141e9);
  EXPECT_DOUBLE_EQ(hw.hbm_bandwidth_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(hw.peak(ComputeType::bf16), 989.4e12);
  EXPECT_DOUBLE_EQ(hw.peak(ComputeType::fp8), 1978.9e12);
  EXPECT_FALSE(hw.supports(ComputeType::fp4));
  EXPECT_EQ(hw.scale_up_domain_gpus, 8);
  EXPECT_DOUBLE_EQ(hw.nvlink.bandwidth_bytes_per_s, 450e9);
  EXPECT_DOUBLE_EQ(hw.nvlink.base_latency_of(CollectiveKind::all_reduce), 14.2);
  EXPECT_DOUBLE_EQ(hw.network.bandwidth_bytes_per_s, 50e9);
  // Measured ceilings (device copy 3.97 of 4.8 TB/s, cuBLAS 789 of 989.4 TFLOP/s on random operands).
  EXPECT_DOUBLE_EQ(hw.efficiency_of(EfficiencyClass::gemm).compute, 0.80);
  EXPECT_DOUBLE_EQ(hw.efficiency_of(EfficiencyClass::gemm).memory, 0.83);
  EXPECT_NE(hw.efficiency_source.find("gemm from source 'k3perf-h200-measured'"), std::string::npos)
      << hw.efficiency_source;
  EXPECT_NE(hw.efficiency_source.find("default, uncalibrated"), std::string::npos);
  EXPECT_NE(hw.efficiency_source.find("attention"), std::string::npos);
}

TEST(Hardware, BlackwellSpotChecks) {
  const Hardware b200 = load_hardware_by_name("b200", kHardwareDir);
  EXPECT_EQ(b200.sm_count, 148);
  EXPECT_DOUBLE_EQ(b200.peak(ComputeType::bf16), 2.25e15);
  EXPECT_DOUBLE_EQ(b200.peak(ComputeType::fp4), 9e15);
  EXPECT_DOUBLE_EQ(b200.hbm_capacity_bytes, 180e9);
  EXPECT_DOUBLE_EQ(b200.nvlink.bandwidth_bytes_per_s, 900e9);

  const Hardware gb300 = load_hardware_by_name("gb300-nvl72", kHardwareDir);
  EXPECT_EQ(gb300.scale_up_domain_gpus, 72);
  EXPECT_DOUBLE_EQ(gb300.peak(ComputeType::fp4), 15e15);
  EXPECT_DOUBLE_EQ(gb300.hbm_bandwidth_bytes_per_s, 8e12);
  EXPECT_DOUBLE_EQ(gb300.network.bandwidth_bytes_per_s, 100e9);
}

// Every shipped file has per-kernel floors and the ridge exponent: measured on the H200 (engine traces, bench/results/
// 2026-12-01-h200-engine-traces-9 and 2026-12-02-h200-rank; wgmma_rate_bench part 5 in 2026-12-01-h200-kernels-22),
// carried unchanged in microseconds to the other GPUs and marked so in the source text. The calibrated file keeps
// its fitted latencies.
TEST(Hardware, FixedCostsMeasuredOnH200AndCarriedElsewhere) {
  const std::pair<OpKind, double> floors[] = {
      {OpKind::embedding, 2.46},     {OpKind::rmsnorm, 4.58},         {OpKind::attnres_mix, 6.23},
      {OpKind::gemm, 4.85},          {OpKind::elementwise, 4.15},     {OpKind::kda_preprocess, 4.82},
      {OpKind::kda_recurrent, 3.23}, {OpKind::kda_output_norm, 1.32}, {OpKind::mla_attention, 20.41},
      {OpKind::router, 10.45},       {OpKind::moe_experts, 11.74},
  };
  for (const char* name : {"h200-sxm", "h200x2-nccl-measured", "h100-sxm", "b200", "b300", "gb300-nvl72"}) {
    SCOPED_TRACE(name);
    const Hardware hw = load_hardware_by_name(name, kHardwareDir);
    for (const auto& [kind, us] : floors) EXPECT_DOUBLE_EQ(hw.kernel_latency_of(kind), us) << to_string(kind);
    EXPECT_DOUBLE_EQ(hw.kernel_latency_of(OpKind::kda_chunk), 0.0);  // prefill only: no small-op sample
    EXPECT_EQ(hw.kernel_latency_source, "k3perf-h200-kernel-floors");
    EXPECT_DOUBLE_EQ(hw.ridge_smooth_max_exponent, 2.82);
    const std::string& floors_text = hw.sources.at("k3perf-h200-kernel-floors");
    const std::string& ridge_text = hw.sources.at("k3perf-h200-ridge");
    const bool h200 = std::string(name).starts_with("h200");
    for (const std::string* text : {&floors_text, &ridge_text}) {
      EXPECT_EQ(text->starts_with("Measured on H200"), h200) << *text;
      EXPECT_EQ(text->starts_with("Carried from H200"), !h200) << *text;
    }
    EXPECT_NE(floors_text.find("bench/results/2026-12-01-h200-engine-traces-9"), std::string::npos);
    EXPECT_NE(ridge_text.find("bench/results/2026-12-01-h200-kernels-22"), std::string::npos);
    if (!h200) {
      EXPECT_NE(floors_text.find("unchanged in microseconds"), std::string::npos);
    }
  }
  const Hardware validated = load_hardware_by_name("h200-validated", kHardwareDir);
  EXPECT_EQ(validated.kernel_latency_source, "k3perf-h200-engine-calibration");  // its own fit, not the floors
  EXPECT_DOUBLE_EQ(validated.kernel_latency_of(OpKind::router), 13.84404);
  EXPECT_DOUBLE_EQ(validated.ridge_smooth_max_exponent, 2.82);
}

// The collective latency terms (sim/collective_time.h): per-collective bases measured on 2 H200s over NVLink
// (bench/results/2026-11-30-h200x2-nccl/sweep.csv) in the H200 files and carried to the others, per-step terms from
// NCCL's tuning model, NVLS on every NVSwitch fabric, a tree only over the network.
TEST(Hardware, CollectiveLatencyTermsPerFabric) {
  const std::pair<CollectiveKind, double> bases[] = {
      {CollectiveKind::all_reduce, 14.2}, {CollectiveKind::all_gather, 19.4}, {CollectiveKind::reduce_scatter, 20.0},
      {CollectiveKind::all_to_all, 18.0}, {CollectiveKind::send_recv, 18.0},
  };
  for (const std::string& name : list_hardware_names(kHardwareDir)) {
    SCOPED_TRACE(name);
    const Hardware hw = load_hardware_by_name(name, kHardwareDir);
    for (const auto& [kind, us] : bases) {
      EXPECT_DOUBLE_EQ(hw.nvlink.base_latency_of(kind), us) << to_string(kind);
      EXPECT_DOUBLE_EQ(hw.network.base_latency_of(kind), us) << to_string(kind);
    }
    EXPECT_DOUBLE_EQ(hw.nvlink.step_latency_us, 0.6);
    EXPECT_DOUBLE_EQ(hw.network.step_latency_us, 2.7);
    EXPECT_EQ(hw.nvlink.nvls_latency_us, std::optional<double>(18.4));
    EXPECT_FALSE(hw.nvlink.tree_level_latency_us);
    EXPECT_EQ(hw.network.tree_level_latency_us, std::optional<double>(5.0));
    EXPECT_FALSE(hw.network.nvls_latency_us);
    const bool h200 = name.starts_with("h200");
    EXPECT_EQ(hw.sources.count("k3perf-h200x2-nccl-latency"), h200 ? 1u : 0u);
    EXPECT_EQ(hw.sources.count("h200x2-nccl-latency-carried"), h200 ? 0u : 1u);
    if (h200) {
      EXPECT_TRUE(hw.sources.at("k3perf-h200x2-nccl-latency").starts_with("Measured by us"));
    }
    if (!h200) {
      EXPECT_TRUE(hw.sources.at("h200x2-nccl-latency-carried").starts_with("Carried, not measured"));
    }
    EXPECT_TRUE(hw.sources.at("network-base-latency-carried").starts_with("Carried, not measured"));
    EXPECT_NE(hw.sources.at("nccl-tuning-model").find("src/graph/tuning.cc"), std::string::npos);
  }
}

// A link with one latency for every collective (the form before per-step terms) still loads and times as before:
// the same base for all, no steps, no tree, no NVLS.
TEST(Hardware, SingleLatencyLinkLoadsFlat) {
  TempDir tmp;
  const Hardware hw = load_hardware(tmp.write("old.yaml", kValid));
  for (int k = 0; k < kCollectiveKindCount; ++k) {
    EXPECT_DOUBLE_EQ(hw.nvlink.base_latency_of(static_cast<CollectiveKind>(k)), 10.0);
  }
  EXPECT_DOUBLE_EQ(hw.nvlink.step_latency_us, 0.0);
  EXPECT_FALSE(hw.nvlink.nvls_latency_us);
  EXPECT_FALSE(hw.network.tree_level_latency_us);
}

const std::string kPerCollectiveLatency =
    "latency_us:\n      all_reduce: {value: 12, source: test-sheet}\n      all_gather: {value: 13, source: "
    "test-sheet}\n      reduce_scatter: {value: 14, source: test-sheet}\n      all_to_all: {value: 15, source: "
    "test-sheet}\n      send_recv: {value: 16, source: test-sheet}\n    step_latency_us: {value: 0.5, source: "
    "test-sheet}\n    nvls_latency_us: {value: 20, source: test-sheet}";

TEST(Hardware, PerCollectiveLatencyAndStepTerms) {
  TempDir tmp;
  const Hardware hw =
      load_hardware(tmp.write("new.yaml", with("latency_us: {value: 10, source: test-sheet}", kPerCollectiveLatency)));
  EXPECT_DOUBLE_EQ(hw.nvlink.base_latency_of(CollectiveKind::all_reduce), 12);
  EXPECT_DOUBLE_EQ(hw.nvlink.base_latency_of(CollectiveKind::all_gather), 13);
  EXPECT_DOUBLE_EQ(hw.nvlink.base_latency_of(CollectiveKind::reduce_scatter), 14);
  EXPECT_DOUBLE_EQ(hw.nvlink.base_latency_of(CollectiveKind::all_to_all), 15);
  EXPECT_DOUBLE_EQ(hw.nvlink.base_latency_of(CollectiveKind::send_recv), 16);
  EXPECT_DOUBLE_EQ(hw.nvlink.step_latency_us, 0.5);
  EXPECT_EQ(hw.nvlink.nvls_latency_us, std::optional<double>(20));
  Hardware flat = hw;
  flat.nvlink.set_flat_latency_us(5);
  EXPECT_DOUBLE_EQ(flat.nvlink.base_latency_of(CollectiveKind::all_gather), 5);
  EXPECT_DOUBLE_EQ(flat.nvlink.step_latency_us, 0);
  EXPECT_FALSE(flat.nvlink.nvls_latency_us);
}

TEST(HardwareErrors, CollectiveLatencyTermsNameFileKeyAndValue) {
  const std::string per = with("latency_us: {value: 10, source: test-sheet}", kPerCollectiveLatency);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = per;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  expect_input_error(replaced("      send_recv: {value: 16, source: test-sheet}\n", ""),
                     {"interconnect.nvlink.latency_us", "missing 'send_recv'"});
  expect_input_error(replaced("all_gather:", "allgather:"), {"interconnect.nvlink.latency_us.allgather"});
  expect_input_error(replaced("all_to_all: {value: 15", "all_to_all: {value: -15"),
                     {"interconnect.nvlink.latency_us.all_to_all.value", "-15"});
  expect_input_error(replaced("step_latency_us: {value: 0.5", "step_latency_us: {value: .nan"),
                     {"interconnect.nvlink.step_latency_us.value", "expected a number", ".nan"});
  expect_input_error(replaced("step_latency_us: {value: 0.5", "step_latency_us: {value: -0.5"),
                     {"interconnect.nvlink.step_latency_us.value", "-0.5"});
  expect_input_error(replaced("nvls_latency_us: {value: 20", "nvls_latency_us: {value: 0"),
                     {"interconnect.nvlink.nvls_latency_us.value", "positive", "'0'"});
  expect_input_error(replaced("nvls_latency_us: {value: 20, source: test-sheet}", "nvls_latency_us: 20"),
                     {"interconnect.nvlink.nvls_latency_us", "source"});
  expect_input_error(with("scale_up_domain_gpus: {value: 8", "scale_up_domain_gpus: {value: 0"),
                     {"interconnect.scale_up_domain_gpus.value", "positive integer", "'0'"});
}

TEST(Hardware, RidgePoint) {
  const Hardware hw = load_hardware_by_name("h200-sxm", kHardwareDir);
  EXPECT_DOUBLE_EQ(hw.ridge_flops_per_byte(ComputeType::bf16), 989.4e12 / 4.8e12);
  EXPECT_NEAR(hw.ridge_flops_per_byte(ComputeType::bf16), 206.125, 1e-9);
  EXPECT_DOUBLE_EQ(hw.ridge_flops_per_byte(ComputeType::fp8), 1978.9e12 / 4.8e12);
}

TEST(Hardware, UnsupportedComputeTypeThrowsNamingHardware) {
  const Hardware hw = load_hardware_by_name("h100-sxm", kHardwareDir);
  try {
    hw.peak(ComputeType::fp4);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("H100 SXM"), std::string::npos) << message;
    EXPECT_NE(message.find("fp4"), std::string::npos) << message;
  }
}

TEST(Hardware, AbsentEfficiencyBlockGivesDocumentedDefaults) {
  TempDir tmp;
  const Hardware hw = load_hardware(tmp.write("ok.yaml", kValid));
  EXPECT_EQ(hw.efficiency_source, "default, uncalibrated");
  for (EfficiencyClass c : kAllEfficiencyClasses) {
    EXPECT_DOUBLE_EQ(hw.efficiency_of(c).compute, default_efficiency(c).compute);
    EXPECT_DOUBLE_EQ(hw.efficiency_of(c).memory, default_efficiency(c).memory);
  }
  EXPECT_DOUBLE_EQ(default_efficiency(EfficiencyClass::attention).compute, 0.67);
  EXPECT_DOUBLE_EQ(default_efficiency(EfficiencyClass::attention).memory, 0.90);
  EXPECT_DOUBLE_EQ(hw.network.base_latency_of(CollectiveKind::all_reduce), 0);  // zero latency is allowed
}

TEST(Hardware, PartialEfficiencyBlockNamesDefaultedClasses) {
  TempDir tmp;
  const Hardware hw = load_hardware(
      tmp.write("ok.yaml", kValid + "efficiency:\n  source: test-sheet\n  gemm: {compute: 0.9, memory: 0.8}\n"
                                    "  attention: {compute: 0.7, memory: 0.85}\n"));
  EXPECT_DOUBLE_EQ(hw.efficiency_of(EfficiencyClass::attention).memory, 0.85);
  EXPECT_EQ(hw.efficiency_source,
            "gemm, attention from source 'test-sheet'; default, uncalibrated: grouped_gemm, "
            "recurrent, elementwise, gather, chunked_scan");
}

TEST(Hardware, EfficiencyClassNamesRoundTrip) {
  for (EfficiencyClass c : kAllEfficiencyClasses) {
    EfficiencyClass parsed = EfficiencyClass::gather;
    ASSERT_TRUE(parse_efficiency_class(to_string(c), &parsed));
    EXPECT_EQ(parsed, c);
  }
  EfficiencyClass unused;
  EXPECT_FALSE(parse_efficiency_class("softmax", &unused));
}

TEST(HardwareErrors, MissingSource) {
  expect_input_error(with("sm_count: {value: 100, source: test-sheet}", "sm_count: {value: 100}"),
                     {"gpu.sm_count.source"});
}

TEST(HardwareErrors, BareNumberWithoutSource) {
  expect_input_error(with("sm_count: {value: 100, source: test-sheet}", "sm_count: 100"), {"gpu.sm_count", "source"});
}

TEST(HardwareErrors, SourceNotListed) {
  expect_input_error(with("bf16: {value: 1.0e15, source: test-sheet}", "bf16: {value: 1.0e15, source: nvidia-sheet}"),
                     {"gpu.peak_flops_per_s.bf16.source", "nvidia-sheet", "test-sheet"});
}

TEST(HardwareErrors, NegativeBandwidth) {
  expect_input_error(with("hbm_bandwidth_bytes_per_s: {value: 4.0e12", "hbm_bandwidth_bytes_per_s: {value: -4.0e12"),
                     {"gpu.hbm_bandwidth_bytes_per_s.value", "positive"});
}

TEST(HardwareErrors, ZeroCapacity) {
  expect_input_error(with("hbm_capacity_bytes: {value: 100.0e9", "hbm_capacity_bytes: {value: 0"),
                     {"gpu.hbm_capacity_bytes.value", "positive"});
}

TEST(HardwareErrors, UnknownComputeType) {
  expect_input_error(with("fp8: {value: 2.0e15", "fp6: {value: 2.0e15"),
                     {"gpu.peak_flops_per_s.fp6", "unknown compute type", "fp4"});
}

TEST(HardwareErrors, MissingBf16Peak) {
  expect_input_error(with("bf16: {value: 1.0e15", "fp4: {value: 1.0e15"), {"gpu.peak_flops_per_s", "bf16"});
}

TEST(HardwareErrors, MissingFp32Peak) {
  expect_input_error(with("fp32: {value: 60.0e12", "fp4: {value: 60.0e12"), {"gpu.peak_flops_per_s", "fp32"});
}

TEST(HardwareErrors, EfficiencyOutOfRange) {
  expect_input_error(with("efficiency: {value: 0.8", "efficiency: {value: 1.5"),
                     {"interconnect.nvlink.efficiency.value", "(0, 1]"});
}

TEST(HardwareErrors, NegativeLatency) {
  expect_input_error(with("latency_us: {value: 10", "latency_us: {value: -1"),
                     {"interconnect.nvlink.latency_us.value"});
}

TEST(HardwareErrors, NonIntegerSmCount) {
  expect_input_error(with("sm_count: {value: 100,", "sm_count: {value: 100.5,"), {"gpu.sm_count.value", "integer"});
}

TEST(HardwareErrors, MisspelledKey) {
  expect_input_error(with("l2_cache_bytes:", "l2_cache_byte:"), {"gpu.l2_cache_byte", "unknown key"});
}

TEST(HardwareErrors, UnknownEfficiencyClass) {
  expect_input_error(kValid + "efficiency:\n  source: test-sheet\n  softmax: {compute: 0.5, memory: 0.5}\n",
                     {"efficiency.softmax", "unknown efficiency class", "grouped_gemm"});
}

TEST(HardwareErrors, EfficiencyBlockNeedsListedSource) {
  expect_input_error(kValid + "efficiency:\n  source: elsewhere\n  gemm: {compute: 0.9, memory: 0.8}\n",
                     {"efficiency.source", "elsewhere"});
}

TEST(HardwareErrors, CalibratedOnNamesItsKeys) {
  const std::string name = "name: Test GPU\n";
  expect_input_error(with(name, name + "calibrated_on: {engine_sources: 12ab}\n"),
                     {"calibrated_on.engine_sources", "16 lowercase hex"});
  expect_input_error(with(name, name + "calibrated_on: {engine_sources: 0123456789abcdef, gpu: x}\n"),
                     {"calibrated_on"});
}

TEST(HardwareErrors, RidgeExponentAboveOne) {
  expect_input_error(kValid + "ridge:\n  smooth_max_exponent: {value: 1, source: test-sheet}\n",
                     {"ridge.smooth_max_exponent.value", "above 1"});
  expect_input_error(kValid + "ridge:\n  smooth_max_exponent: 2.8\n", {"ridge.smooth_max_exponent", "source"});
  expect_input_error(kValid + "ridge:\n  exponent: {value: 2.8, source: test-sheet}\n", {"ridge.exponent"});
}

TEST(HardwareErrors, MalformedYaml) {
  expect_input_error(with("  nvlink:\n", "  nvlink: [unclosed\n"), {"YAML syntax error"});
}

TEST(HardwareErrors, MissingFile) {
  TempDir tmp;
  EXPECT_THROW(load_hardware(tmp.dir() + "/absent.yaml"), InputError);
}

TEST(HardwareErrors, UnknownHardwareNameListsAvailable) {
  try {
    load_hardware_by_name("h300", kHardwareDir);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("h300"), std::string::npos) << message;
    EXPECT_NE(message.find("h200-sxm"), std::string::npos) << message;
    EXPECT_NE(message.find("gb300-nvl72"), std::string::npos) << message;
  }
}

TEST(Hardware, PathsBypassTheNameLookup) {
  TempDir tmp;
  const std::string path = tmp.write("custom.yaml", kValid);
  EXPECT_EQ(load_hardware_by_name(path, kHardwareDir).name, "Test GPU");
  EXPECT_EQ(list_hardware_names(tmp.dir()), std::vector<std::string>{"custom"});
  EXPECT_EQ(load_hardware_by_name("custom", tmp.dir()).source_file, path);
}

}  // namespace
}  // namespace k3

namespace k3 {
namespace {

// 40,000 sources: each is looked up once, in file order (yaml-cpp finds a key by walking the mapping, so node[id]
// per id took 65 s here). The bound is loose; every source is checked to be kept.
TEST(Hardware, ManySourcesLoadInLinearTime) {
  std::ifstream in(std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/h200-sxm.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t at = text.find("\nsources:\n");
  ASSERT_NE(at, std::string::npos);
  std::string extra;
  constexpr int kExtra = 40'000;
  for (int i = 0; i < kExtra; ++i)
    extra += "  extra-source-" + std::to_string(i) + ": citation " + std::to_string(i) + "\n";
  text.insert(at + 10, extra);
  const auto start = std::chrono::steady_clock::now();
  const Hardware hw = parse_hardware(text, "many.yaml");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Hardware plain = load_hardware(std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/h200-sxm.yaml");
  EXPECT_EQ(hw.sources.size(), plain.sources.size() + kExtra);
  EXPECT_EQ(hw.sources.at("extra-source-39999"), "citation 39999");
  EXPECT_LT(seconds, 15.0);
}

}  // namespace
}  // namespace k3
