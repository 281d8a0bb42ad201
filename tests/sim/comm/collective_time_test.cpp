// The collective latency model (sim/collective_time.h) against hand-computed values: a toy fabric with round
// numbers for every algorithm and group size, the shipped H200 and GB300 NVL72 files, the measured-curve override,
// and the 2-GPU prediction against the 2×H200 NCCL sweep.
#include "sim/collective_time.h"

#include "core/error.h"
#include "expect_input_error.h"
#include "sim/comm/nccl_table.h"
#include "sim/roofline.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

#include <cmath>

namespace k3 {
namespace {

// NVLink: bases 10 (all-reduce), 11 (all-gather), 12 (reduce-scatter), 13 (all-to-all), 14 (send/recv) us, 0.5 us
// per step, NVLS 20 us over the base; network: base 30 us, 3 us per step, 6 us per tree level.
Hardware toy_fabric(int domain_gpus) {
  Hardware hw;
  hw.name = "toy fabric";
  hw.scale_up_domain_gpus = domain_gpus;
  hw.nvlink.bandwidth_bytes_per_s = 100e9;
  hw.nvlink.efficiency = 0.5;
  const std::pair<CollectiveKind, double> bases[] = {
      {CollectiveKind::all_reduce, 10}, {CollectiveKind::all_gather, 11}, {CollectiveKind::reduce_scatter, 12},
      {CollectiveKind::all_to_all, 13}, {CollectiveKind::send_recv, 14},
  };
  for (const auto& [kind, us] : bases) hw.nvlink.base_latency_us[static_cast<int>(kind)] = us;
  hw.nvlink.step_latency_us = 0.5;
  hw.nvlink.nvls_latency_us = 20;
  hw.network.bandwidth_bytes_per_s = 10e9;
  hw.network.set_flat_latency_us(30);
  hw.network.step_latency_us = 3;
  hw.network.tree_level_latency_us = 6;
  return hw;
}

void expect_latency(const Hardware& hw, CollectiveKind kind, int n, CollectiveAlgorithm algorithm, double us) {
  const CollectiveLatency l = collective_latency(hw, kind, n);
  EXPECT_EQ(to_string(l.algorithm), to_string(algorithm)) << to_string(kind) << " over " << n;
  EXPECT_NEAR(l.latency_us, us, 1e-9) << to_string(kind) << " over " << n;
}

TEST(CollectiveTime, AllReduceByGroupSizeInsideAndAcrossEightGpuNodes) {
  const Hardware hw = toy_fabric(8);
  using A = CollectiveAlgorithm;
  expect_latency(hw, CollectiveKind::all_reduce, 1, A::ring, 0);  // no peers, nothing to do
  // Ring inside the node: 10 + 2(n−1)·0.5; NVLS (10 + 20 = 30) never wins at 8 GPUs.
  expect_latency(hw, CollectiveKind::all_reduce, 2, A::ring, 11);
  expect_latency(hw, CollectiveKind::all_reduce, 4, A::ring, 13);
  expect_latency(hw, CollectiveKind::all_reduce, 8, A::ring, 17);
  // 16 GPUs = 2 nodes of 8: ring 30 + 28·0.5 + 2·3 = 50; tree 30 + 2(7·0.5 + 1·6) = 49.
  expect_latency(hw, CollectiveKind::all_reduce, 16, A::tree, 49);
  // 72 GPUs = 9 nodes of 8: ring 30 + 126·0.5 + 16·3 = 141; tree 30 + 2(3.5 + ⌊log2 9⌋·6) = 73.
  expect_latency(hw, CollectiveKind::all_reduce, 72, A::tree, 73);
  // Without a tree over the network, the ring.
  Hardware no_tree = hw;
  no_tree.network.tree_level_latency_us.reset();
  expect_latency(no_tree, CollectiveKind::all_reduce, 16, A::ring, 50);
  expect_latency(no_tree, CollectiveKind::all_reduce, 72, A::ring, 141);
}

TEST(CollectiveTime, NvlsWinsInALargeNvlinkDomain) {
  const Hardware hw = toy_fabric(72);  // one NVLink domain of 72 GPUs, as an NVL72 rack
  using A = CollectiveAlgorithm;
  expect_latency(hw, CollectiveKind::all_reduce, 8, A::ring, 17);
  expect_latency(hw, CollectiveKind::all_reduce, 16, A::ring, 25);    // 10 + 30·0.5 < 30
  expect_latency(hw, CollectiveKind::all_reduce, 32, A::nvls, 30);    // 10 + 62·0.5 = 41 > 30
  expect_latency(hw, CollectiveKind::all_reduce, 72, A::nvls, 30);    // 10 + 142·0.5 = 81 > 30
  expect_latency(hw, CollectiveKind::all_gather, 16, A::ring, 18.5);  // 11 + 15·0.5
  expect_latency(hw, CollectiveKind::all_gather, 72, A::nvls, 31);    // 11 + 71·0.5 = 46.5 > 31
  expect_latency(hw, CollectiveKind::reduce_scatter, 72, A::nvls, 32);
  // NVLS does not do all-to-all: one step per peer.
  expect_latency(hw, CollectiveKind::all_to_all, 72, A::peers, 48.5);  // 13 + 71·0.5
  Hardware no_nvls = hw;
  no_nvls.nvlink.nvls_latency_us.reset();
  expect_latency(no_nvls, CollectiveKind::all_reduce, 72, A::ring, 81);
}

TEST(CollectiveTime, GatherScatterAllToAllAndSendRecv) {
  const Hardware hw = toy_fabric(8);
  using A = CollectiveAlgorithm;
  expect_latency(hw, CollectiveKind::all_gather, 2, A::ring, 11.5);           // 11 + 1·0.5
  expect_latency(hw, CollectiveKind::all_gather, 8, A::ring, 14.5);           // 11 + 7·0.5
  expect_latency(hw, CollectiveKind::reduce_scatter, 4, A::ring, 13.5);       // 12 + 3·0.5
  expect_latency(hw, CollectiveKind::all_gather, 16, A::ring, 40);            // 30 + 14·0.5 + 1·3; no tree for it
  expect_latency(hw, CollectiveKind::reduce_scatter, 72, A::ring, 85.5);      // 30 + 63·0.5 + 8·3
  expect_latency(hw, CollectiveKind::all_to_all, 2, A::peers, 13.5);          // 13 + 1·0.5
  expect_latency(hw, CollectiveKind::all_to_all, 8, A::peers, 16.5);          // 13 + 7·0.5
  expect_latency(hw, CollectiveKind::all_to_all, 16, A::peers, 57.5);         // 30 + 7·0.5 + 8·3
  expect_latency(hw, CollectiveKind::send_recv, 2, A::peers, 14.5);           // 14 + 0.5
  expect_latency(toy_fabric(1), CollectiveKind::send_recv, 2, A::peers, 33);  // across nodes: 30 + 3
}

TEST(CollectiveTime, CallsPayLatencyAndBytesPayBusBandwidth) {
  const Hardware hw = toy_fabric(8);
  // 2 calls of an 8-GPU all-reduce, 1 MB in all: 2·17 + 1e6 · 2·7/8 / (100e9 · 0.5) s = 34 + 35 us.
  const CollectiveTime t = collective_time(hw, Collective{CollectiveKind::all_reduce, 1e6, 8, 2});
  EXPECT_EQ(t.algorithm, CollectiveAlgorithm::ring);
  EXPECT_NEAR(t.latency_us, 34, 1e-9);
  EXPECT_NEAR(t.bandwidth_us, 35, 1e-9);
  EXPECT_NEAR(t.time_us, 69, 1e-9);
  // Across nodes the network's bandwidth: 49 + 1e6 · 2·15/16 / 10e9 s = 49 + 187.5 us.
  EXPECT_NEAR(collective_time(hw, Collective{CollectiveKind::all_reduce, 1e6, 16, 1}).time_us, 236.5, 1e-9);
  // The roofline's collective branch is this model.
  Op op;
  op.kind = OpKind::collective;
  op.collective = Collective{CollectiveKind::all_reduce, 1e6, 8, 2};
  EXPECT_NEAR(time_op(op, hw, Runtime{}).communication_us, 69, 1e-9);
  EXPECT_NEAR(collective_call_time_us(hw, "all_gather", 8, 0), 14.5, 1e-9);
  test::expect_input_error([&] { collective_call_time_us(hw, "allgather", 8, 0); }, {"allgather", "all_to_all"});
}

TEST(CollectiveTime, MeasuredCurveAtItsGroupSizeStillWins) {
  Hardware hw = toy_fabric(8);
  MeasuredCollective m;
  m.collective = "all_reduce";
  m.link = "nvlink";
  m.group_size = 8;
  m.latency_us = 3;
  m.knot_sizes_bytes = {1e3};
  m.knot_busbw_bytes_per_s = {1e10};
  hw.measured_collectives.push_back(m);
  // Per call 5e5 bytes: 3 + 5e5 · 1.75 / 1e10 s = 90.5 us; two calls 181.
  const CollectiveTime t = collective_time(hw, Collective{CollectiveKind::all_reduce, 1e6, 8, 2});
  EXPECT_EQ(t.algorithm, CollectiveAlgorithm::measured);
  EXPECT_NEAR(t.time_us, 181, 1e-9);
  EXPECT_NEAR(t.latency_us, 6, 1e-9);
  // Another group size, or another collective, keeps the model.
  EXPECT_NEAR(collective_time(hw, Collective{CollectiveKind::all_reduce, 0, 4, 1}).time_us, 13, 1e-9);
  EXPECT_NEAR(collective_time(hw, Collective{CollectiveKind::all_gather, 0, 8, 1}).time_us, 14.5, 1e-9);
}

// The shipped files: H200 (8-GPU NVSwitch nodes, InfiniBand between them) and GB300 NVL72 (one 72-GPU NVLink
// domain). Bases 14.2 (all-reduce) and 18.0 (all-to-all) us measured on 2 H200s; steps 0.6 (NVLink) and 2.7
// (network), tree level 5.0, NVLS 18.4 from NCCL's tuning model.
TEST(CollectiveTime, ShippedFabricsNvlinkVersusNetwork) {
  const Hardware h200 = test::hardware("h200-sxm");
  const Hardware gb300 = test::hardware("gb300-nvl72");
  using A = CollectiveAlgorithm;
  for (const Hardware* hw : {&h200, &gb300}) {
    expect_latency(*hw, CollectiveKind::all_reduce, 2, A::ring, 15.4);   // 14.2 + 2·0.6
    expect_latency(*hw, CollectiveKind::all_reduce, 4, A::ring, 17.8);   // 14.2 + 6·0.6
    expect_latency(*hw, CollectiveKind::all_reduce, 8, A::ring, 22.6);   // 14.2 + 14·0.6
    expect_latency(*hw, CollectiveKind::all_to_all, 8, A::peers, 22.2);  // 18.0 + 7·0.6
  }
  // H200, 16 GPUs over InfiniBand: tree 14.2 + 2(7·0.6 + 1·5.0) = 32.6 (ring 14.2 + 28·0.6 + 2·2.7 = 36.4);
  // 72 GPUs, 9 nodes: tree 14.2 + 2(4.2 + 3·5.0) = 52.6.
  expect_latency(h200, CollectiveKind::all_reduce, 16, A::tree, 32.6);
  expect_latency(h200, CollectiveKind::all_reduce, 72, A::tree, 52.6);
  expect_latency(h200, CollectiveKind::all_to_all, 16, A::peers, 43.8);  // 18 + 7·0.6 + 8·2.7
  // GB300 NVL72, the same groups inside NVLink: ring 14.2 + 30·0.6 = 32.2 at 16 (NVLS 32.6), NVLS at 72.
  expect_latency(gb300, CollectiveKind::all_reduce, 16, A::ring, 32.2);
  expect_latency(gb300, CollectiveKind::all_reduce, 72, A::nvls, 32.6);
  expect_latency(gb300, CollectiveKind::all_to_all, 16, A::peers, 27.0);  // 18 + 15·0.6
  expect_latency(gb300, CollectiveKind::all_to_all, 72, A::peers, 60.6);  // 18 + 71·0.6
}

// The model's 2-GPU prediction for the shipped H200 file stays within 15 % of every measured sample of
// bench/results/2026-11-30-h200x2-nccl/sweep.csv up to 256 KB (where the latency is at least 94 % of the time).
TEST(CollectiveTime, TwoGpuPredictionWithin15PercentOfTheH200Sweep) {
  const Hardware hw = test::hardware("h200-sxm");
  ASSERT_TRUE(hw.measured_collectives.empty());  // the model, not a curve
  const std::vector<NcclSample> sweep =
      load_nccl_table(std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-11-30-h200x2-nccl/sweep.csv");
  int checked = 0;
  for (const NcclSample& s : sweep) {
    if (s.group_size != 2 || s.size_bytes > 262144) continue;
    const double predicted = collective_call_time_us(hw, s.collective, 2, s.size_bytes);
    EXPECT_LE(std::fabs(predicted / s.time_us - 1), 0.15)
        << s.collective << " at " << s.size_bytes << " B: " << predicted << " vs " << s.time_us << " us";
    ++checked;
  }
  EXPECT_EQ(checked, 28);  // 4 collectives × 7 sizes, 4 KB to 256 KB
}

}  // namespace
}  // namespace k3
