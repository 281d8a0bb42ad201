#include "sim/roofline.h"

#include <gtest/gtest.h>

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
  for (EfficiencyClass c : {EfficiencyClass::gemm, EfficiencyClass::grouped_gemm, EfficiencyClass::attention,
                            EfficiencyClass::recurrent, EfficiencyClass::elementwise, EfficiencyClass::gather}) {
    hw.efficiency[c] = Efficiency{0.5, 0.8};
  }
  return hw;
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
