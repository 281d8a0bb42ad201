// Scenario -> engine run (engine/session/run_plan.h), on the CPU: the shapes, the layer slice and the
// prediction scenarios a run is compared with, and an InputError naming the key for what the engine
// cannot run.
#include "engine/session/run_plan.h"

#include "core/atomic_file.h"
#include "core/op_graph.h"
#include "engine/session/run_session.h"
#include "engine/weights/synthetic_checkpoint.h"
#include "expect_input_error.h"
#include "sim/memory.h"
#include "sim/predict.h"

#include <gtest/gtest.h>

namespace k3::session {
namespace {

using test::expect_input_error;

const std::string kData = std::string(K3PERF_SOURCE_DIR) + "/scenarios";
DataPaths data() { return DataPaths::resolve(kData); }

Scenario scenario(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return parse_scenario(yaml, "<test>", data(), sets);
}

const std::string kDecode = R"(
model: kimi-k3
hardware: h200-sxm
phase: decode
workload: {batch: 8, context_tokens: 131072}
overrides: {layers: 4}
)";

TEST(RunPlan, DecodeScenarioSetsTheEngineShape) {
  const RunPlan p = plan_run(scenario(kDecode), EngineKnobs{});
  EXPECT_EQ(p.subject, RunPhase::decode);
  EXPECT_EQ(p.options.model_path, kData + "/models/kimi-k3.json");
  EXPECT_EQ(p.options.layers, 4);
  EXPECT_EQ(p.options.batch, 8);
  EXPECT_EQ(p.options.prompt_tokens, 128);      // prefilled for real
  EXPECT_EQ(p.options.context_tokens, 131072);  // the rest a synthetic prefix
  EXPECT_EQ(p.options.chunk_tokens, 4096);
  EXPECT_TRUE(p.options.use_cuda_graph);
  EXPECT_EQ(p.options.weights, "random");
  EXPECT_TRUE(p.options.tile_experts);
  EXPECT_EQ(p.options.warmup_tokens, -1);  // the whole first prompt
}

TEST(RunPlan, ThePredictionIsTheScenariosOwn) {
  const Scenario s = scenario(kDecode);
  const RunPlan p = plan_run(s, EngineKnobs{});
  // `k3perf predict` of the scenario and the decode step predicted beside the run are one number.
  EXPECT_EQ(to_json(predict(p.decode)).dump(), to_json(predict(s)).dump());
  EXPECT_EQ(p.decode.model.num_layers, 4);
  EXPECT_EQ(p.prefill.phase.kind, PhaseKind::prefill);
  EXPECT_EQ(p.prefill.phase.new_tokens, 128);
  EXPECT_EQ(p.prefill.phase.prefill_chunk_tokens, 4096);
  EXPECT_FALSE(p.prefill.runtime.cuda_graphs);  // the engine prefills eagerly
  runtime::RunSummary summary;
  predict_beside(p, summary);
  EXPECT_EQ(summary.predicted_hardware, s.hardware.name);
  EXPECT_DOUBLE_EQ(summary.predicted_step_ms, predict(s).step_ms());
  EXPECT_GT(summary.predicted_prefill_ms, 0);
}

TEST(RunPlan, ShortContextCapsThePrompt) {
  const RunPlan p = plan_run(scenario(kDecode, {"workload.context_tokens=100", "runtime.cuda_graphs=false"}), {});
  EXPECT_EQ(p.options.prompt_tokens, 100);
  EXPECT_EQ(p.options.context_tokens, 0);  // decode right after the prompt
  EXPECT_FALSE(p.options.use_cuda_graph);
  EXPECT_EQ(p.decode.phase.context_tokens, 100);
}

TEST(RunPlan, KnobsPassThrough) {
  EngineKnobs k;
  k.weights = "random:7";
  k.prompt_tokens = 256;
  k.decode_tokens = 24;
  k.chunk_tokens = 512;
  k.page_tokens = 32;
  k.prompt_seed = 9;
  k.tile_experts = false;
  k.warmup_tokens = 8192;
  const RunPlan p = plan_run(scenario(kDecode), k);
  EXPECT_EQ(p.options.weights, "random:7");
  EXPECT_EQ(p.options.prompt_tokens, 256);
  EXPECT_EQ(p.options.decode_tokens, 24);
  EXPECT_EQ(p.options.chunk_tokens, 512);
  EXPECT_EQ(p.options.page_tokens, 32);
  EXPECT_EQ(p.options.prompt_seed, 9u);
  EXPECT_FALSE(p.options.tile_experts);
  EXPECT_EQ(p.options.warmup_tokens, 8192);
  EXPECT_EQ(p.prefill.phase.new_tokens, 256);
  EXPECT_EQ(p.prefill.phase.prefill_chunk_tokens, 512);
}

TEST(RunPlan, PrefillScenario) {
  const Scenario s = scenario(R"(
model: kimi-k3
hardware: h200-sxm
phase: prefill
workload: {batch: 1, new_tokens: 32768, prefill_chunk_tokens: 32768}
runtime: {cuda_graphs: false}
)");
  const RunPlan p = plan_run(s, EngineKnobs{});
  EXPECT_EQ(p.subject, RunPhase::prefill);
  EXPECT_EQ(p.options.layers, 0);  // every layer
  EXPECT_EQ(p.options.batch, 1);
  EXPECT_EQ(p.options.prompt_tokens, 32768);
  EXPECT_EQ(p.options.chunk_tokens, 32768);
  EXPECT_EQ(p.options.context_tokens, 0);
  EXPECT_EQ(to_json(predict(p.prediction_for(RunPhase::prefill))).dump(), to_json(predict(s)).dump());
  EXPECT_EQ(p.decode.phase.kind, PhaseKind::decode);
  EXPECT_EQ(p.decode.phase.context_tokens, 32768);
}

// The all-MLA counterfactual (CLAIMS P5/P6) runs as the simulator predicts it: every layer MLA.
TEST(RunPlan, AllMlaCounterfactualRunsEveryLayerMla) {
  const RunPlan p = plan_run(scenario(kDecode, {"overrides.attention=all_mla"}), EngineKnobs{});
  EXPECT_EQ(p.options.attention, "all_mla");
  EXPECT_EQ(p.decode.model.count_layers(AttentionKind::mla), p.decode.model.num_layers);
  EXPECT_EQ(plan_run(scenario(kDecode, {}), EngineKnobs{}).options.attention, "as_published");
}

// The slice the scenario predicts is the one the engine runs: overrides.layers equals the engine's
// slice of the config.json.
TEST(RunPlan, LayerSliceEqualsTheEngines) {
  const std::string path = kData + "/models/kimi-k3.json";
  for (int layers : {1, 4, 13, 50}) {
    SCOPED_TRACE(layers);
    const Scenario s = scenario(kDecode, {fmt::format("overrides.layers={}", layers)});
    const ModelConfig engine = parse_model_config(weights::slice_config_json(read_file(path), path, layers), path);
    EXPECT_EQ(s.model.num_layers, engine.num_layers);
    EXPECT_EQ(s.model.layer_attention, engine.layer_attention);
    EXPECT_EQ(s.model.layer_mlp, engine.layer_mlp);
    EXPECT_EQ(s.model.count_layers(AttentionKind::mla), engine.count_layers(AttentionKind::mla));
  }
  expect_input_error([] { scenario(kDecode, {"overrides.layers=94"}); }, {"overrides.layers", "93 layers"});
  expect_input_error([] { scenario(kDecode, {"overrides.layers=0"}); }, {"overrides.layers"});
}

TEST(RunPlan, WhatTheEngineCannotRunNamesTheKey) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"parallelism.tp=2", "parallelism.attention_dp=2", "parallelism.ep=4", "gpus=4"},
       {"parallelism.attention_dp", "2", "one attention group"}},
      {{"parallelism.pp=2", "gpus=2"}, {"parallelism.pp", "2", "pipeline"}},
      {{"parallelism.tp=8", "parallelism.sequence_parallel=true", "gpus=8"}, {"parallelism.sequence_parallel", "true"}},
      {{"parallelism.tp=8", "parallelism.ep=2", "gpus=8"}, {"parallelism.ep", "2", "moe_tp 4"}},
      {{"precision.kv_cache=fp8"}, {"precision.kv_cache", "fp8", "bf16"}},
      {{"precision.routed_experts=bf16"}, {"precision.routed_experts", "bf16", "mxfp4"}},
      {{"precision.kda_state=bf16"}, {"precision.kda_state", "bf16", "fp32"}},
      {{"precision.weights=fp8"}, {"precision.weights", "fp8"}},
      {{"precision.gemm_compute=fp8"}, {"precision.gemm_compute", "fp8"}},
      {{"overrides.attnres=false"}, {"overrides.attnres", "false"}},
      {{"phase=verify", "workload.draft_tokens=3"}, {"'phase'", "verify", "no verify step"}},
      {{"workload.context_tokens=0"}, {"workload.context_tokens", "0", "prompt"}},
      {{"phase=prefill", "workload.new_tokens=1024"}, {"workload.batch", "8", "one sequence at a time"}},
      {{"phase=prefill", "workload.batch=1", "workload.new_tokens=1024", "workload.context_tokens=512"},
       {"workload.context_tokens", "512", "prefix cache"}},
  };
  for (const auto& [sets, fragments] : cases) {
    SCOPED_TRACE(sets.front());
    const Scenario s = scenario(kDecode, sets);
    try {
      plan_run(s, EngineKnobs{});
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("<test>"), std::string::npos) << e.what();
      for (const std::string& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  }
}

