// compare's fused ops (compare.h): a predicted op that runs inside its neighbour's kernel and range (as the
// prediction records it, PredictedOp::runs_inside) joins the neighbour, on a hand-built prediction and trace;
// and the prediction file's record, written or (older files) read from core's op table.
#include "profiler/compare/compare.h"

#include "expect_input_error.h"

#include "core/hardware.h"

#include <gtest/gtest.h>

namespace k3::profiler {
namespace {

PredictedOp op(const std::string& name, OpKind kind, double time_us, double bytes, const std::string& host = "") {
  PredictedOp p;
  p.runs_inside = host;
  p.name = name;
  p.kind = kind;
  p.compute = ComputeType::fp32;
  p.flops = 10 * bytes;
  p.bytes = bytes;
  p.bound = "memory";
  p.time_us = time_us;
  return p;
}

// One kernel of `us` microseconds per instance, attributed to `name`.
void kernels(Trace& t, const std::string& name, double us, int instances, std::int64_t* clock_ns) {
  for (int i = 0; i < instances; ++i) {
    Event e;
    e.kind = EventKind::kernel;
    e.name = "k_" + name;
    e.start_ns = *clock_ns;
    e.end_ns = *clock_ns + std::int64_t(us * 1000);
    e.device = 0;
    e.stream = 7;
    e.op = name;
    e.op_instance = i;
    t.add(e);
    *clock_ns = e.end_ns + 1000;
  }
}

TEST(CompareFusion, NormsJoinTheMixerTheyRunInside) {
  PredictionFile p;
  p.origin = "test";
  p.ops = {op("L001.norm.attn_in", OpKind::rmsnorm, 2, 100, "L001.attnres.pre_attn"),  // no mixer in the graph
           op("L001.kda.recurrent", OpKind::kda_recurrent, 50, 1000),
           op("L002.attnres.pre_attn", OpKind::attnres_mix, 10, 300),
           op("L002.norm.attn_in", OpKind::rmsnorm, 3, 200, "L002.attnres.pre_attn"),
           op("L002.norm.mlp_in", OpKind::rmsnorm, 4, 200, "L002.attnres.pre_mlp"),  // measured on its own: stays
           op("head.attnres", OpKind::attnres_mix, 6, 300),
           op("head.norm", OpKind::rmsnorm, 1, 50, "head.attnres"),
           op("head.lm_head", OpKind::gemm, 100, 5000)};
  p.records_engine = true;
  p.engine_only = {"head.sample"};
  Trace t;
  std::int64_t clock = 0;
  kernels(t, "L001.attnres.pre_attn", 5, 3, &clock);
  kernels(t, "L001.kda.recurrent", 40, 3, &clock);
  kernels(t, "L002.attnres.pre_attn", 15, 3, &clock);
  kernels(t, "L002.norm.mlp_in", 4, 3, &clock);
  kernels(t, "head.attnres", 8, 3, &clock);
  kernels(t, "head.lm_head", 80, 3, &clock);
  kernels(t, "head.sample", 20, 3, &clock);  // not predicted: the engine's own
  kernels(t, "head.renamed", 1, 3, &clock);  // not predicted, and not the engine's own either
  t.sort();
  const Hardware hw = load_hardware(std::string(K3PERF_SOURCE_DIR) + "/scenarios/hardware/h200-sxm.yaml");
  const Comparison c = compare(p, t, hw);

  ASSERT_EQ(c.ops.size(), 6u);
  // Prediction order; L001's norm stands for the mixer range the engine ran it in.
  EXPECT_EQ(c.ops[0].predicted->name, "L001.attnres.pre_attn");
  EXPECT_EQ(c.ops[0].predicted->kind, OpKind::rmsnorm);
  EXPECT_DOUBLE_EQ(c.ops[0].predicted->time_us, 2);
  EXPECT_DOUBLE_EQ(c.ops[0].measured_us, 5);
  EXPECT_DOUBLE_EQ(c.ops[0].error_percent, -60);
  EXPECT_EQ(c.ops[1].predicted->name, "L001.kda.recurrent");
  // L002's mixer carries its norm: 10 + 3 us, 300 + 200 bytes.
  EXPECT_EQ(c.ops[2].predicted->name, "L002.attnres.pre_attn");
  EXPECT_EQ(c.ops[2].predicted->kind, OpKind::attnres_mix);
  EXPECT_DOUBLE_EQ(c.ops[2].predicted->time_us, 13);
  EXPECT_DOUBLE_EQ(c.ops[2].predicted->bytes, 500);
  EXPECT_DOUBLE_EQ(c.ops[2].predicted->flops, 5000);
  EXPECT_NEAR(c.ops[2].error_percent, 100.0 * (13 - 15) / 15, 1e-12);
  EXPECT_EQ(c.ops[3].predicted->name, "L002.norm.mlp_in");
  EXPECT_DOUBLE_EQ(c.ops[3].predicted->time_us, 4);
  EXPECT_EQ(c.ops[4].predicted->name, "head.attnres");
  EXPECT_DOUBLE_EQ(c.ops[4].predicted->time_us, 7);
  EXPECT_EQ(c.ops[5].predicted->name, "head.lm_head");
  EXPECT_EQ(c.fused,
            (std::vector<std::string>{"L001.norm.attn_in -> L001.attnres.pre_attn",
                                      "L002.norm.attn_in -> L002.attnres.pre_attn", "head.norm -> head.attnres"}));
  EXPECT_TRUE(c.not_measured.empty());
  ASSERT_EQ(c.not_predicted.size(), 2u);
  EXPECT_EQ(c.not_predicted[0].name, "head.renamed");
  EXPECT_FALSE(c.not_predicted[0].engine_only);
  EXPECT_EQ(c.not_predicted[1].name, "head.sample");
  EXPECT_TRUE(c.not_predicted[1].engine_only);
  const std::string text = to_text(c, 0);
  EXPECT_NE(text.find("head.renamed"), std::string::npos);
  EXPECT_NE(text.find("(not an engine-only op of the prediction)"), std::string::npos) << text;
  EXPECT_EQ(text.find("(not an engine-only op of the prediction)"), text.rfind("(not an engine-only op")) << text;
  // Coverage: every kernel but head.sample's and head.renamed's is on a predicted op.
  EXPECT_EQ(c.kernels, 24u);
  EXPECT_EQ(c.kernels_on_predicted_ops, 18u);
  EXPECT_NEAR(c.coverage_percent(), 100.0 * 3 * (5 + 40 + 15 + 4 + 8 + 80) / (3 * (5 + 40 + 15 + 4 + 8 + 80 + 20 + 1)),
              1e-9);
  // The merged predictions outlive a copy of the comparison.
  const Comparison copy = c;
  EXPECT_DOUBLE_EQ(copy.ops[2].predicted->time_us, 13);
  // Without the host in the trace, nothing is fused: the norm is simply not measured.
  Trace only_kda;
  clock = 0;
  kernels(only_kda, "L001.kda.recurrent", 40, 2, &clock);
  only_kda.sort();
  const Comparison d = compare(p, only_kda, hw);
  EXPECT_TRUE(d.fused.empty());
  ASSERT_EQ(d.ops.size(), 1u);
  EXPECT_EQ(d.not_measured.size(), 7u);
  // An op the prediction does not record as running inside another is not fused, whatever its name.
  PredictionFile unrecorded = p;
  for (PredictedOp& o : unrecorded.ops) o.runs_inside.clear();
  const Comparison e = compare(unrecorded, t, hw);
  EXPECT_TRUE(e.fused.empty());
  EXPECT_EQ(e.not_measured, (std::vector<std::string>{"L001.norm.attn_in", "L002.norm.attn_in", "head.norm"}));
}

std::string prediction_json(const std::string& engine_keys, const std::string& norm_extra) {
  const std::string zero = R"({"weights":0,"kv":0,"state":0,"activations":0})";
  auto one = [&](const std::string& name, const std::string& kind, const std::string& extra) {
    return R"({"name":")" + name + R"(","kind":")" + kind + R"(","compute":"fp32","flops":1,"read":)" + zero +
           R"(,"written":)" + zero + R"(,"kernels":1,"bound":"memory","time_us":1)" + extra + "}";
  };
  return R"({"scenario":{"hardware":"x","cuda_graphs":true},"ops":[)" +
         one("L002.attnres.pre_attn", "attnres_mix", "") + "," + one("L002.norm.attn_in", "rmsnorm", norm_extra) + "," +
         one("L002.kda.o_proj", "gemm", "") + "]" + engine_keys + "}";
}

TEST(PredictionFile, ReadsTheEngineRecord) {
  const PredictionFile p =
      parse_prediction(prediction_json(R"(,"engine_only_ops":["L002.attn.residual","head.sample"])",
                                       R"(,"runs_inside":"L002.attnres.pre_attn")"),
                       "p.json");
  EXPECT_TRUE(p.records_engine);
  EXPECT_EQ(p.engine_only, (std::vector<std::string>{"L002.attn.residual", "head.sample"}));
  EXPECT_EQ(p.ops[1].runs_inside, "L002.attnres.pre_attn");
  EXPECT_EQ(p.ops[0].runs_inside, "");
  // A recording prediction means what it says: no host where it records none.
  EXPECT_EQ(parse_prediction(prediction_json(R"(,"engine_only_ops":[])", ""), "q.json").ops[1].runs_inside, "");
  test::expect_input_error(
      [] { parse_prediction(prediction_json(R"(,"engine_only_ops":["L002.kda.o_proj"])", ""), "r.json"); },
      {"r.json", "engine_only_ops[0]", "L002.kda.o_proj"});
  test::expect_input_error(
      [] { parse_prediction(prediction_json(R"(,"engine_only_ops":[])", R"(,"runs_inside":"")"), "s.json"); },
      {"s.json", "ops[1].runs_inside"});
}

TEST(PredictionFile, OlderFilesTakeTheHostsFromTheOpTable) {
  const PredictionFile p = parse_prediction(prediction_json("", ""), "old.json");
  EXPECT_FALSE(p.records_engine);
  EXPECT_TRUE(p.engine_only.empty());
  EXPECT_EQ(p.ops[1].runs_inside, "L002.attnres.pre_attn");
  EXPECT_EQ(p.ops[2].runs_inside, "");
  // Without an AttnRes mixer in the prediction, the norms are plain RMSNorms with ranges of their own.
  std::string plain = prediction_json("", "");
  plain.replace(plain.find("attnres_mix"), std::string("attnres_mix").size(), "gemm");
  EXPECT_EQ(parse_prediction(plain, "plain.json").ops[1].runs_inside, "");
}

}  // namespace
}  // namespace k3::profiler
