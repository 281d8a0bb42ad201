// The pieces of the calibration model: non-negative least squares against a brute force over
// active sets, the hardware file's kernel_latency_us block (schema and errors) and its use by the
// roofline (sim/roofline.h), so that a calibrated file changes what predict says.
#include "core/error.h"
#include "core/hardware.h"
#include "core/op_graph.h"
#include "profiler/compare/calibration_report.h"
#include "profiler/compare/nnls.h"
#include "sim/roofline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace k3::profiler {
namespace {

const std::string kHardwareDir = std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/";

TEST(Nnls, HandWorkedCases) {
  // Unconstrained optimum (1, 2) is feasible: it is the answer.
  Eigen::MatrixXd a(3, 2);
  a << 1, 0, 0, 1, 1, 1;
  Eigen::VectorXd b(3);
  b << 1, 2, 3;
  Eigen::VectorXd x = nnls(a, b);
  EXPECT_NEAR(x(0), 1, 1e-12);
  EXPECT_NEAR(x(1), 2, 1e-12);
  // b = (-1, 2, 1): unconstrained (-1, 2) is infeasible; with x0 = 0, x1 minimises 1 + (2-x1)² + (1-x1)²
  // at x1 = 1.5, and there the gradient on x0 is a0ᵀ(b - A x) = -1 + (1 - 1.5) < 0: x0 stays 0.
  b << -1, 2, 1;
  x = nnls(a, b);
  EXPECT_EQ(x(0), 0);
  EXPECT_NEAR(x(1), 1.5, 1e-12);
  // Every b negative: x = 0.
  b << -1, -2, -3;
  x = nnls(a, b);
  EXPECT_EQ(x(0), 0);
  EXPECT_EQ(x(1), 0);
}

// The NNLS optimum is the unconstrained least-squares solution on some subset of the columns that
// is non-negative; the best such subset is the answer (the problem is convex).
Eigen::VectorXd brute_force_nnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& b) {
  const auto n = a.cols();
  Eigen::VectorXd best = Eigen::VectorXd::Zero(n);
  double best_residual = b.squaredNorm();
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index j = 0; j < n; ++j)
      if (mask & (1u << j)) cols.push_back(j);
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
    for (std::size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = a.col(cols[k]);
    const Eigen::VectorXd z = sub.colPivHouseholderQr().solve(b);
    if ((z.array() < 0).any()) continue;
    Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
    for (std::size_t k = 0; k < cols.size(); ++k) x(cols[k]) = z(static_cast<Eigen::Index>(k));
    const double r = (a * x - b).squaredNorm();
    if (r < best_residual) {
      best_residual = r;
      best = x;
    }
  }
  return best;
}

TEST(Nnls, MatchesABruteForceOverActiveSets) {
  std::mt19937 rng(12345);
  std::normal_distribution<double> normal(0, 1);
  int with_active_constraint = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + trial % 6;
    const int m = n + 1 + trial % 5;
    Eigen::MatrixXd a(m, n);
    Eigen::VectorXd b(m);
    for (int i = 0; i < m; ++i) {
      b(i) = normal(rng);
      for (int j = 0; j < n; ++j) a(i, j) = normal(rng);
    }
    const Eigen::VectorXd x = nnls(a, b);
    const Eigen::VectorXd expected = brute_force_nnls(a, b);
    ASSERT_TRUE((x.array() >= 0).all()) << trial;
    EXPECT_NEAR((a * x - b).squaredNorm(), (a * expected - b).squaredNorm(), 1e-9) << trial;
    EXPECT_LT((x - expected).norm(), 1e-7) << trial;
    with_active_constraint += (expected.array() == 0).any();
  }
  EXPECT_GT(with_active_constraint, 50);  // the constraints mattered in many trials
}

// h200-sxm.yaml without its kernel_latency_us and serial_step_us blocks, with `extra` appended, written to a temporary
// file.
class HardwareWith {
 public:
  explicit HardwareWith(const std::string& extra) {
    std::ifstream in(kHardwareDir + "h200-sxm.yaml");
    std::stringstream text;
    bool in_block = false;
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line[0] != ' ' && line[0] != '#') {
        in_block = line.rfind("kernel_latency_us:", 0) == 0 || line.rfind("serial_step_us:", 0) == 0;
      }
      if (!in_block) text << line << "\n";
    }
    // One file per test: ctest runs tests in parallel processes.
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    path_ = (std::filesystem::temp_directory_path() / ("k3perf_calibrate_test_hw_" + test + ".yaml")).string();
    std::ofstream(path_) << text.str() << extra;
  }
  ~HardwareWith() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every shipped file has the floors measured on an H200: h200-sxm's as measured, the other GPUs' carried unchanged in
