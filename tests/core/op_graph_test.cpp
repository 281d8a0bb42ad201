// The op graph on the K3 twin (K3's structure, tiny dims), checked against FLOPs and bytes
// computed by hand from the twin's config: h 64, KDA 4x16, MLA 4 heads (q_lora 32, kv_lora 16,
// nope 16, rope 8, v 16), 8 experts top-2 of 3x32x64 (latent 64), vocab 256, bf16 activations.
#include "core/op_graph.h"
#include "sim/test_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace k3 {
namespace {

const Op& op(const OpGraph& g, const std::string& name) {
  const Op* found = g.find(name);
  if (!found) throw std::runtime_error("no op " + name);
  return *found;
}

Precision k3_precision() {
  Precision p;
  p.routed_experts = StorageFormat::mxfp4;
  return p;
}

TEST(OpGraph, TwinDecodeMatchesHandCounts) {
  const ModelConfig m = test::model("k3-twin");
  const OpGraph g = build_op_graph(m, Phase::decode(2, 100), Parallelism{}, k3_precision());
  // qkv projection: T=2 tokens, 64 -> 3*64.
  const Op& qkv = op(g, "L001.kda.qkv_proj");
  EXPECT_DOUBLE_EQ(qkv.flops, 2.0 * 2 * 64 * 192);
  EXPECT_DOUBLE_EQ(qkv.read.weights, 64.0 * 192 * 2);
  EXPECT_DOUBLE_EQ(qkv.read.activations, 2.0 * 64 * 2);
  EXPECT_DOUBLE_EQ(qkv.written.activations, 2.0 * 192 * 2);
  // KDA recurrent step: per token and head 7d^2 + 2d FLOP; fp32 state 4x16x16 per sequence read and written.
  const Op& rec = op(g, "L001.kda.recurrent");
  EXPECT_EQ(rec.kind, OpKind::kda_recurrent);
  EXPECT_DOUBLE_EQ(rec.flops, 2.0 * 4 * (7 * 256 + 32));
  EXPECT_DOUBLE_EQ(rec.read.state, 2.0 * 4 * 256 * 4);
  EXPECT_DOUBLE_EQ(rec.written.state, 2.0 * 4 * 256 * 4);
  // Absorbed MLA decode at layer 4 (1-based): each of 2 sequences reads 101 cached tokens of 24 bf16 values;
  // FLOP = 2 * heads * (24 + 16) per (query, key) pair.
  const Op& attn = op(g, "L004.mla.attn_decode");
  EXPECT_DOUBLE_EQ(attn.flops, 2.0 * 4 * (24 + 16) * (2 * 101));
  EXPECT_DOUBLE_EQ(attn.read.kv, 2.0 * 101 * 24 * 2);
  EXPECT_DOUBLE_EQ(attn.written.kv, 2.0 * 24 * 2);
  // The output gate runs beside the attention core.
  const Op& gate = op(g, "L004.mla.out_gate_proj");
  ASSERT_GE(gate.concurrent_with, 0);
  EXPECT_EQ(g.ops[gate.concurrent_with].name(), "L004.mla.attn_decode");
  // Routed experts: 2 tokens x top-2 = 4 assignments; 8 * (1 - (6/8)^2) = 3.5 distinct experts of
  // 3*32*64 weights at 4.25 bits.
  const Op& ex = op(g, "L002.moe.experts");
  EXPECT_DOUBLE_EQ(ex.read.weights, 3.5 * 6144 * 4.25 / 8);
  EXPECT_DOUBLE_EQ(ex.flops, 2.0 * 4 * 6144 + 4.0 * 32 * 12);
  EXPECT_DOUBLE_EQ(ex.resident_weight_bytes, 8.0 * 6144 * 4.25 / 8);
  EXPECT_DOUBLE_EQ(g.distinct_experts_per_gpu, 3.5);
  // Layer 0 has a dense MLP, and no mixer before its attention (h = the embedding).
  EXPECT_NE(g.find("L001.mlp.gate_up_proj"), nullptr);
  EXPECT_EQ(g.find("L001.moe.experts"), nullptr);
  EXPECT_EQ(g.find("L001.attnres.pre_attn"), nullptr);
  // Mixer before layer 2's attention: embedding block + partial sum = 2 candidates, 6 FLOP per value.
  EXPECT_DOUBLE_EQ(op(g, "L002.attnres.pre_attn").flops, 6.0 * 2 * 2 * 64);
  EXPECT_DOUBLE_EQ(op(g, "head.attnres").flops, 6.0 * 2 * 4 * 64);  // 3 closed blocks + partial
  const Op& lm = op(g, "head.lm_head");
  EXPECT_DOUBLE_EQ(lm.flops, 2.0 * 2 * 64 * 256);
  EXPECT_DOUBLE_EQ(lm.read.weights, 64.0 * 256 * 2);
  // No communication on one GPU.
  for (const Op& o : g.ops) EXPECT_FALSE(o.collective.has_value()) << o.name();
}

TEST(OpGraph, OpNamesAreStableAndUnique) {
  const ModelConfig m = test::model("kimi-k3");
  const OpGraph g = build_op_graph(m, Phase::decode(8, 4096), Parallelism{8, 1, 8, 1}, k3_precision());
  std::set<std::string> names;
  for (const Op& o : g.ops) EXPECT_TRUE(names.insert(o.name()).second) << "duplicate " << o.name();
  for (const char* n :
       {"embed.lookup", "L001.kda.recurrent", "L004.mla.attn_decode", "L017.moe.experts", "L017.moe.router",
        "L017.attnres.pre_mlp", "L017.moe.dispatch", "L093.mla.attn_decode", "head.lm_head"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_EQ(g.find("L005.mla.attn_decode"), nullptr);  // layer 5 is KDA
}

// What the engine does differently (Op::runs_inside, OpGraph::engine_only): with Block AttnRes each norm runs
// in its mixer's range and each sublayer has a residual op; with plain residuals nothing is fused.
TEST(OpGraph, RecordsTheEnginesFusionsAndOwnRanges) {
  const ModelConfig twin = test::model("k3-twin");
  const OpGraph g = build_op_graph(twin, Phase::decode(2, 100), Parallelism{}, k3_precision());
  for (const Op& o : g.ops) {
    const bool norm = o.id == OpId::norm_attn_in || o.id == OpId::norm_mlp_in || o.id == OpId::head_norm;
    EXPECT_EQ(o.runs_inside.has_value(), norm) << o.name();
  }
  EXPECT_EQ(op(g, "L002.norm.attn_in").runs_inside, OpId::attnres_pre_attn);
  EXPECT_EQ(op(g, "L002.norm.mlp_in").runs_inside, OpId::attnres_pre_mlp);
  EXPECT_EQ(op(g, "head.norm").runs_inside, OpId::head_attnres);
  ASSERT_EQ(g.engine_only.size(), std::size_t(2 * twin.num_layers + 2));
  EXPECT_EQ(g.engine_only[0].name(), "L001.attn.residual");
  EXPECT_EQ(g.engine_only[1].name(), "L001.mlp.residual");
  EXPECT_EQ(g.engine_only.end()[-2].name(), "head.sample");
  EXPECT_EQ(g.engine_only.end()[-1].name(), "decode.advance");
  for (const OpRef& r : g.engine_only) EXPECT_EQ(g.find(r.name()), nullptr) << r.name();
  const OpGraph prefill = build_op_graph(twin, Phase::prefill(1, 64, 0), Parallelism{}, k3_precision());
  EXPECT_EQ(prefill.engine_only.back().name(), "head.sample");  // no decode.advance

  const ModelConfig linear = test::model("kimi-linear-48b-a3b");
  const OpGraph l = build_op_graph(linear, Phase::decode(2, 100), Parallelism{}, Precision{});
  for (const Op& o : l.ops) EXPECT_FALSE(o.runs_inside.has_value()) << o.name();
  // The bf16 experts' sum leaves through a conversion: those MLP sublayers keep a residual op.
  ASSERT_EQ(l.engine_only.size(), std::size_t(linear.count_layers(MlpKind::moe) + 2));
  EXPECT_EQ(l.engine_only[0].name(), "L002.mlp.residual");  // layer 1 is dense
}

// The engine runs a mixer and the norm after it as one kernel (attnres_mix_rmsnorm_bf16): the norm reads the mix from
// registers and launches nothing, so the pair's bytes and per-kernel overhead are counted once. Twin, 2 sequences,
// hidden 64, bf16: the norm writes 2 · 64 · 2 = 256 B and reads its 64 · 2 = 128 B weight. Layer 1 has no mixer before
// its attention norm (nothing to mix): that norm is a kernel of its own and reads its input.
TEST(OpGraph, FusedMixerAndNormCountedOnce) {
  const ModelConfig twin = test::model("k3-twin");
  const OpGraph g = build_op_graph(twin, Phase::decode(2, 100), Parallelism{}, k3_precision());
  for (const char* name : {"L002.norm.attn_in", "L002.norm.mlp_in", "head.norm"}) {
    SCOPED_TRACE(name);
    const Op& norm = op(g, name);
    EXPECT_EQ(norm.kernels, 0);
    EXPECT_DOUBLE_EQ(norm.read.activations, 0);
    EXPECT_DOUBLE_EQ(norm.read.weights, 128);
    EXPECT_DOUBLE_EQ(norm.written.activations, 256);
    EXPECT_DOUBLE_EQ(norm.bytes(), 384);
    EXPECT_DOUBLE_EQ(norm.flops, 4.0 * 2 * 64);
  }
  EXPECT_EQ(op(g, "L002.attnres.pre_attn").kernels, 1);
  EXPECT_EQ(g.find("L001.attnres.pre_attn"), nullptr);
  const Op& first = op(g, "L001.norm.attn_in");
  EXPECT_EQ(first.kernels, 1);
  EXPECT_DOUBLE_EQ(first.read.activations, 256);
  EXPECT_DOUBLE_EQ(first.bytes(), 640);
  // Plain residuals fuse nothing: every norm reads its input and is a kernel.
  const OpGraph l =
      build_op_graph(test::model("kimi-linear-48b-a3b"), Phase::decode(2, 100), Parallelism{}, Precision{});
  for (const Op& o : l.ops) {
    if (o.kind == OpKind::rmsnorm) {
      EXPECT_EQ(o.kernels, 1) << o.name();
    }
  }
}

TEST(OpGraph, TensorAndExpertParallelismSplitWorkAndAddCollectives) {
  const ModelConfig m = test::model("k3-twin");
  const OpGraph one = build_op_graph(m, Phase::decode(4, 100), Parallelism{}, k3_precision());
  const OpGraph tp2 = build_op_graph(m, Phase::decode(4, 100), Parallelism{2, 1, 2, 1}, k3_precision());
  EXPECT_DOUBLE_EQ(op(tp2, "L001.kda.qkv_proj").flops, op(one, "L001.kda.qkv_proj").flops / 2);
  EXPECT_DOUBLE_EQ(op(tp2, "L001.kda.recurrent").read.state, op(one, "L001.kda.recurrent").read.state / 2);
  // The MLA latent is shared by all heads: each TP rank reads the whole cache of its sequences.
  EXPECT_DOUBLE_EQ(op(tp2, "L004.mla.attn_decode").read.kv, op(one, "L004.mla.attn_decode").read.kv);
  const Op& ar = op(tp2, "L001.attn.all_reduce");
  ASSERT_TRUE(ar.collective);
  EXPECT_EQ(ar.collective->kind, CollectiveKind::all_reduce);
  EXPECT_DOUBLE_EQ(ar.collective->bytes, 4.0 * 64 * 2);
  EXPECT_EQ(ar.collective->group_size, 2);
  // EP 2: each rank dispatches its half of the 4 tokens x top-2 latent vectors of 64 bf16 values.
  const Op& d = op(tp2, "L002.moe.dispatch");
  EXPECT_EQ(d.collective->kind, CollectiveKind::all_to_all);
  EXPECT_DOUBLE_EQ(d.collective->bytes, 2.0 * 2 * 64 * 2);
  EXPECT_DOUBLE_EQ(op(tp2, "L002.moe.experts").resident_weight_bytes, 4.0 * 6144 * 4.25 / 8);
  // Attention DP 2: each group holds half the sequences.
  const OpGraph dp2 = build_op_graph(m, Phase::decode(4, 100), Parallelism{1, 2, 2, 1}, k3_precision());
  EXPECT_EQ(dp2.sequences_per_gpu, 2);
  EXPECT_DOUBLE_EQ(op(dp2, "L004.mla.attn_decode").read.kv, op(one, "L004.mla.attn_decode").read.kv / 2);
}

// moe_tp 2 (TP 2 without EP): each GPU runs all 4 tokens against half of every expert. The weighted sum over the
// top-2 is linear, so each GPU sums its partial outputs first and the all-reduce moves one latent row per token:
// 4 tokens x 64 values x 2 bytes, not top-2 times that; it follows the weighted sum's inputs, after the experts.
TEST(OpGraph, ExpertTensorParallelReducesOneRowPerToken) {
  const ModelConfig m = test::model("k3-twin");
  const OpGraph g = build_op_graph(m, Phase::decode(4, 100), Parallelism{2, 1, 1, 1}, k3_precision());
  const Op& ar = op(g, "L002.moe.expert_all_reduce");
  ASSERT_TRUE(ar.collective);
  EXPECT_EQ(ar.collective->kind, CollectiveKind::all_reduce);
  EXPECT_DOUBLE_EQ(ar.collective->bytes, 4.0 * 64 * 2);
  EXPECT_EQ(ar.collective->group_size, 2);
  std::vector<std::string> order;
  for (const Op& o : g.ops) {
    if (o.layer == 1 && o.name().find(".moe.") != std::string::npos) order.push_back(o.name());
  }
  const auto at = [&](const std::string& name) { return std::find(order.begin(), order.end(), name) - order.begin(); };
  EXPECT_LT(at("L002.moe.experts"), at("L002.moe.expert_all_reduce"));
  EXPECT_EQ(at("L002.moe.expert_all_reduce") + 1, at("L002.moe.latent_norm"));
}

TEST(OpGraph, ChunkedPrefillSumsChunksExactly) {
  const ModelConfig m = test::model("k3-twin");
  const OpGraph g = build_op_graph(m, Phase::prefill(1, 100, 0, 64), Parallelism{}, k3_precision());
  // Causal pairs 100*101/2 regardless of chunking; QK over 24 and PV over 16 dims per head.
  EXPECT_DOUBLE_EQ(op(g, "L004.mla.attn_prefill").flops, 2.0 * 4 * (24 + 16) * 5050);
  // Weights are read once per chunk (2 chunks).
  EXPECT_DOUBLE_EQ(op(g, "L001.kda.qkv_proj").read.weights, 2 * 64.0 * 192 * 2);
  const Op& scan = op(g, "L001.kda.chunk");
  EXPECT_EQ(scan.kind, OpKind::kda_chunk);
  EXPECT_EQ(efficiency_class(scan.kind), EfficiencyClass::chunked_scan);
  // The state pass walks each prefill chunk's 64-token KDA chunks in order: 1 + 1 (64 then 36 tokens), two kernels
  // (chunk products, state pass) per prefill chunk.
  EXPECT_DOUBLE_EQ(scan.serial_steps, 2.0);
  EXPECT_EQ(scan.kernels, 4);
  const OpGraph long_prompt = build_op_graph(m, Phase::prefill(1, 8192, 0, 8192), Parallelism{}, k3_precision());
  EXPECT_DOUBLE_EQ(op(long_prompt, "L001.kda.chunk").serial_steps, 128.0);  // 8192 / 64
  EXPECT_DOUBLE_EQ(op(long_prompt, "L001.kda.qkv_proj").serial_steps, 0.0);
  // Logits for the last token only.
  EXPECT_DOUBLE_EQ(op(g, "head.lm_head").flops, 2.0 * 1 * 64 * 256);
  // A cached prefix is read from the latent cache by the kv_b expansion.
  const OpGraph cached = build_op_graph(m, Phase::prefill(1, 10, 90, 64), Parallelism{}, k3_precision());
  EXPECT_DOUBLE_EQ(op(cached, "L004.mla.kv_b_proj").read.kv, 90.0 * 24 * 2);
  EXPECT_DOUBLE_EQ(op(cached, "L004.mla.attn_prefill").flops, 2.0 * 4 * 40 * (10 * 90 + 55));
}

TEST(OpGraph, VerifyScoresDraftTokensAgainstTheSameCache) {
  const ModelConfig m = test::model("k3-twin");
  const OpGraph g = build_op_graph(m, Phase::verify(2, 3, 100), Parallelism{}, k3_precision());
  const Op& attn = op(g, "L004.mla.attn_decode");
  EXPECT_DOUBLE_EQ(attn.flops, 2.0 * 4 * 40 * 2 * (4 * 100 + 10));
  EXPECT_DOUBLE_EQ(attn.read.kv, 2.0 * 104 * 24 * 2);  // read once for all 4 query tokens
  EXPECT_DOUBLE_EQ(op(g, "L001.kda.recurrent").read.state, 2.0 * 4 * 256 * 4);
}

TEST(OpGraph, DistinctExpertsFormula) {
  // K3-SPEC §5: about 120, 224 and 613 at T = 8, 16, 64.
  EXPECT_NEAR(expected_distinct_experts(896, 16, 8), 120.0, 0.5);
  EXPECT_NEAR(expected_distinct_experts(896, 16, 16), 224.0, 0.5);
  EXPECT_NEAR(expected_distinct_experts(896, 16, 64), 613.0, 0.5);
  EXPECT_NEAR(expected_distinct_experts(896, 16, 1), 16.0, 1e-9);
  EXPECT_NEAR(expected_distinct_experts(896, 16, 1e6), 896.0, 1e-9);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(896, 16, 0), 0.0);
}

TEST(OpGraph, PipelineStagesSendActivationsAndBlocks) {
  const ModelConfig m = test::model("k3-twin");
  const OpGraph g = build_op_graph(m, Phase::decode(2, 10), Parallelism{1, 1, 1, 3}, k3_precision());
  const Op& send = op(g, "L003.pp.send");
  EXPECT_EQ(send.collective->kind, CollectiveKind::send_recv);
  // Stage 0 holds layer indices 0-2; the next stage's first mixer sees the embedding block and the
  // partial sum, so 2 vectors of 64 bf16 values per token travel.
  EXPECT_DOUBLE_EQ(send.collective->bytes, 2.0 * 2 * 64 * 2);
  EXPECT_EQ(op(g, "L004.mla.attn_decode").stage, 1);
  EXPECT_EQ(op(g, "head.lm_head").stage, 2);
}

}  // namespace
}  // namespace k3