// K3 at TP16/EP16 (the 16-GPU scenario with one attention group), rank 0: the plan runs the rank's share, and its
// memory is the simulator's per-GPU weights, KV and state (the weights less the 28672 bytes of layer 1's
// pre-attention AttnRes norm and query that the op graph leaves out, docs/parallel.md).
TEST(RunPlan, K3Tp16Rank0MemoryIsTheSimulatorsPerGpu) {
  const std::string file = kData + "/k3-h200x16-decode-128k.yaml";
  const Scenario s = load_run_scenario(file, "", "", data(), {"parallelism.tp=16", "parallelism.attention_dp=1"});
  EngineKnobs k;
  k.decode_tokens = 2;  // the cache then holds context + 2 tokens per sequence
  const RunPlan p = plan_run(s, k);
  EXPECT_EQ(p.options.parallelism.tp, 16);
  EXPECT_EQ(p.options.parallelism.ep, 16);
  EXPECT_EQ(p.options.rank, 0);
  EXPECT_TRUE(p.options.use_cuda_graph);  // the dispatch's counts are the uniform router's: known on the host
  EXPECT_TRUE(p.decode.runtime.cuda_graphs);
  ASSERT_EQ(p.memory.items.size(), 3u);
  const MemoryBreakdown sim = estimate_memory(s, build_op_graph(s.model, s.phase, s.parallelism, s.precision));
  const double weights = double(p.memory.items[0].bytes), kv = double(p.memory.items[1].bytes),
               state = double(p.memory.items[2].bytes);
  EXPECT_GE(weights, sim.weights_bytes);
  EXPECT_LE(weights - sim.weights_bytes, 28672.0);
  // The simulator's KV holds context + 1 tokens per sequence, the run's cache context + decode tokens.
  EXPECT_DOUBLE_EQ(kv, sim.kv_bytes / double(s.phase.context_tokens + 1) * double(s.phase.context_tokens + 2));
  EXPECT_DOUBLE_EQ(state, sim.kda_state_bytes);
  EXPECT_EQ(sim.sequences, 4);
  EXPECT_NE(p.memory.items[0].what.find("rank 0's"), std::string::npos) << p.memory.items[0].what;
  // Rank 15 holds as much; rank 16 is outside the layout.
  k.rank = 15;
  EXPECT_EQ(plan_run(s, k).memory.total_bytes(), p.memory.total_bytes());
  k.rank = 16;
  expect_input_error([&] { plan_run(s, k); }, {"rank 16", "16 GPUs"});
}