// microseconds and saying so (docs/hardware.md); the calibrated file has its own fitted ones.
TEST(HardwareKernelLatency, ShippedFilesCarryTheH200FloorsAndTheBlockLoads) {
  const Hardware h200 = load_hardware_by_name("h200-sxm", kHardwareDir);
  EXPECT_EQ(h200.kernel_latency_source, "k3perf-h200-kernel-floors");
  EXPECT_EQ(h200.sources.at("k3perf-h200-kernel-floors").rfind("Measured on H200", 0), 0u);
  EXPECT_DOUBLE_EQ(h200.kernel_latency_of(OpKind::attnres_mix), 6.23);
  for (const std::string& name : list_hardware_names(kHardwareDir)) {
    if (name == "h200-validated" || name == "h200-sxm") continue;
    const Hardware hw = load_hardware_by_name(name, kHardwareDir);
    if (name.rfind("h200", 0) != 0) {
      EXPECT_EQ(hw.sources.at(hw.kernel_latency_source).rfind("Carried from H200", 0), 0u) << name;
    }
    EXPECT_EQ(hw.kernel_latency_us, h200.kernel_latency_us) << name;
  }
  const HardwareWith file("kernel_latency_us:\n  source: k3perf-h200-measured\n  attnres_mix: 23.5\n  router: 0\n");
  const Hardware hw = load_hardware(file.path());
  EXPECT_EQ(hw.kernel_latency_source, "k3perf-h200-measured");
  EXPECT_EQ(hw.kernel_latency_us.size(), 2u);
  EXPECT_DOUBLE_EQ(hw.kernel_latency_of(OpKind::attnres_mix), 23.5);
  EXPECT_DOUBLE_EQ(hw.kernel_latency_of(OpKind::router), 0.0);
  EXPECT_DOUBLE_EQ(hw.kernel_latency_of(OpKind::gemm), 0.0);
}