namespace k3 {
namespace {

TEST(OpGraph, ChunkedPrefillCountsOneCollectivePerChunk) {
  const ModelConfig m = test::model("k3-twin");
  Precision p;
  p.routed_experts = StorageFormat::mxfp4;
  const OpGraph g = build_op_graph(m, Phase::prefill(2, 100, 0, 64), Parallelism{2, 1, 2, 1}, p);
  const Op* ar = g.find("L001.attn.all_reduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->collective->calls, 2);                          // chunks of 64 and 36 tokens
  EXPECT_DOUBLE_EQ(ar->collective->bytes, 2.0 * 100 * 64 * 2);  // all 200 tokens' hidden states
  // Experts touched: the first (largest) chunk's 128 routed tokens.
  EXPECT_DOUBLE_EQ(g.distinct_experts_per_gpu, expected_distinct_experts(8, 2, 128) / 2);
}

}  // namespace
}  // namespace k3

namespace k3 {
namespace {

// The remaining op kinds on the twin (decode, batch 2, context 100, one GPU), by hand.
TEST(OpGraph, TwinDecodeEveryOtherOpKindByHand) {
  Precision p;
  p.routed_experts = StorageFormat::mxfp4;
  const OpGraph g = build_op_graph(test::model("k3-twin"), Phase::decode(2, 100), Parallelism{}, p);
  auto check = [&](const std::string& name, OpKind kind, double flops, double read_act, double written_act,
                   double read_weights) {
    const Op* op = g.find(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(op->kind, kind) << name;
    EXPECT_DOUBLE_EQ(op->flops, flops) << name;
    EXPECT_DOUBLE_EQ(op->read.activations, read_act) << name;
    EXPECT_DOUBLE_EQ(op->written.activations, written_act) << name;
    EXPECT_DOUBLE_EQ(op->read.weights, read_weights) << name;
  };
  // T = 2 tokens, h = 64, bf16 activations; KDA P = 64, 4 heads of 16, conv 4; MLA 4 heads.
  check("embed.lookup", OpKind::embedding, 0, 0, 2 * 64 * 2, 2 * 64 * 2);
  check("L001.norm.attn_in", OpKind::rmsnorm, 4 * 2 * 64, 2 * 64 * 2, 2 * 64 * 2, 64 * 2);
  // conv (2K) + SiLU (4) on q,k,v; L2 (4) on q,k; gate (8); beta (4 per head).
  check("L001.kda.preprocess", OpKind::kda_preprocess, 2 * (192 * 12 + 128 * 4 + 64 * 8 + 4 * 4), 2 * 260 * 2,
        2 * 260 * 2, 3 * 64 * 4 * 4 + 64 * 4 + 4 * 4);
  EXPECT_DOUBLE_EQ(g.find("L001.kda.preprocess")->read.state, 2 * 192 * 3 * 2);  // bf16 conv cache
  check("L001.kda.out_norm", OpKind::kda_output_norm, 2 * 64 * 8, 2 * 2 * 64 * 2, 2 * 64 * 2, 16 * 4);
  check("L001.mlp.act", OpKind::elementwise, 2 * 128 * 12, 2 * 2 * 128 * 2, 2 * 128 * 2, 0);  // SiTU-GLU
  check("L002.moe.router", OpKind::router, 2 * 2 * 64 * 8 + 2 * 8 * 4, 2 * 64 * 2, 2 * 2 * 8, 8 * 64 * 2);
  check("L002.moe.latent_down", OpKind::gemm, 2 * 2 * 64 * 64, 2 * 64 * 2, 2 * 64 * 2, 64 * 64 * 2);
  check("L002.moe.latent_norm", OpKind::elementwise, 2 * 64 * (2 * 2 + 4), 2 * 2 * 64 * 2, 2 * 64 * 2, 64 * 2);
  check("L002.moe.shared", OpKind::gemm, 2 * 2 * 64 * 192 + 2 * 64 * 12, 2 * 64 * 2 + 2 * 192 * 2,
        2 * 64 * 2 + 2 * 192 * 2, 64 * 192 * 2);
  EXPECT_EQ(g.find("L002.moe.experts")->kernels, 3);
  check("L004.mla.qkv_a_proj", OpKind::gemm, 2 * 2 * 64 * 56, 2 * 64 * 2, 2 * 56 * 2, 64 * 56 * 2);
  check("L004.mla.latent_norm", OpKind::rmsnorm, 4 * 2 * 48, 2 * 48 * 2, 2 * 48 * 2, 48 * 2);
  check("L004.mla.q_proj", OpKind::gemm, 2 * 2 * 32 * 96, 2 * 32 * 2, 2 * 96 * 2, 32 * 96 * 2);
  check("L004.mla.q_absorb", OpKind::gemm, 2 * 8 * 16 * 16, 8 * 16 * 2, 8 * 16 * 2, 4 * 16 * 16 * 2);
  check("L004.mla.v_absorb", OpKind::gemm, 2 * 8 * 16 * 16, 8 * 16 * 2, 8 * 16 * 2, 4 * 16 * 16 * 2);
  EXPECT_DOUBLE_EQ(g.find("L004.mla.q_absorb")->resident_weight_bytes, 4 * 32 * 16 * 2);  // all of kv_b
  check("L004.mla.out_gate_proj", OpKind::gemm, 2 * 2 * 64 * 64 + 4 * 2 * 64, 2 * 64 * 2, 2 * 64 * 2, 64 * 64 * 2);
  check("L004.mla.o_proj", OpKind::gemm, 2 * 2 * 64 * 64, 2 * 64 * 2, 2 * 64 * 2, 64 * 64 * 2);
  // Fused into the final AttnRes mixer's kernel: the mix comes from registers, and no kernel of its own.
  check("head.norm", OpKind::rmsnorm, 4 * 2 * 64, 0, 2 * 64 * 2, 64 * 2);
  EXPECT_EQ(g.find("head.norm")->kernels, 0);
  EXPECT_DOUBLE_EQ(g.find("head.lm_head")->written.activations, 2 * 256 * 4);  // fp32 logits
}

}  // namespace
}  // namespace k3