TEST(RunPlan, RankRunsThatCannotBeNameTheKeyAndCheckpointsAreAccepted) {
  const std::string file = kData + "/k3-h200x16-decode-128k.yaml";
  EngineKnobs k;
  // TP8/EP8: 2 x 56 experts per GPU do not fit in an H200.
  const Scenario tp8 = load_run_scenario(
      file, "", "", data(), {"parallelism.tp=8", "parallelism.attention_dp=1", "parallelism.ep=8", "gpus=8"});
  expect_input_error([&] { plan_run(tp8, k); }, {file, "parallelism.tp", "8", "rank 0 of 8", "GiB", "weights"});
  const Scenario tp16 = load_run_scenario(file, "", "", data(), {"parallelism.tp=16", "parallelism.attention_dp=1"});
  // A rank loads its slices of a published-layout checkpoint as well as it generates random shards.
  k.weights = "/some/checkpoint";
  EXPECT_EQ(plan_run(tp16, k).options.weights, "/some/checkpoint");
}

TEST(RunPlan, KnobErrors) {
  EngineKnobs k;
  k.decode_tokens = 1;
  expect_input_error([&] { plan_run(scenario(kDecode), k); }, {"decode tokens 1", "at least 2"});
}

TEST(RunScenario, ShorthandFlagsBuildAScenario) {
  const Scenario s = load_run_scenario("", "kimi-k3", "h200-sxm", data(),
                                       {"workload.batch=4", "workload.context_tokens=8192", "overrides.layers=4"});
  EXPECT_EQ(s.source, "<k3perf run>");
  EXPECT_EQ(s.phase.kind, PhaseKind::decode);
  EXPECT_EQ(s.phase.batch, 4);
  EXPECT_EQ(s.phase.context_tokens, 8192);
  EXPECT_EQ(s.model.num_layers, 4);
  EXPECT_EQ(s.hardware.name, load_hardware_by_name("h200-sxm", data().hardware_dir).name);
  // Without flags: batch 1 after the default prompt.
  const Scenario d = load_run_scenario("", "kimi-k3", "h200-sxm", data(), {});
  EXPECT_EQ(d.phase.batch, 1);
  EXPECT_EQ(d.phase.context_tokens, EngineKnobs{}.prompt_tokens);
  expect_input_error([] { load_run_scenario("", "", "h200-sxm", data(), {}); }, {"no model", "--model"});
}