// The serial step of the KDA state pass: measured on the H200, carried to every other file unchanged in µs, and a block
// of its own with the same schema and errors as kernel_latency_us.
TEST(HardwareSerialStep, ShippedFilesCarryTheH200StepAndTheBlockLoads) {
  for (const std::string& name : list_hardware_names(kHardwareDir)) {
    const Hardware hw = load_hardware_by_name(name, kHardwareDir);
    EXPECT_DOUBLE_EQ(hw.serial_step_of(OpKind::kda_chunk), 2.81) << name;
    EXPECT_DOUBLE_EQ(hw.serial_step_of(OpKind::kda_recurrent), 0.0) << name;
    EXPECT_EQ(hw.serial_step_source, "k3perf-h200-chain-steps") << name;
    const std::string& citation = hw.sources.at(hw.serial_step_source);
    EXPECT_EQ(citation.rfind(name.rfind("h200", 0) == 0 ? "Measured on H200" : "Carried from H200", 0), 0u) << name;
  }
  const HardwareWith file("serial_step_us:\n  source: k3perf-h200-chain-steps\n  kda_chunk: 2.5\n");
  EXPECT_DOUBLE_EQ(load_hardware(file.path()).serial_step_of(OpKind::kda_chunk), 2.5);
  EXPECT_TRUE(load_hardware(file.path()).kernel_latency_us.empty());
  const struct {
    std::string block;
    std::vector<std::string> fragments;
  } cases[] = {
      {"serial_step_us:\n  source: k3perf-h200-chain-steps\n  kda_chunk: -3\n", {"serial_step_us.kda_chunk", "-3"}},
      {"serial_step_us:\n  source: k3perf-h200-chain-steps\n  chunk: 3\n",
       {"serial_step_us.chunk", "unknown op kind 'chunk'", "kda_chunk"}},
      {"serial_step_us: 3\n", {"serial_step_us", "microseconds per serial step"}},
  };
  for (const auto& c : cases) {
    const HardwareWith bad(c.block);
    try {
      load_hardware(bad.path());
      ADD_FAILURE() << "no error for:\n" << c.block;
    } catch (const InputError& e) {
      for (const std::string& f : c.fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  }
}

TEST(HardwareKernelLatency, BadBlocksNameTheFileAndKey) {
  const struct {
    std::string block;
    std::vector<std::string> fragments;
  } cases[] = {
      {"kernel_latency_us:\n  source: k3perf-h200-measured\n  attnres: 2\n",
       {"k3perf_calibrate_test_hw_", "kernel_latency_us.attnres", "unknown op kind 'attnres'", "attnres_mix"}},
      {"kernel_latency_us:\n  source: k3perf-h200-measured\n  collective: 2\n",
       {"kernel_latency_us.collective", "link model"}},
      {"kernel_latency_us:\n  source: k3perf-h200-measured\n  router: -1\n", {"kernel_latency_us.router", "-1"}},
      {"kernel_latency_us:\n  router: 1\n", {"kernel_latency_us", "source"}},
      {"kernel_latency_us:\n  source: nowhere\n  router: 1\n",
       {"kernel_latency_us.source", "'nowhere' is not listed under 'sources'"}},
      {"kernel_latency_us: 3\n", {"kernel_latency_us", "expected a mapping"}},
  };
  for (const auto& c : cases) {
    const HardwareWith file(c.block);
    try {
      load_hardware(file.path());
      ADD_FAILURE() << "no error for:\n" << c.block;
    } catch (const InputError& e) {
      for (const std::string& f : c.fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  }
}

TEST(HardwareKernelLatency, TheRooflineAddsItPerKernel) {
  Hardware hw = load_hardware(kHardwareDir + "h200-sxm.yaml");
  hw.kernel_latency_us.clear();  // the file's measured floors and ridge off: the mechanism alone
  hw.ridge_smooth_max_exponent = 0;
  Op op;
  op.kind = OpKind::attnres_mix;
  op.compute = ComputeType::fp32;
  op.flops = 1e5;
  op.read.activations = 4.8e6;  // 1 us at 4.8 TB/s, over η_memory elementwise
  op.kernels = 2;
  Runtime rt;
  rt.cuda_graphs = true;
  const OpTime before = time_op(op, hw, rt);
  const double memory_us = 4.8e6 / (4.8e12 * hw.efficiency_of(EfficiencyClass::elementwise).memory) * 1e6;
  EXPECT_NEAR(before.time_us, memory_us + 2 * hw.graph_kernel_overhead_us, 1e-9);
  hw.kernel_latency_us[OpKind::attnres_mix] = 10;
  hw.kernel_latency_us[OpKind::router] = 100;  // another kind: no effect
  const OpTime after = time_op(op, hw, rt);
  EXPECT_NEAR(after.overhead_us, 2 * (hw.graph_kernel_overhead_us + 10), 1e-9);
  EXPECT_NEAR(after.time_us, memory_us + 2 * (hw.graph_kernel_overhead_us + 10), 1e-9);
  EXPECT_EQ(after.bound, Bound::overhead);
  rt.cuda_graphs = false;
  EXPECT_NEAR(time_op(op, hw, rt).time_us, memory_us + 2 * (hw.kernel_launch_overhead_us + 10), 1e-9);
  // A step: the latency reaches the step time through the op.
  OpGraph g;
  g.ops.push_back(op);
  EXPECT_NEAR(time_step(g, hw, rt).step_us, memory_us + 2 * (hw.kernel_launch_overhead_us + 10), 1e-9);
}

// The fidelity report judges each held-out run by its phase's goal and sums each op kind's share of the time.
TEST(CalibrationReport, JudgesHeldOutRunsByTheirPhasesGoal) {
  const auto run = [](std::string name, std::string phase, double step_us, double after_us) {
    RunCheck r;
    r.run = name + " + trace.json.gz (commit c, date d)";
    r.phase = std::move(phase);
    r.ops = {{"L001.mlp.gate_up_proj", OpKind::gemm, 300, 330, after_us},
             {"L001.moe.experts", OpKind::moe_experts, 700, 600, 700}};
    r.op_error_before_percent = (10 + 100.0 / 7) / 2;                      // the median of two ops' errors
    r.op_error_after_percent = 100 * std::fabs(after_us - 300) / 300 / 2;  // the experts' error is 0
    r.measured_step_us = step_us;
    r.predicted_step_after_us = after_us + 700;
    r.predicted_step_before_us = 930;
    return r;
  };
  Calibration c;
  c.held_out.runs = {run("pred_decode_b8.json", "decode", 1000, 306),        // 1 % per op, +0.6 % step: met
                     run("pred_decode_b64.json", "decode", 1000, 340),       // 6.7 % per op: missed
                     run("pred_prefill_16384.json", "prefill", 1000, 255)};  // 7.5 % per op, -4.5 % step: met
  EXPECT_EQ(fidelity_goal("decode").op_percent, 5);
  EXPECT_EQ(fidelity_goal("prefill").step_percent, 5);
  const std::string md = calibration_markdown(c);
  EXPECT_NE(md.find("| decode_b8 | decode | held out | 2 | 12.1 → 1.0 | 1.0 | -7.0 → +0.6 | met |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| decode_b64 | decode | held out | 2 | 12.1 → 6.7 | 1.0 | -7.0 → +4.0 | **missed** |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| prefill_16384 | prefill | held out | 2 | 12.1 → 7.5 | 1.0 | -7.0 → -4.5 | met |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("2 of 3 runs meet their goal"), std::string::npos) << md;
  // Per kind over the two decode runs: the experts are 70 % of the measured time, before 14.3 % (600 vs 700).
  EXPECT_NE(md.find("| moe_experts | 2 | 70.0 % | 14.3 → 0.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| gemm | 2 | 30.0 % | 10.0 → 7.7 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Held-out prefill runs, per op kind"), std::string::npos) << md;
}

}  // namespace
}  // namespace k3::profiler
