// Scenarios: the shipped scenario loads with the checkpoint's precision defaults; `--set` edits and
// counterfactual overrides change what they say; and every bad input fails with an InputError that
// names the file and the key.
#include "core/scenario.h"
#include "core/error.h"
#include "expect_input_error.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#ifndef K3PERF_SOURCE_DIR
#error "tests/CMakeLists.txt defines K3PERF_SOURCE_DIR as the repository root"
#endif

namespace k3 {
namespace {

const std::string kScenarioFile = std::string(K3PERF_SOURCE_DIR) + "/scenarios/k3-h200x16-decode-128k.yaml";

DataPaths data() { return DataPaths::resolve(std::string(K3PERF_SOURCE_DIR) + "/scenarios"); }

using test::expect_input_error;

// A valid scenario; the error tests each change one line of it.
const std::string kBase = R"yaml(name: test scenario
model: kimi-k3
hardware: h200-sxm
gpus: 16
parallelism:
  tp: 8
  attention_dp: 2
  ep: 16
phase: decode
workload:
  batch: 16
  context_tokens: 131072
)yaml";

// kBase with one substring replaced (the substring must be there).
std::string edit(const std::string& from, const std::string& to, const std::string& base = kBase) {
  const std::size_t at = base.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' is not in the base scenario";
  if (at == std::string::npos) return base;
  return base.substr(0, at) + to + base.substr(at + from.size());
}

Scenario parse(const std::string& text, const std::vector<std::string>& sets = {}) {
  return parse_scenario(text, "<test>", data(), sets);
}

// ---------------------------------------------------------------------------------------------
// The shipped scenario file.

TEST(ScenarioFile, LoadsWithCheckpointDefaults) {
  const Scenario s = load_scenario(kScenarioFile, data());
  // Values the workload section is still being tuned on are read back from the file itself.
  const YAML::Node raw = YAML::LoadFile(kScenarioFile);

  EXPECT_EQ(s.source, kScenarioFile);
  EXPECT_EQ(s.name, raw["name"].as<std::string>());
  EXPECT_EQ(s.model.name, "kimi-k3");
  EXPECT_EQ(s.model.num_layers, 93);
  EXPECT_EQ(s.hardware.name, "H200 SXM");
  EXPECT_EQ(s.parallelism.tp, 8);
  EXPECT_EQ(s.parallelism.attention_dp, 2);
  EXPECT_EQ(s.parallelism.ep, 16);
  EXPECT_EQ(s.parallelism.pp, 1);
  EXPECT_EQ(s.parallelism.gpus(), 16);
  EXPECT_EQ(s.parallelism.moe_tp(), 1);
  // Precision defaults follow the checkpoint: MXFP4 routed experts, bf16 everywhere else.
  EXPECT_EQ(s.precision.routed_experts, StorageFormat::mxfp4);
  EXPECT_EQ(s.precision.weights, StorageFormat::bf16);
  EXPECT_EQ(s.precision.kv_cache, StorageFormat::bf16);
  EXPECT_EQ(s.precision.kda_state, StorageFormat::fp32);
  EXPECT_EQ(s.phase.kind, PhaseKind::decode);
  EXPECT_EQ(s.phase.batch, raw["workload"]["batch"].as<long long>());
  EXPECT_EQ(s.phase.context_tokens, 131072);
  EXPECT_EQ(s.phase.new_tokens, 1);
  EXPECT_TRUE(s.runtime.cuda_graphs);
  EXPECT_TRUE(s.overrides.empty());
}

TEST(ScenarioFile, Fp8CheckpointDefaultsToFp8Weights) {
  // DeepSeek-V3's FP8 checkpoint quantises attention and dense layers too.
  const Scenario s = parse(edit("model: kimi-k3", "model: deepseek-v3"));
  EXPECT_EQ(s.precision.weights, StorageFormat::fp8);
  EXPECT_EQ(s.precision.routed_experts, StorageFormat::fp8);
}

// ---------------------------------------------------------------------------------------------
// `--set` edits.

TEST(ScenarioSet, BatchChanges) {
  const Scenario s = load_scenario(kScenarioFile, data(), {"workload.batch=64"});
  EXPECT_EQ(s.phase.batch, 64);
}

// Each degree is read within limit::parallel_degree (2^32 used to wrap to 0 and divide by it), and their product
// within limit::gpus.
TEST(ScenarioSet, ParallelDegreesBeyondTheLimit) {
  for (const char* key : {"tp", "ep", "attention_dp", "pp"}) {
    SCOPED_TRACE(key);
    const std::string set = fmt::format("parallelism.{}=4294967296", key);
    expect_input_error([&] { load_scenario(kScenarioFile, data(), {set}); },
                       {"--set " + set, fmt::format("parallelism.{}", key), "4294967296 exceeds 65536"});
  }
  // Without a `gpus:` to compare with, validate() bounds the product.
  expect_input_error(
      [&] {
        parse(edit("gpus: 16\n", ""), {"parallelism.attention_dp=65536", "parallelism.pp=4096"});
      },
      {"tp 8 x attention_dp 65536 x pp 4096 = 2147483648 exceeds 1048576, the limit on GPUs"});
  expect_input_error([&] { load_scenario(kScenarioFile, data(), {"workload.context_tokens=9223372036854775807"}); },
                     {"workload.context_tokens", "9223372036854775807 exceeds 1073741824"});
  expect_input_error([&] { load_scenario(kScenarioFile, data(), {"workload.batch=1000000000000000000"}); },
                     {"workload.batch", "exceeds 1048576"});
}

// A hardware or model name longer than the file system allows is a name that is not found, not a file-system error
// escaping the loader (found by the scenario_yaml and set fuzz targets).
TEST(ScenarioSet, ANameTooLongForAFileIsNotFound) {
  const std::string name(5000, 'x');
  expect_input_error([&] { load_scenario(kScenarioFile, data(), {"hardware=" + name}); }, {"hardware"});
  expect_input_error([&] { load_scenario(kScenarioFile, data(), {"model=" + name}); }, {"model"});
}

// A layout that disagrees with `gpus:` is named as such, before what it breaks downstream (7 does not divide the
// heads either); with degrees past 2^31 in product the message keeps the exact figure.
TEST(ScenarioSet, GpusCheckedAgainstTheLayoutFirst) {
  expect_input_error([&] { load_scenario(kScenarioFile, data(), {"parallelism.tp=7"}); },
                     {"key 'gpus'", "16 GPUs given, but tp 7 x attention_dp 2 x pp 1 = 14"});
  expect_input_error(
      [&] {
        load_scenario(kScenarioFile, data(), {"parallelism.attention_dp=65536", "parallelism.pp=65536"});
      },
      {"key 'gpus'", "= 34359738368"});
}

TEST(ScenarioSet, TpChanges) {
  // tp 4 x attention_dp 4 keeps the 16 GPUs the file declares.
  const Scenario s = load_scenario(kScenarioFile, data(), {"parallelism.tp=4", "parallelism.attention_dp=4"});
  EXPECT_EQ(s.parallelism.tp, 4);
  EXPECT_EQ(s.parallelism.attention_dp, 4);
  EXPECT_EQ(s.parallelism.gpus(), 16);
}

TEST(ScenarioSet, LaterSetWins) {
  const Scenario s = parse(kBase, {"workload.batch=32", "workload.batch=48"});
  EXPECT_EQ(s.phase.batch, 48);
}

TEST(ScenarioSet, NewNestedKeyPath) {
  // Neither "overrides" nor "runtime" exists in the base text: the maps are created.
  const Scenario s =
      parse(kBase, {"overrides.attention=all_mla", "runtime.memory_utilization=0.8", "precision.routed_experts=bf16"});
  EXPECT_EQ(s.model.count_layers(AttentionKind::mla), 93);
  EXPECT_DOUBLE_EQ(s.runtime.memory_utilization, 0.8);
  EXPECT_EQ(s.precision.routed_experts, StorageFormat::bf16);
}

TEST(ScenarioSet, SetValueIsCheckedLikeFileValue) {
  expect_input_error([] { parse(kBase, {"workload.batch=0"}); }, {"<test>", "workload.batch"});
}

TEST(ScenarioSet, MalformedAssignments) {
  for (const std::string bad : {"workload.batch", "=64", "workload..batch=64", ".batch=64", "workload.=64"}) {
    SCOPED_TRACE(bad);
    expect_input_error([&] { parse(kBase, {bad}); }, {"--set", "'" + bad + "'"});
  }
}

// ---------------------------------------------------------------------------------------------
// Counterfactual overrides.

TEST(ScenarioOverrides, AllMla) {
  const Scenario s = parse(kBase + "overrides:\n  attention: all_mla\n");
  EXPECT_EQ(s.model.count_layers(AttentionKind::mla), 93);
  EXPECT_EQ(s.model.count_layers(AttentionKind::kda), 0);
  EXPECT_EQ(s.overrides, (std::vector<std::string>{"attention: all_mla"}));
}

TEST(ScenarioOverrides, AllKda) {
  const Scenario s = parse(kBase + "overrides:\n  attention: all_kda\n");
  EXPECT_EQ(s.model.count_layers(AttentionKind::kda), 93);
  EXPECT_EQ(s.overrides, (std::vector<std::string>{"attention: all_kda"}));
}

TEST(ScenarioOverrides, AsPublishedChangesNothing) {
  const Scenario s = parse(kBase + "overrides:\n  attention: as_published\n  attnres: true\n");
  EXPECT_EQ(s.model.count_layers(AttentionKind::mla), 24);
  EXPECT_EQ(s.model.residual, ResidualKind::block_attnres);
  EXPECT_TRUE(s.overrides.empty());
}

TEST(ScenarioOverrides, NoAttnRes) {
  const Scenario s = parse(kBase + "overrides:\n  attnres: false\n");
  EXPECT_EQ(s.model.residual, ResidualKind::plain);
  EXPECT_EQ(s.model.attnres_candidates_final(), 0);
  EXPECT_EQ(s.model.count_layers(AttentionKind::mla), 24);  // attention untouched
  EXPECT_EQ(s.overrides, (std::vector<std::string>{"attnres: false"}));
}

TEST(ScenarioOverrides, BothRecordedInOrder) {
  const Scenario s = parse(kBase + "overrides:\n  attention: all_mla\n  attnres: false\n");
  EXPECT_EQ(s.model.count_layers(AttentionKind::mla), 93);
  EXPECT_EQ(s.model.residual, ResidualKind::plain);
  EXPECT_EQ(s.overrides, (std::vector<std::string>{"attention: all_mla", "attnres: false"}));
}

TEST(ScenarioOverrides, UnknownAttentionKind) {
  expect_input_error([] { parse(kBase + "overrides:\n  attention: all_gqa\n"); },
                     {"<test>", "overrides.attention", "all_gqa"});
}

// ---------------------------------------------------------------------------------------------
// Bad inputs: each names the file ("<test>") and the key.

TEST(ScenarioErrors, BaseIsValid) {
  // The baseline for the edits below.
  const Scenario s = parse(kBase);
  EXPECT_EQ(s.name, "test scenario");
  EXPECT_EQ(s.phase.batch, 16);
}

TEST(ScenarioErrors, YamlSyntaxError) {
  expect_input_error([] { parse(edit("  batch: 16", "  batch: [16")); }, {"<test>", "YAML syntax error"});
}

TEST(ScenarioErrors, MissingModel) {
  expect_input_error([] { parse(edit("model: kimi-k3\n", "")); }, {"<test>", "'model'", "missing"});
}

TEST(ScenarioErrors, UnknownModel) {
  expect_input_error([] { parse(edit("model: kimi-k3", "model: kimi-k9")); },
                     {"<test>", "'model'", "kimi-k9", "kimi-k3"});
}

TEST(ScenarioErrors, UnknownHardware) {
  expect_input_error([] { parse(edit("hardware: h200-sxm", "hardware: tpu-v9")); },
                     {"<test>", "'hardware'", "tpu-v9", "h200-sxm"});
}

TEST(ScenarioErrors, BadBatch) {
  for (const std::string bad : {"-4", "0", "many"}) {
    SCOPED_TRACE(bad);
    expect_input_error([&] { parse(edit("batch: 16", "batch: " + bad)); }, {"<test>", "workload.batch", bad});
  }
}

TEST(ScenarioErrors, UnknownPhase) {
  expect_input_error([] { parse(edit("phase: decode", "phase: train")); }, {"<test>", "'phase'", "train"});
}

TEST(ScenarioErrors, KvCacheInt8) {
  expect_input_error([] { parse(kBase + "precision:\n  kv_cache: int8\n"); }, {"<test>", "precision.kv_cache", "int8"});
}

TEST(ScenarioErrors, TpDoesNotDivideHeads) {
  // 5 x 2 = 10 GPUs, so only the head split is wrong (96 % 5 != 0).
  expect_input_error([] { parse(edit("gpus: 16", "gpus: 10", edit("tp: 8", "tp: 5"))); },
                     {"<test>", "parallelism.tp", "96"});
}

TEST(ScenarioErrors, EpDoesNotDivideExperts) {
  // ep 3 divides tp 3 x attention_dp 1 but not the 896 experts.
  const std::string text =
      edit("gpus: 16", "gpus: 3", edit("  tp: 8\n  attention_dp: 2\n  ep: 16", "  tp: 3\n  attention_dp: 1\n  ep: 3"));
  expect_input_error([&] { parse(text); }, {"<test>", "parallelism.ep", "896"});
}

TEST(ScenarioErrors, AttentionDpWithoutExpertParallelism) {
  expect_input_error([] { parse(edit("ep: 16", "ep: 1")); }, {"<test>", "attention_dp", "ep > 1"});
}

TEST(ScenarioErrors, GpusInconsistentWithParallelism) {
  expect_input_error([] { parse(edit("gpus: 16", "gpus: 8")); }, {"<test>", "'gpus'", "16"});
}

TEST(ScenarioErrors, BeyondMaxPositions) {
  // 1,048,576 positions: 1,048,575 cached + 1 new fits, one more does not.
  EXPECT_NO_THROW(parse(edit("context_tokens: 131072", "context_tokens: 1048575")));
  expect_input_error([] { parse(edit("context_tokens: 131072", "context_tokens: 1048576")); },
                     {"<test>", "workload.context_tokens", "1048576"});
}

TEST(ScenarioErrors, MemoryUtilizationAboveOne) {
  expect_input_error([] { parse(kBase + "runtime:\n  memory_utilization: 1.5\n"); },
                     {"<test>", "runtime.memory_utilization", "1.5"});
}

TEST(ScenarioErrors, BatchSmallerThanAttentionDp) {
  expect_input_error([] { parse(edit("batch: 16", "batch: 1")); }, {"<test>", "workload.batch", "attention_dp"});
}

TEST(ScenarioErrors, VerifyWithoutDraftTokens) {
  expect_input_error([] { parse(edit("phase: decode", "phase: verify")); },
                     {"<test>", "workload.draft_tokens", "missing"});
}

TEST(ScenarioErrors, DecodeWithTwoNewTokens) {
  expect_input_error([] { parse(kBase + "  new_tokens: 2\n"); }, {"<test>", "workload.new_tokens"});
}

// ---------------------------------------------------------------------------------------------
// Phases: from YAML and from the factories.

TEST(ScenarioPhase, VerifyFromYaml) {
  const Scenario s = parse(edit("phase: decode", "phase: verify") + "  draft_tokens: 3\n");
  EXPECT_EQ(s.phase.kind, PhaseKind::verify);
  EXPECT_EQ(s.phase.new_tokens, 4);
}

TEST(ScenarioPhase, PrefillFromYaml) {
  const Scenario s =
      parse(edit("phase: decode", "phase: prefill") + "  new_tokens: 8192\n  prefill_chunk_tokens: 4096\n");
  EXPECT_EQ(s.phase.kind, PhaseKind::prefill);
  EXPECT_EQ(s.phase.new_tokens, 8192);
  EXPECT_EQ(s.phase.prefill_chunk_tokens, 4096);
  EXPECT_EQ(s.phase.context_tokens, 131072);
}

TEST(ScenarioPhase, Factories) {
  const Phase v = Phase::verify(4, 3, 1000);
  EXPECT_EQ(v.kind, PhaseKind::verify);
  EXPECT_EQ(v.batch, 4);
  EXPECT_EQ(v.new_tokens, 4);  // 3 drafts + 1
  EXPECT_EQ(v.context_tokens, 1000);

  const Phase d = Phase::decode(32, 500);
  EXPECT_EQ(d.kind, PhaseKind::decode);
  EXPECT_EQ(d.batch, 32);
  EXPECT_EQ(d.new_tokens, 1);
  EXPECT_EQ(d.context_tokens, 500);

  const Phase p = Phase::prefill(2, 8000, 100, 2048);
  EXPECT_EQ(p.kind, PhaseKind::prefill);
  EXPECT_EQ(p.new_tokens, 8000);
  EXPECT_EQ(p.context_tokens, 100);
  EXPECT_EQ(p.prefill_chunk_tokens, 2048);
  EXPECT_EQ(to_string(PhaseKind::verify), "verify");
}

}  // namespace
}  // namespace k3

namespace k3 {
namespace {

// Errors point at the line of the file, or at the --set assignment that supplied the value.
TEST(ScenarioErrorLocation, FileValuesNameTheirLine) {
  // kBase line 11 is "  batch: 16".
  expect_input_error([] { parse(edit("batch: 16", "batch: many")); }, {"<test>:11:", "workload.batch", "many"});
}

TEST(ScenarioErrorLocation, SetValuesNameTheAssignment) {
  expect_input_error([] { parse(kBase, {"workload.batch=0"}); },
                     {"<test> (--set workload.batch=0)", "workload.batch", "positive"});
}

TEST(ScenarioErrors, UnknownKeysAreRejectedAtEveryLevel) {
  expect_input_error([] { parse(kBase + "batchsize: 4\n"); }, {"<test>", "batchsize", "unknown key"});
  expect_input_error([] { parse(edit("batch: 16", "bach: 16")); }, {"workload.bach", "unknown key", "batch"});
  expect_input_error([] { parse(kBase, {"precision.kv_cash=fp8"}); }, {"precision.kv_cash", "unknown key"});
  expect_input_error([] { parse(kBase, {"runtime.graphs=false"}); }, {"runtime.graphs", "cuda_graphs"});
}

}  // namespace
}  // namespace k3