TEST(RunScenario, FlagsEditAScenarioFile) {
  const std::string file = kData + "/k3-h200x16-decode-128k.yaml";
  const Scenario s = load_run_scenario(
      file, "", "h200-sxm", data(), {"parallelism.tp=1", "parallelism.ep=1", "parallelism.attention_dp=1", "gpus=1"});
  EXPECT_EQ(s.source, file);
  EXPECT_EQ(s.parallelism.gpus(), 1);
  // The shipped 16-GPU scenario as it is (two attention groups): the engine says why not.
  expect_input_error([&] { plan_run(load_run_scenario(file, "", "", data(), {}), EngineKnobs{}); },
                     {file, "parallelism.attention_dp"});
}

TEST(RunSession, OutputsThatCannotGoTogether) {
  const RunPlan p = plan_run(scenario(kDecode), EngineKnobs{});
  RunOutputs both;
  both.trace_path = "t.json.gz";
  both.counters_path = "c.json";
  expect_input_error([&] { run_session(p, both); }, {"--trace and --counters"});
  RunOutputs no_hardware;
  no_hardware.predict = false;
  no_hardware.prediction_path = "p.json";
  expect_input_error([&] { run_session(p, no_hardware); }, {"--prediction-json needs --hardware"});
}

TEST(RunSession, SummaryTextAndJson) {
  runtime::RunSummary s;
  s.gpu = "test GPU";
  s.model = "kimi-k3";
  s.layers = 4;
  s.options.batch = 2;
  s.options.prompt_tokens = 128;
  s.options.context_tokens = 1024;
  s.prefill_ms = {2.0, 4.0, 3.0};
  s.median_prefill_ms = 3.0;
  s.median_step_ms = 1.5;
  s.predicted_hardware = "H200";
  s.predicted_step_ms = 1.0;
  s.predicted_prefill_ms = 2.0;
  const std::string text = summary_text(s);
  EXPECT_NE(text.find("kimi-k3 on test GPU: 4 layers, batch 2, prompt 128 tokens, decode at 1024 tokens"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("decode step 1.000 ms (measured 1.50x), prefill 2.000 ms (measured 1.50x)"), std::string::npos)
      << text;
  const nlohmann::json j = nlohmann::json::parse(summary_json(s));
  EXPECT_EQ(j["context_tokens"], 1024);
  EXPECT_DOUBLE_EQ(j["predicted"]["measured_over_predicted_prefill"].get<double>(), 1.5);
}

}  // namespace
}  // namespace k3::session
