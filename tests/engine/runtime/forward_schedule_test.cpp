// The engine's forward (engine/runtime/forward_schedule.h, the list GpuModel iterates) names the op graph's ops:
// for each model, phase and layout, the schedule's ops are build_op_graph's — collectives included, each op the
// engine fuses (Op::runs_inside) under its host — and its engine-only ranges are the graph's OpGraph::engine_only.
// A name changed on one side only (core/op_names.h, core/op_graph.cpp, forward_schedule.cpp) fails here.
#include "engine/runtime/forward_schedule.h"
#include "core/op_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace k3::runtime {
namespace {

ModelConfig model(const std::string& name) {
  return load_model_config(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/" + name + ".json");
}

std::vector<std::string> names(const std::vector<OpRef>& ops) {
  std::vector<std::string> out;
  for (const OpRef& op : ops) out.push_back(op.name());
  return out;
}

// The two sides of one comparison: ops in order, the ops that run beside another (in any order within their
// layer: the graph lists mla.out_gate_proj after the attention core, the engine launches it before) and the
// engine-only ranges in order.
struct Sides {
  std::vector<std::string> ordered, beside, engine_only;
};

Sides graph_side(const ModelConfig& m, const Phase& phase, const Parallelism& par) {
  const OpGraph g = build_op_graph(m, phase, par, Precision{});
  Sides s;
  std::vector<OpRef> ordered;
  for (const Op& op : g.ops) {
    const OpRef ref{op.layer, op.runs_inside.value_or(op.id)};
    if (op.concurrent_with >= 0) {
      s.beside.push_back(ref.name());
    } else if (ordered.empty() || !(ordered.back() == ref)) {  // a fused op after its host is the host's range
      ordered.push_back(ref);
    }
  }
  s.ordered = names(ordered);
  s.engine_only = names(g.engine_only);
  std::sort(s.beside.begin(), s.beside.end());
  return s;
}

Sides engine_side(const ModelConfig& m, const ForwardPass& pass, const Parallelism& par,
                  const std::vector<std::string>& beside) {
  Sides s;
  for (const OpRef& op : forward_schedule(m, pass, /*tapped=*/false, par)) {
    const std::string name = op.name();
    if (op_info(op.id).engine_only) {
      s.engine_only.push_back(name);
    } else if (std::find(beside.begin(), beside.end(), name) != beside.end()) {
      s.beside.push_back(name);
    } else {
      s.ordered.push_back(name);
    }
  }
  std::sort(s.beside.begin(), s.beside.end());
  return s;
}

Parallelism layout_of(int tp, int ep) {
  Parallelism p;
  p.tp = tp;
  p.ep = ep;
  return p;
}

void expect_same_names(const std::string& model_name, const Parallelism& par = {}) {
  const ModelConfig m = model(model_name);
  ForwardPass decode;
  decode.tokens = 4;
  decode.decode = true;
  ForwardPass prefill;  // one chunk holding the whole prompt, so the graph's head is this chunk's
  prefill.tokens = 64;
  prefill.logits = true;
  const struct {
    const char* phase;
    Phase graph;
    ForwardPass engine;
  } cases[] = {{"decode", Phase::decode(4, 1000), decode}, {"prefill", Phase::prefill(1, 64, 0, 4096), prefill}};
  for (const auto& c : cases) {
    SCOPED_TRACE(model_name + " " + c.phase + " tp " + std::to_string(par.tp) + " ep " + std::to_string(par.ep));
    const Sides graph = graph_side(m, c.graph, par);
    const Sides engine = engine_side(m, c.engine, par, graph.beside);
    EXPECT_EQ(engine.ordered, graph.ordered);
    EXPECT_EQ(engine.beside, graph.beside);
    EXPECT_EQ(engine.engine_only, graph.engine_only);
    EXPECT_GT(graph.ordered.size(), std::size_t(m.num_layers) * 8);  // not two empty lists
  }
}

TEST(ForwardSchedule, K3TwinNamesTheGraphsOps) { expect_same_names("k3-twin"); }
TEST(ForwardSchedule, KimiK3NamesTheGraphsOps) { expect_same_names("kimi-k3"); }
TEST(ForwardSchedule, KimiLinearNamesTheGraphsOps) { expect_same_names("kimi-linear-48b-a3b"); }
TEST(ForwardSchedule, KimiK3Tp16Ep16NamesTheGraphsOpsAndCollectives) {
  expect_same_names("kimi-k3", layout_of(16, 16));
}
TEST(ForwardSchedule, K3TwinTp2Ep2NamesTheGraphsOpsAndCollectives) { expect_same_names("k3-twin", layout_of(2, 2)); }

// Where a rank's collectives sit, on K3's first two layers at TP16/EP16 (layer 1 dense, layer 2 MoE): after the
// row-parallel outputs, around the experts, after the lm_head; and that each is a collective of the op table.
TEST(ForwardSchedule, K3Tp16Ep16CollectivePositions) {
  const ModelConfig m = model("kimi-k3");
  ForwardPass pass;
  pass.tokens = 4;
  pass.decode = true;
  std::vector<std::string> collectives;
  const std::vector<OpRef> ops = forward_schedule(m, pass, false, layout_of(16, 16));
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (op_info(ops[i].id).kind != OpKind::collective) continue;
    if (ops[i].layer >= 2) continue;
    collectives.push_back(ops[i - 1].name() + " > " + ops[i].name());
  }
  EXPECT_EQ(collectives, (std::vector<std::string>{
                             "embed.lookup > embed.all_reduce",
                             "L001.kda.o_proj > L001.attn.all_reduce",
                             "L001.mlp.down_proj > L001.mlp.all_reduce",
                             "L002.kda.o_proj > L002.attn.all_reduce",
                             "L002.moe.latent_down > L002.moe.dispatch",
                             "L002.moe.experts > L002.moe.combine",
                             "L002.moe.shared > L002.mlp.all_reduce",
                             "head.lm_head > head.all_gather",
                         }));
  EXPECT_EQ(ops.end()[-3].name(), "head.all_gather");
}

// What the comparison rests on, stated once on the twin's decode step: AttnRes fuses every norm into its mixer,
// the first layer's mixer is the engine's alone, and the out gate runs beside the MLA attention.
TEST(ForwardSchedule, TwinDecodeStepShape) {
  const ModelConfig m = model("k3-twin");
  ForwardPass pass;
  pass.tokens = 1;
  pass.decode = true;
  const std::vector<std::string> ops = names(forward_schedule(m, pass, false));
  ASSERT_GE(ops.size(), 4u);
  EXPECT_EQ(ops[0], "embed.lookup");
  EXPECT_EQ(ops[1], "L001.attnres.pre_attn");
  EXPECT_EQ(ops.end()[-3], "head.lm_head");
  EXPECT_EQ(ops.end()[-2], "head.sample");
  EXPECT_EQ(ops.end()[-1], "decode.advance");
  EXPECT_EQ(std::count_if(ops.begin(), ops.end(), [](const std::string& n) { return n.find(".norm.") != n.npos; }), 0);
  const OpGraph g = build_op_graph(m, Phase::decode(1, 100), Parallelism{}, Precision{});
  ASSERT_NE(g.find("L001.norm.attn_in"), nullptr);
  EXPECT_EQ(g.find("L001.attnres.pre_attn"), nullptr);  // no candidates to mix: the graph predicts no mixer
  EXPECT_EQ(g.find("L001.norm.attn_in")->runs_inside, OpId::attnres_pre_attn);
  const Op* gate = nullptr;
  for (const Op& op : g.ops) {
    if (op.id == OpId::mla_out_gate_proj) gate = &op;
  }
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(g.ops[gate->concurrent_with].id, OpId::mla_attn_decode);
}

// Earlier prefill chunks stop at the head's norm; a tapped forward never folds a residual add, so with plain
// residuals every sublayer gets its residual op; Block AttnRes has one either way.
TEST(ForwardSchedule, ChunksAndTaps) {
  const ModelConfig linear = model("kimi-linear-48b-a3b");
  ForwardPass chunk;
  chunk.tokens = 128;
  const std::vector<OpRef> early = forward_schedule(linear, chunk, false);
  EXPECT_EQ(early.back().id, OpId::head_norm);
  auto count = [](const std::vector<OpRef>& ops, OpId id) {
    return std::count_if(ops.begin(), ops.end(), [&](const OpRef& op) { return op.id == id; });
  };
  const std::vector<OpRef> tapped = forward_schedule(linear, chunk, true);
  EXPECT_EQ(count(early, OpId::attn_residual), 0);
  EXPECT_EQ(count(tapped, OpId::attn_residual), linear.num_layers);
  EXPECT_EQ(count(tapped, OpId::mlp_residual), linear.num_layers);
  EXPECT_EQ(count(early, OpId::mlp_residual), linear.count_layers(MlpKind::moe));  // bf16 experts: never folded
  const ModelConfig twin = model("k3-twin");
  EXPECT_EQ(names(forward_schedule(twin, chunk, true)), names(forward_schedule(twin, chunk, false)));
}

}  // namespace
}  // namespace k3::runtime
