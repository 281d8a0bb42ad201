// Measured collective curves: nccl-tests bandwidth definitions, the fitter against constructed
// nccl-tests-style tables, the hardware-file round trip, and every shipped measured curve against
// the samples it was fitted to (within 15 % at every size).
#include "sim/comm/collective_fit.h"
#include "core/error.h"
#include "core/op_graph.h"
#include "expect_input_error.h"
#include "sim/comm/nccl_table.h"
#include "sim/roofline.h"
#include "sim/test_data.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

namespace k3 {
namespace {

TEST(NcclTable, BusBandwidthDefinitions) {
  const NcclSample ar{"all_reduce", 2, 1e6, 10};
  EXPECT_DOUBLE_EQ(ar.algbw_bytes_per_s(), 1e11);
  EXPECT_DOUBLE_EQ(ar.busbw_bytes_per_s(), 1e11);  // 2(n-1)/n = 1 at n = 2
  const NcclSample ar8{"all_reduce", 8, 1e6, 10};
  EXPECT_DOUBLE_EQ(ar8.busbw_bytes_per_s(), 1e11 * 1.75);
  const NcclSample ag8{"all_gather", 8, 1e6, 10};
  EXPECT_DOUBLE_EQ(ag8.busbw_bytes_per_s(), 1e11 * 0.875);
  EXPECT_DOUBLE_EQ(nccl_bus_factor("all_to_all", 4), 0.75);
  EXPECT_DOUBLE_EQ(nccl_bus_factor("reduce_scatter", 2), 0.5);
}

TEST(NcclTable, ParsesAndNamesBadInput) {
  const auto t = parse_nccl_table(
      "# comment\ncollective,group_size,size_bytes,time_us,busbw_gb_s\n"
      "all_reduce,2,4096,15.1,0.27\nall_gather,2,8192,14.0,0.3\n",
      "t.csv");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].collective, "all_gather");
  EXPECT_DOUBLE_EQ(t[0].time_us, 15.1);
  EXPECT_EQ(parse_nccl_table(to_csv(t), "again").size(), 2u);
  test::expect_input_error([] { parse_nccl_table("size,time\n1,2\n", "a.csv"); }, {"a.csv:1", "collective,group_size"});
  // Found by fuzzing: a group size beyond an int was cast to one (undefined); an infinite size was accepted.
  const std::string header = "collective,group_size,size_bytes,time_us\n";
  test::expect_input_error([&] { parse_nccl_table(header + "all_reduce,24295000000,1024,10\n", "a.csv"); },
                           {"a.csv:2", "group_size", "24295000000 exceeds 1048576, the limit on GPUs"});
  test::expect_input_error([&] { parse_nccl_table(header + "all_reduce,8,inf,10\n", "a.csv"); },
                           {"a.csv:2", "size_bytes", "expected a positive number, got 'inf'"});
  test::expect_input_error([&] { parse_nccl_table(header + "all_reduce,8.5,1024,10\n", "a.csv"); },
                           {"a.csv:2", "group_size", "expected an integer >= 2"});
  test::expect_input_error(
      [] { parse_nccl_table("collective,group_size,size_bytes,time_us\nall_reduce,2,4096,x\n", "b.csv"); },
      {"b.csv:2", "time_us", "'x'"});
  test::expect_input_error(
      [] { parse_nccl_table("collective,group_size,size_bytes,time_us\nbroadcast,2,4096,3\n", "c.csv"); },
      {"c.csv:2", "collective", "broadcast"});
  test::expect_input_error(
      [] { parse_nccl_table("collective,group_size,size_bytes,time_us\nall_reduce,1,4096,3\n", "d.csv"); },
      {"d.csv:2", "group_size"});
}

// An NCCL-like curve with protocol regimes (low-latency, LL128, simple) and seeded noise: what a
// sweep from 4 KB to 1 GB looks like, with sizes doubling.
std::vector<NcclSample> synthetic_sweep(const std::string& name, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.01);
  std::vector<NcclSample> out;
  const double f = nccl_bus_factor(name, n);
  for (double s = 4096; s <= (1u << 30); s *= 2) {
    double t;
    if (s < 64e3)
      t = 14.0 + s * f / 40e9 * 1e6;  // LL: latency, little bandwidth
    else if (s < 4e6)
      t = 18.0 + s * f / 140e9 * 1e6;  // LL128
    else
      t = 25.0 + s * f / 320e9 * 1e6;  // simple, near the link rate
    out.push_back({name, n, s, t * (1.0 + noise(rng))});
  }
  return out;
}

TEST(CollectiveFit, FitsNcclLikeSweepsWithinTarget) {
  for (const char* name : {"all_reduce", "all_gather", "all_to_all", "reduce_scatter"}) {
    for (int n : {2, 8}) {
      const auto samples = synthetic_sweep(name, n, 7 + n);
      const MeasuredCollective c = fit_collective(samples, "nvlink", 0.05);
      EXPECT_LE(max_relative_error(c, samples), 0.05) << name << " " << n;
      EXPECT_LT(c.knot_sizes_bytes.size(), samples.size() / 2) << "a fit, not a copy of the table";
      EXPECT_NEAR(c.latency_us, 14.0, 0.5);
      // Beyond the measured range the bandwidth holds: 2 GB costs about twice 1 GB's transfer.
      const double t1 = c.time_us(1u << 30) - c.latency_us, t2 = c.time_us(2.0 * (1u << 30)) - c.latency_us;
      EXPECT_NEAR(t2 / t1, 2.0, 1e-9);
    }
  }
}

