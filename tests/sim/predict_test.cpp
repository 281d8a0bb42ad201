// Whole predictions: determinism, step accounting, and counterfactuals behaving as physics says.
#include "sim/predict.h"

#include "core/version.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace k3 {
namespace {

Scenario default_scenario(const std::vector<std::string>& sets = {}) {
  return load_scenario(test::scenario_path("k3-gb300-tp8-decode-128k.yaml"), test::data(), sets);
}

TEST(Predict, SameScenarioGivesIdenticalJsonBytes) {
  const std::string a = to_json(predict(default_scenario())).dump(2);
  const std::string b = to_json(predict(default_scenario())).dump(2);
  EXPECT_EQ(a, b);
  EXPECT_EQ(to_csv(predict(default_scenario())), to_csv(predict(default_scenario())));
}

TEST(Predict, StepIsTheSumOfExposedOpTimes) {
  const Prediction p = predict(default_scenario());
  double sum = 0, modules = 0;
  for (const OpTime& t : p.step.ops) sum += t.exposed_us;
  for (const GroupTotal& g : p.by_module()) modules += g.time_us;
  EXPECT_NEAR(p.step.step_us, sum, 1e-6);
  EXPECT_NEAR(p.step.step_us, modules, 1e-6);
  EXPECT_NEAR(p.tokens_per_s(), 8 / (p.step.step_us * 1e-6), 1e-6);
}

// By op name: every op in exactly one group, the layers' instances summed; collectives carry their payload.
TEST(Predict, OpNamesSumTheirLayersAndCollectivesTheirPayload) {
  const Prediction p = predict(default_scenario());
  const std::vector<OpNameTotal> names = p.by_op_name();
  int ops = 0;
  double time_us = 0;
  for (const OpNameTotal& g : names) {
    ops += g.count;
    time_us += g.time_us;
  }
  EXPECT_EQ(ops, static_cast<int>(p.graph.ops.size()));
  EXPECT_NEAR(time_us, p.step.step_us, 1e-6);
  const auto find = [&](const std::string& name) {
    const auto it = std::find_if(names.begin(), names.end(), [&](const OpNameTotal& g) { return g.name == name; });
    EXPECT_NE(it, names.end()) << name;
    return *it;
  };
  const OpNameTotal mla = find("mla.attn_decode");
  EXPECT_EQ(mla.count, p.scenario.model.count_layers(AttentionKind::mla));
  EXPECT_EQ(mla.kind, OpKind::mla_attention);
  double mla_us = 0, sent = 0, comm_sent = 0;
  for (std::size_t i = 0; i < p.graph.ops.size(); ++i) {
    const Op& op = p.graph.ops[i];
    if (op.layer >= 0 && op.name().ends_with(".mla.attn_decode")) mla_us += p.step.ops[i].exposed_us;
    if (op.collective && op.name().ends_with(".attn.all_reduce")) sent += op.collective->bytes;
  }
  EXPECT_NEAR(mla.time_us, mla_us, 1e-9);
  EXPECT_EQ(find("attn.all_reduce").sent_bytes, sent);
  EXPECT_GT(sent, 0);
  EXPECT_EQ(mla.sent_bytes, 0);
  EXPECT_EQ(find("embed.lookup").count, 1);  // no layer prefix to strip
  for (const GroupTotal& g : p.by_module()) {
    if (g.group == "comm") comm_sent = g.sent_bytes;
    if (g.group != "comm") {
      EXPECT_EQ(g.sent_bytes, 0) << g.group;
    }
  }
  double all_sent = 0;
  for (const Op& op : p.graph.ops) all_sent += op.collective ? op.collective->bytes : 0.0;
  EXPECT_NEAR(comm_sent, all_sent, 1e-6 * all_sent);
}

// The JSON says what it is and what wrote it, and carries the peaks and bandwidth the roofline used.
TEST(Predict, JsonDescribesItselfAndTheHardwareUsed) {
  const Prediction p = predict(default_scenario());
  const nlohmann::ordered_json j = to_json(p);
  EXPECT_EQ(j.at("format"), "k3perf-prediction");
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("k3perf").at("version"), k3perf_version());
  EXPECT_EQ(j.at("k3perf").at("engine_sources").get<std::string>().size(), 16u);
  const Hardware& hw = p.scenario.hardware;
  const nlohmann::ordered_json& h = j.at("hardware");
  EXPECT_EQ(h.at("name"), hw.name);
  EXPECT_EQ(h.at("peak_flops_per_s").size(), hw.peak_flops_per_s.size());
  EXPECT_EQ(h.at("peak_flops_per_s").at("bf16").get<double>(), hw.peak(ComputeType::bf16));
  EXPECT_EQ(h.at("hbm_bandwidth_bytes_per_s").get<double>(), hw.hbm_bandwidth_bytes_per_s);
  EXPECT_EQ(h.at("ridge_smooth_max_exponent").get<double>(), hw.ridge_smooth_max_exponent);
  // An op's memory time follows from the file alone: its bytes over the bandwidth at its class's efficiency.
  const Op& op = p.graph.ops.front();
  EXPECT_NEAR(
      p.step.ops.front().memory_us,
      op.bytes() /
          (h.at("hbm_bandwidth_bytes_per_s").get<double>() * hw.efficiency_of(efficiency_class(op.kind)).memory) * 1e6,
      1e-9);
}

