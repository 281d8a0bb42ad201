#include "sim/roofline.h"

#include <gtest/gtest.h>

#include <cmath>

namespace k3 {
namespace {

LinkSpec flat_link(double bandwidth_bytes_per_s, double latency_us, double efficiency) {
  LinkSpec link;
  link.bandwidth_bytes_per_s = bandwidth_bytes_per_s;
  link.efficiency = efficiency;
  link.set_flat_latency_us(latency_us);
  return link;
}

Hardware toy_hardware() {
  Hardware hw;
  hw.name = "toy";
  hw.peak_flops_per_s[ComputeType::bf16] = 100e12;
  hw.peak_flops_per_s[ComputeType::fp32] = 10e12;
  hw.hbm_bandwidth_bytes_per_s = 1e12;
  hw.hbm_capacity_bytes = 80e9;
  hw.scale_up_domain_gpus = 8;
  hw.nvlink = flat_link(100e9, 5.0, 0.5);
  hw.network = flat_link(10e9, 20.0, 1.0);
  hw.kernel_launch_overhead_us = 4;
  hw.graph_kernel_overhead_us = 1;
  for (EfficiencyClass c : kAllEfficiencyClasses) hw.efficiency[c] = Efficiency{0.5, 0.8};
  return hw;
}

// A serial chain adds to the roofline: time = roofline + steps · step time + overhead.
TEST(Roofline, SerialChainBoundsAnOpWithFewBytes) {
  Hardware hw = toy_hardware();
  hw.serial_step_us[OpKind::kda_chunk] = 3.0;
  Runtime rt;
  rt.cuda_graphs = false;
  Op scan;
  scan.kind = OpKind::kda_chunk;
  scan.kernels = 2;
  scan.serial_steps = 128;
  scan.read.activations = 80e6;  // 80e6 / (1e12 * 0.8) = 100 us < 128 * 3 = 384 us
  OpTime t = time_op(scan, hw, rt);
  EXPECT_DOUBLE_EQ(t.memory_us, 100.0);
  EXPECT_DOUBLE_EQ(t.serial_us, 384.0);
  EXPECT_DOUBLE_EQ(t.time_us, 100.0 + 384.0 + 2 * 4.0);
  EXPECT_EQ(t.bound, Bound::serial);
  scan.read.activations = 800e6;  // 1,000 us: more than the chain
  t = time_op(scan, hw, rt);
  EXPECT_DOUBLE_EQ(t.time_us, 1000.0 + 384.0 + 8.0);
  EXPECT_EQ(t.bound, Bound::memory);
  // Without a step time for its kind (or with no steps) the chain adds nothing.
  hw.serial_step_us.clear();
  scan.read.activations = 80e6;
  EXPECT_DOUBLE_EQ(time_op(scan, hw, rt).time_us, 108.0);
  hw.serial_step_us[OpKind::kda_chunk] = 3.0;
  scan.serial_steps = 0;
  EXPECT_DOUBLE_EQ(time_op(scan, hw, rt).time_us, 108.0);
}

TEST(Roofline, MemoryBoundOpUsesBandwidthTimesEfficiencyPlusOverhead) {
  const Hardware hw = toy_hardware();
  Op op;
  op.kind = OpKind::gemm;
  op.flops = 1e9;          // 1e9 / (100e12 * 0.5) = 20 us
  op.read.weights = 80e6;  // 80e6 / (1e12 * 0.8) = 100 us
  Runtime rt;
  rt.cuda_graphs = false;
  const OpTime t = time_op(op, hw, rt);
  EXPECT_DOUBLE_EQ(t.compute_us, 20.0);
  EXPECT_DOUBLE_EQ(t.memory_us, 100.0);
  EXPECT_DOUBLE_EQ(t.overhead_us, 4.0);
  EXPECT_DOUBLE_EQ(t.time_us, 104.0);
  EXPECT_EQ(t.bound, Bound::memory);
  rt.cuda_graphs = true;
  EXPECT_DOUBLE_EQ(time_op(op, hw, rt).time_us, 101.0);
}

TEST(Roofline, ComputeBoundAndOverheadBound) {
  const Hardware hw = toy_hardware();
  Runtime rt;
  Op big;
  big.kind = OpKind::gemm;
  big.flops = 1e12;  // 20,000 us
  big.read.weights = 1e6;
  EXPECT_EQ(time_op(big, hw, rt).bound, Bound::compute);
  Op tiny;
  tiny.kind = OpKind::rmsnorm;
  tiny.compute = ComputeType::fp32;
  tiny.flops = 1e3;
  tiny.read.activations = 1e3;
  const OpTime t = time_op(tiny, hw, rt);
  EXPECT_EQ(t.bound, Bound::overhead);
  EXPECT_NEAR(t.compute_us, 1e3 / (10e12 * 0.5) * 1e6, 1e-12);  // fp32 peak used
}

// The ridge term: the smooth max (c^p + m^p)^(1/p) of the two times. At c = m it is 2^(1/p) times either (with the
// H200's p = 2.82: 2^(1/2.82) = 1.2786, the measured 1.25-1.29x); at c = m/10, 1 + 0.1^2.82 / 2.82 to first order
// (+0.054 %); p = 0 is the plain max.
TEST(Roofline, RidgeMaxAtTheRidgeAndFarFromIt) {
  EXPECT_NEAR(ridge_max(100, 100, 2.82), 127.86, 0.01);
  EXPECT_NEAR(ridge_max(10, 100, 2.82), 100.0536, 1e-4);
  EXPECT_NEAR(ridge_max(100, 10, 2.82), 100.0536, 1e-4);  // symmetric
  EXPECT_DOUBLE_EQ(ridge_max(3, 4, 2), 5);                // sqrt(9 + 16)
  EXPECT_DOUBLE_EQ(ridge_max(30, 40, 0), 40);             // no ridge term
  EXPECT_DOUBLE_EQ(ridge_max(0, 40, 2.82), 40);
  EXPECT_DOUBLE_EQ(ridge_max(0, 0, 2.82), 0);
}

TEST(Roofline, RidgeTermInAnOpAndAConcurrentPair) {
  Hardware hw = toy_hardware();
  hw.ridge_smooth_max_exponent = 2;
  Op op;
  op.kind = OpKind::gemm;
  op.flops = 150e6;         // 150e6 / (100e12 * 0.5) = 3 us
  op.read.weights = 3.2e6;  // 3.2e6 / (1e12 * 0.8) = 4 us
  Runtime rt;               // CUDA graphs: 1 us per kernel
  OpTime t = time_op(op, hw, rt);
  EXPECT_DOUBLE_EQ(t.compute_us, 3.0);
  EXPECT_DOUBLE_EQ(t.memory_us, 4.0);
  EXPECT_DOUBLE_EQ(t.time_us, 5.0 + 1.0);  // sqrt(3^2 + 4^2) + overhead
  EXPECT_EQ(t.bound, Bound::memory);
  // Beside it, a memory-only op of 8 us: the pair is sqrt(3^2 + 12^2) + 1 = 13.3693 us; the side op adds 7.3693.
  OpGraph g;
  g.ops.push_back(op);
  Op side;
  side.kind = OpKind::gemm;
  side.read.weights = 6.4e6;
  side.concurrent_with = 0;
  g.ops.push_back(side);
  const StepTime s = time_step(g, hw, rt);
  EXPECT_NEAR(s.ops[1].exposed_us, std::sqrt(9.0 + 144.0) + 1.0 - 6.0, 1e-12);
  EXPECT_NEAR(s.step_us, std::sqrt(153.0) + 1.0, 1e-12);
}

TEST(Roofline, CollectiveAlphaBetaWithBusBandwidthFactor) {
  const Hardware hw = toy_hardware();
  Op ar;
  ar.kind = OpKind::collective;
  ar.collective = Collective{CollectiveKind::all_reduce, 1e6, 4};
  // alpha 5 us + 1e6 * 2*3/4 / (100e9 * 0.5) s = 5 + 30 us
  EXPECT_DOUBLE_EQ(time_op(ar, hw, Runtime{}).time_us, 35.0);
  ar.collective->group_size = 16;  // beyond the NVLink domain: network link
  EXPECT_DOUBLE_EQ(time_op(ar, hw, Runtime{}).time_us, 20.0 + 1e6 * 2.0 * 15 / 16 / 10e9 * 1e6);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::all_to_all, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::all_gather, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::send_recv, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::all_reduce, 1), 0.0);
}

TEST(Roofline, ConcurrentOpsShareBandwidth) {
  const Hardware hw = toy_hardware();
  OpGraph g;
  Op attn;
  attn.kind = OpKind::mla_attention;
  attn.read.kv = 80e6;  // 100 us memory
  Op gate;
  gate.kind = OpKind::gemm;
  gate.read.weights = 40e6;  // 50 us memory
  gate.concurrent_with = 0;
  g.ops = {attn, gate};
  Runtime rt;
  rt.cuda_graphs = true;
  const StepTime s = time_step(g, hw, rt);
  // Both memory-bound: together 150 us of bytes + one overhead (1 us); the gate adds 50 us.
  EXPECT_DOUBLE_EQ(s.ops[0].exposed_us, 101.0);
  EXPECT_DOUBLE_EQ(s.ops[1].exposed_us, 50.0);
  EXPECT_DOUBLE_EQ(s.step_us, 151.0);
}

}  // namespace
}  // namespace k3