TEST(CollectiveFit, DesignFiguresAsSanityCheck) {
  // DESIGN §6, all-reduce between two H200s: ~15 us at 4 KB-256 KB, ~34 us at 4 MB, ~250 us at 64 MB,
  // ~900 us at 256 MB. A plain alpha-beta line (15 us + S / 300 GB/s) misses 4 MB by 15 %; the curve must not.
  const std::vector<NcclSample> s = {{"all_reduce", 2, 4096, 15},      {"all_reduce", 2, 65536, 15},
                                     {"all_reduce", 2, 262144, 15},    {"all_reduce", 2, 4194304, 34},
                                     {"all_reduce", 2, 67108864, 250}, {"all_reduce", 2, 268435456, 900}};
  const MeasuredCollective c = fit_collective(s, "nvlink");
  EXPECT_LE(max_relative_error(c, s), 0.05);
  EXPECT_GT(std::fabs((15 + 4194304 * nccl_bus_factor("all_reduce", 2) / 300e9 * 1e6) / 34 - 1), 0.14);
  test::expect_input_error([&] { fit_collective({s[0], s[0]}, "nvlink"); }, {"two samples at 4096 bytes"});
  test::expect_input_error([&] { fit_collective({s[0], {"all_gather", 2, 8192, 15}}, "nvlink"); }, {"mix"});
}

std::string write_measured_h200(const std::vector<NcclSample>& table) {
  const Hardware base = test::hardware("h200-sxm");
  const std::vector<MeasuredCollective> curves = fit_table(table, base);
  return measured_hardware_yaml(base.source_file, "H200 SXM (test curves)", "test-sweep",
                                "a constructed sweep for the test", curves);
}

TEST(CollectiveFit, HardwareFileRoundTripAndRooflineUse) {
  std::vector<NcclSample> table = synthetic_sweep("all_reduce", 2, 1);
  for (const NcclSample& s : synthetic_sweep("all_to_all", 2, 2)) table.push_back(s);
  const std::string yaml = write_measured_h200(table);
  EXPECT_EQ(yaml, write_measured_h200(table));  // deterministic
  const auto dir = std::filesystem::temp_directory_path() / "k3perf_comm_test";
  std::filesystem::create_directories(dir);
  const auto file = dir / "h200-test-measured.yaml";
  std::ofstream(file) << yaml;
  const Hardware hw = load_hardware(file.string());
  ASSERT_EQ(hw.measured_collectives.size(), 2u);
  const MeasuredCollective* ar = hw.measured_collective("all_reduce", "nvlink", 2);
  ASSERT_NE(ar, nullptr);
  EXPECT_LE(max_relative_error(*ar, select_samples(table, "all_reduce", 2)), 0.05 + 1e-3);
  ASSERT_EQ(ar->measured_sizes_bytes.size(), 19u);
  // The roofline times a 2-GPU all-reduce with the curve, an 8-GPU one with the fabric model: the base, 2·7 ring
  // steps, the bytes.
  Op op;
  op.kind = OpKind::collective;
  op.collective = Collective{CollectiveKind::all_reduce, 3 * 1048576.0, 2, 3};
  EXPECT_NEAR(time_op(op, hw, Runtime{}).communication_us, 3 * ar->time_us(1048576.0), 1e-9);
  op.collective->group_size = 8;
  EXPECT_NEAR(
      time_op(op, hw, Runtime{}).communication_us,
      3 * (14.2 + 14 * 0.6) + 3 * 1048576.0 * 1.75 / (hw.nvlink.bandwidth_bytes_per_s * hw.nvlink.efficiency) * 1e6,
      1e-9);
  std::filesystem::remove_all(dir);
}

TEST(CollectiveFit, EveryShippedMeasuredCurveIsWithin15PercentOfItsSamples) {
  int curves = 0;
  for (const std::string& name : list_hardware_names(test::data().hardware_dir)) {
    const Hardware hw = test::hardware(name);
    for (const MeasuredCollective& c : hw.measured_collectives) {
      ++curves;
      ASSERT_FALSE(c.measured_sizes_bytes.empty()) << name << " " << c.collective << ": no samples recorded";
      for (std::size_t i = 0; i < c.measured_sizes_bytes.size(); ++i) {
        EXPECT_NEAR(c.time_us(c.measured_sizes_bytes[i]) / c.measured_times_us[i], 1.0, 0.15)
            << name << " " << c.collective << " at " << c.measured_sizes_bytes[i] << " B";
      }
    }
  }
  RecordProperty("measured_curves", curves);
}

}  // namespace
}  // namespace k3