TEST(Predict, DecodeAtBatchOneIsMemoryBoundAndGrowsWithContext) {
  const Prediction short_ctx = predict(default_scenario({"workload.batch=1", "workload.context_tokens=4096"}));
  const Prediction long_ctx = predict(default_scenario({"workload.batch=1", "workload.context_tokens=524288"}));
  EXPECT_GT(long_ctx.step.step_us, short_ctx.step.step_us);
  for (std::size_t i = 0; i < long_ctx.graph.ops.size(); ++i) {
    if (long_ctx.graph.ops[i].kind == OpKind::mla_attention) {
      EXPECT_EQ(long_ctx.step.ops[i].bound, Bound::memory) << long_ctx.graph.ops[i].name();
    }
  }
}

TEST(Predict, AllMlaCounterfactualIsSlowerAtLongContext) {
  const Prediction hybrid = predict(default_scenario({"workload.batch=1", "workload.context_tokens=524288"}));
  const Prediction all_mla =
      predict(default_scenario({"workload.batch=1", "workload.context_tokens=524288", "overrides.attention=all_mla"}));
  // 93 instead of 24 layers read KV; the all-reduce and all-to-all costs (a third of the step at TP8) and the
  // per-kernel floors of both stay.
  EXPECT_GT(all_mla.step.step_us, 1.2 * hybrid.step.step_us);
  EXPECT_DOUBLE_EQ(all_mla.memory.kv_bytes, 93.0 / 24 * hybrid.memory.kv_bytes);
}

TEST(Predict, CudaGraphsRemoveLaunchOverhead) {
  const Prediction graphs = predict(default_scenario());
  const Prediction eager = predict(default_scenario({"runtime.cuda_graphs=false"}));
  EXPECT_GT(eager.step.step_us, graphs.step.step_us);
}

TEST(Predict, PrefillIsComputeBoundAtLongPrompts) {
  const Prediction p = predict(default_scenario(
      {"phase=prefill", "workload.batch=1", "workload.context_tokens=0", "workload.new_tokens=131072"}));
  double compute = 0;
  for (const GroupTotal& g : p.by_bound()) {
    if (g.group == "compute") compute = g.time_us;
  }
  EXPECT_GT(compute, 0.5 * p.step.step_us);
  const auto j = to_json(p);
  EXPECT_TRUE(j["step"].contains("ttft_ms"));
}

// The JSON carries the graph's record of the engine: the op a fused op runs inside, and the engine-only ranges.
TEST(Predict, JsonCarriesTheEnginesFusionsAndOwnRanges) {
  const Prediction p = predict(default_scenario());
  const auto j = to_json(p);
  std::size_t fused = 0;
  for (const auto& op : j["ops"]) {
    if (!op.contains("runs_inside")) continue;
    ++fused;
    const std::string name = op["name"], host = op["runs_inside"];
    EXPECT_EQ(name.substr(0, name.find('.')), host.substr(0, host.find('.'))) << name;  // same layer or head
  }
  EXPECT_EQ(fused, std::size_t(2 * p.scenario.model.num_layers + 1));  // K3: every norm
  ASSERT_TRUE(j.contains("engine_only_ops"));
  EXPECT_EQ(j["engine_only_ops"].size(), p.graph.engine_only.size());
  EXPECT_EQ(j["engine_only_ops"].back(), "decode.advance");
}

}  // namespace
}  // namespace k3
