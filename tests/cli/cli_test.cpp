// Runs the built k3perf binary end to end: outputs, exit codes and error messages.
#include "perfetto_drop_rule.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int status;
  std::string output;
};

CommandResult run(const std::string& args) {
  const std::string cmd = std::string(K3PERF_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  const int status = pipe ? pclose(pipe) : -1;
  return {WEXITSTATUS(status), out};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kScenario = std::string(K3PERF_SOURCE_DIR) + "/scenarios/k3-h200x16-decode-128k.yaml";

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("k3perf_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CliTest, DefaultRunPrintsSummary) {
  const CommandResult r = run("");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* needle : {"TPOT", "KDA layers", "MLA layers", "memory per GPU", "top 15 ops", "fits"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

TEST_F(CliTest, PredictWritesIdenticalJsonAndCsv) {
  const fs::path a = dir_ / "a.json", b = dir_ / "b.json", csv = dir_ / "ops.csv";
  CommandResult r = run("predict " + kScenario + " --json " + a.string() + " --csv " + csv.string());
  ASSERT_EQ(r.status, 0) << r.output;
  r = run("predict " + kScenario + " --json " + b.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp(a), slurp(b));
  EXPECT_NE(slurp(a).find("\"step_time_us\""), std::string::npos);
  const std::string table = slurp(csv);
  EXPECT_EQ(table.rfind("name,kind,layer,bound,", 0), 0u);
  EXPECT_NE(table.find("L004.mla.attn_decode,mla_attention,4,"), std::string::npos);
  // No temporary files are left beside the outputs.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 3);
}

TEST_F(CliTest, SetOverridesChangeThePrediction) {
  const CommandResult small = run("predict " + kScenario + " --set workload.batch=2 --top 0");
  const CommandResult big =
      run("predict " + kScenario + " --set workload.batch=4 --set workload.context_tokens=1024 --top 0");
  ASSERT_EQ(small.status, 0) << small.output;
  ASSERT_EQ(big.status, 0) << big.output;
  EXPECT_NE(small.output.find("batch 2 "), std::string::npos);
  EXPECT_NE(big.output.find("context 1024 tokens"), std::string::npos);
  // --set before the scenario path takes one value each.
  const CommandResult before = run("predict --set workload.batch=2 " + kScenario + " --top 0");
  ASSERT_EQ(before.status, 0) << before.output;
  EXPECT_NE(before.output.find("batch 2 "), std::string::npos);
}

TEST_F(CliTest, BadInputsGiveClearErrorsAndKeepExistingOutputs) {
  const fs::path out = dir_ / "keep.json";
  std::ofstream(out) << "previous";
  CommandResult r = run("predict " + kScenario + " --set workload.batch=-3 --json " + out.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("workload.batch"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(out), "previous");

  r = run("predict " + (dir_ / "missing.yaml").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("missing.yaml"), std::string::npos) << r.output;

  const fs::path bad = dir_ / "bad.yaml";
  std::ofstream(bad) << "model: kimi-k3\nhardware: h200-sxm\nworkload: {batch: [1\n";
  r = run("predict " + bad.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("bad.yaml"), std::string::npos) << r.output;

  r = run("predict " + kScenario + " --set hardware=tpu-v9");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("tpu-v9"), std::string::npos) << r.output;

  r = run("predict " + kScenario + " --json " + (dir_ / "no_such_dir" / "x.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("no_such_dir"), std::string::npos) << r.output;

  r = run("--data-dir " + (dir_ / "nowhere").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("nowhere"), std::string::npos) << r.output;

  r = run("frobnicate");
  EXPECT_NE(r.status, 0);
}

TEST_F(CliTest, VerifyPrintsVerdictsAndJson) {
  const fs::path json = dir_ / "verify.json";
  const CommandResult r = run("verify --json " + json.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("P2   reproduced"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not modelled yet"), std::string::npos);
  EXPECT_NE(r.output.find("20 claims:"), std::string::npos);
  // The JSON: the common header, a summary that tallies as the last printed line does, and each reported figure
  // structured as its claim file writes it.
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["format"], "k3perf-verify");
  EXPECT_EQ(j["version"], 1);
  EXPECT_TRUE(j["k3perf"].contains("version"));
  int claims = 0, reproduced = 0, explained = 0, contradicted = 0, not_modelled = 0;
  ASSERT_EQ(std::sscanf(r.output.substr(r.output.rfind("claims:") - 3).c_str(),
                        "%d claims: %d reproduced, %d explained, %d contradicted, %d not modelled", &claims,
                        &reproduced, &explained, &contradicted, &not_modelled),
            5)
      << r.output;
  EXPECT_EQ(j["summary"]["claims"], claims);
  EXPECT_EQ(j["summary"]["reproduced"], reproduced);
  EXPECT_EQ(j["summary"]["explained"], explained);
  EXPECT_EQ(j["summary"]["contradicted"], contradicted);
  EXPECT_EQ(j["summary"]["not_modelled"], not_modelled);
  ASSERT_EQ(j["claims"].size(), static_cast<std::size_t>(claims));
  std::map<std::string, nlohmann::json> by_id;
  for (const nlohmann::json& c : j["claims"]) by_id[c["id"]] = c;
  EXPECT_EQ(by_id["P2"]["verdict"], "reproduced");
  const nlohmann::json& p2 = by_id["P2"]["values"][0];  // all_mla_gib: {value: 104.6, relative_tolerance: 0.001}
  EXPECT_EQ(p2["key"], "all_mla_gib");
  EXPECT_DOUBLE_EQ(p2["reported"]["value"].get<double>(), 104.6);
  EXPECT_DOUBLE_EQ(p2["reported"]["relative_tolerance"].get<double>(), 0.001);
  EXPECT_EQ(p2["reported"]["unit"], "GiB");
  EXPECT_EQ(p2["within_tolerance"], true);
  EXPECT_NEAR(p2["predicted"].get<double>(), 104.6, 0.1046);
  const nlohmann::json& p11 = by_id["P11"]["values"][0];  // hit_rate_percent: {min: 90}: no upper bound
  EXPECT_DOUBLE_EQ(p11["reported"]["min"].get<double>(), 90);
  EXPECT_TRUE(p11["reported"]["max"].is_null());
  EXPECT_FALSE(p11["reported"].contains("value"));
  EXPECT_EQ(p11["reported"]["text"], "[90, inf] % of prompt tokens");
  const CommandResult one = run("verify --claim P16");
  EXPECT_EQ(one.status, 0);
  EXPECT_NE(one.output.find("1 claims:"), std::string::npos) << one.output;
  EXPECT_EQ(run("verify --claim P99").status, 2);
}

TEST_F(CliTest, MakeCheckpointInspectGenerate) {
  const std::string twin = std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/k3-twin.json";
  const fs::path ckpt = dir_ / "twin";
  CommandResult r = run("make-checkpoint --config " + twin + " --seed 3 --out " + ckpt.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("816112 parameters"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shard 1/1 written"), std::string::npos) << r.output;

  r = run("inspect " + ckpt.string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("language_model.model.layers.1.block_sparse_moe.experts.0.w1.weight_packed"),
            std::string::npos);
  EXPECT_NE(r.output.find("no problems"), std::string::npos) << r.output;

  const fs::path dump = dir_ / "dump";
  r = run("generate --weights " + ckpt.string() + " --prompt \"1 2 3\" --max-new-tokens 5 --dump " + dump.string());
  ASSERT_EQ(r.status, 0) << r.output;
  int ids = 0;  // the line of ids (stderr's "wrote ..." may come first in the merged output)
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0]))) continue;
    std::istringstream words(line);
    for (int v; words >> v;) ++ids;
  }
  EXPECT_EQ(ids, 5) << r.output;
  EXPECT_TRUE(fs::exists(dump / "trace.safetensors"));

  r = run("generate --weights " + ckpt.string() + " --prompt \"1 x\"");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("'x' is not a token id"), std::string::npos) << r.output;
  r = run("generate --weights " + ckpt.string() + " --prompt \"999999\"");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("outside the vocabulary"), std::string::npos) << r.output;

  // A config that does not match the tensors: every problem listed, non-zero exit.
  fs::copy_file(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/kimi-linear-twin.json", ckpt / "config.json",
                fs::copy_options::overwrite_existing);
  r = run("inspect " + ckpt.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("missing tensor model.embed_tokens.weight"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unexpected tensor language_model.lm_head.weight"), std::string::npos);

  // A truncated shard: a clear problem, not a crash.
  const fs::path shard = ckpt / "model-00001-of-00001.safetensors";
  fs::resize_file(shard, 1000);
  r = run("inspect " + ckpt.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("problem:"), std::string::npos) << r.output;
}

// --shard-gb bounds the data section of every shard (read from each file's own header length, not from
// k3perf's summary); the twin's largest tensor is smaller than the limit.
TEST_F(CliTest, MakeCheckpointShardGbBoundsShards) {
  const std::string twin = std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/k3-twin.json";
  const fs::path ckpt = dir_ / "sharded";
  const uint64_t limit = 200'000;  // bytes: the twin's 1 MB of weights need several shards
  const CommandResult r = run("make-checkpoint --config " + twin + " --shard-gb 0.0002 --out " + ckpt.string());
  ASSERT_EQ(r.status, 0) << r.output;
  int shards = 0;
  for (const auto& e : fs::directory_iterator(ckpt)) {
    if (e.path().extension() != ".safetensors") continue;
    ++shards;
    std::ifstream in(e.path(), std::ios::binary);
    unsigned char length[8] = {};
    in.read(reinterpret_cast<char*>(length), 8);
    uint64_t header = 0;
    for (int i = 0; i < 8; ++i) header |= static_cast<uint64_t>(length[i]) << (8 * i);
    EXPECT_LE(fs::file_size(e.path()) - 8 - header, limit) << e.path();
  }
  EXPECT_GE(shards, 2) << r.output;
  EXPECT_EQ(run("inspect " + ckpt.string()).status, 0);
  EXPECT_EQ(run("make-checkpoint --config " + twin + " --shard-gb 1e300 --out " + ckpt.string()).status, 2);
}

// Input that used to end as "internal error" (exit 3): a path the system refuses escaped as
// std::filesystem::filesystem_error. Exit 2, the path cut to an excerpt.
TEST_F(CliTest, PathTheSystemRefusesIsAnInputError) {
  const std::string long_name(300, 'a');  // beyond NAME_MAX: stat() fails with ENAMETOOLONG
  const CommandResult r = run("inspect " + long_name);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("File name too long"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_LT(r.output.size(), 400u) << r.output;
}

}  // namespace

namespace {

TEST_F(CliTest, CacheCurvePlotsBothHitRates) {
#ifndef K3PERF_TEST_GUI_BUILT
  GTEST_SKIP() << "plots are drawn with Qt, which this build does not have (the asan preset)";
#endif
  const fs::path svg = dir_ / "curve.svg";
  const CommandResult r = run("cache --trace " + std::string(K3PERF_SOURCE_DIR) +
                              "/data/traces/synthetic_trace.jsonl --curve --plot " + svg.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string text = slurp(svg);
  EXPECT_EQ(text.rfind("<svg", 0), 0u) << text.substr(0, 80);
  EXPECT_NE(text.find("hybrid: KV and KDA state at the same boundary"), std::string::npos);
  EXPECT_NE(text.find("KV only"), std::string::npos);
  const CommandResult bad = run("cache --trace " + std::string(K3PERF_SOURCE_DIR) +
                                "/data/traces/synthetic_trace.jsonl --curve --plot " + (dir_ / "curve.gif").string());
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_FALSE(fs::exists(dir_ / "curve.gif"));
}

// `run` is asked what `predict` is asked; --dry-run shows the mapping with no GPU, and what the engine
// cannot run is refused before any GPU work, naming the key.
TEST_F(CliTest, RunDryRunMapsTheShorthandFlags) {
  const CommandResult r =
      run("run --model kimi-k3 --weights random:7 --layers 4 --batch 8 --prompt-tokens 256 "
          "--context 8192 --dry-run");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* needle : {"<k3perf run>: kimi-k3 (4 layers), decode scenario",
                             "engine: batch 8, prompt 256 tokens, decode at 8192 tokens, 16 decode steps", "CUDA graph",
                             "predicted on H200 SXM: decode step"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

// A dry run writes the prediction a traced run would write beside its trace (the one it prints).
// The top ops summed over layers by default, one row per layer with --by-layer; --require-fit turns "does not fit"
// into exit status 4 after the report.
TEST_F(CliTest, PredictTopOpsByNameOrLayerAndRequireFit) {
  const CommandResult summed = run("predict " + kScenario + " --top 3");
  ASSERT_EQ(summed.status, 0) << summed.output;
  EXPECT_NE(summed.output.find("top 3 ops by time, summed over layers"), std::string::npos) << summed.output;
  EXPECT_NE(summed.output.find("  moe.experts "), std::string::npos) << summed.output;
  EXPECT_EQ(summed.output.find("L004."), std::string::npos) << summed.output;
  const CommandResult layers = run("predict " + kScenario + " --top 3 --by-layer");
  ASSERT_EQ(layers.status, 0) << layers.output;
  EXPECT_NE(layers.output.find("top 3 ops by time\n"), std::string::npos) << layers.output;
  EXPECT_NE(layers.output.find("  L0"), std::string::npos) << layers.output;
  const std::string too_big = "predict " + kScenario + " --set workload.batch=4096 --top 0";
  const CommandResult marked = run(too_big);
  EXPECT_EQ(marked.status, 0) << marked.output;
  EXPECT_NE(marked.output.find("DOES NOT FIT     "), std::string::npos) << marked.output;
  const CommandResult refused = run(too_big + " --require-fit");
  EXPECT_EQ(refused.status, 4) << refused.output;
  EXPECT_NE(refused.output.find("the scenario does not fit"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("step time"), std::string::npos) << "the report comes first:\n" << refused.output;
  EXPECT_EQ(run("predict " + kScenario + " --top 0 --require-fit").status, 0);
}

// --fail-on turns chosen verdicts into exit status 4 after the report; a verdict name it does not know is an input
// error.
TEST_F(CliTest, VerifyFailOnGivesStatusFourAfterTheReport) {
  const CommandResult ok = run("verify --claim P1 --claim P6 --fail-on not_modelled");
  EXPECT_EQ(ok.status, 0) << ok.output;
  const CommandResult failed = run("verify --claim P1 --claim P6 --fail-on contradicted --fail-on not_modelled");
  EXPECT_EQ(failed.status, 4) << failed.output;
  EXPECT_NE(failed.output.find("P1   reproduced"), std::string::npos) << "the report comes first:\n" << failed.output;
  EXPECT_NE(failed.output.find("verify: 1 of 2 claims have a --fail-on verdict: P6 contradicted"), std::string::npos)
      << failed.output;
  const CommandResult bad = run("verify --claim P1 --fail-on wrong");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--fail-on 'wrong': expected one of"), std::string::npos) << bad.output;
}

TEST_F(CliTest, RunDryRunWritesThePredictionOfTheTracedPhase) {
  const fs::path pred = dir_ / "pred.json";
  const CommandResult r =
      run("run --model kimi-k3 --weights random:7 --layers 4 --batch 8 --prompt-tokens 256 "
          "--context 8192 --dry-run --prediction-json " +
          pred.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json got = nlohmann::json::parse(slurp(pred));
  EXPECT_EQ(got.at("scenario").at("phase"), "decode");
  EXPECT_EQ(got.at("scenario").at("batch"), 8);
  EXPECT_EQ(got.at("scenario").at("context_tokens"), 8192);
  EXPECT_FALSE(got.at("ops").empty());
  const std::string printed =
      fmt::format("decode step {:.3f} ms", got.at("step").at("step_time_us").get<double>() / 1000.0);
  EXPECT_NE(r.output.find(printed), std::string::npos) << printed << "\n" << r.output;
  const CommandResult none =
      run("run --model kimi-k3 --weights random:7 --layers 4 --dry-run --hardware none "
          "--prediction-json " +
          (dir_ / "none.json").string());
  EXPECT_EQ(none.status, 2) << none.output;
  EXPECT_NE(none.output.find("--prediction-json needs --hardware"), std::string::npos) << none.output;
  EXPECT_FALSE(fs::exists(dir_ / "none.json"));
  // A seed beyond 64 bits is the input's error, found before any GPU work (it was an internal error from the
  // engine).
  const CommandResult seed = run("run --model kimi-k3 --weights random:18446744073709551616 --layers 4 --dry-run");
  EXPECT_EQ(seed.status, 2) << seed.output;
  EXPECT_NE(seed.output.find("--weights random:18446744073709551616: the seed after 'random:' exceeds "
                             "18446744073709551615"),
            std::string::npos)
      << seed.output;
  EXPECT_EQ(run("run --model kimi-k3 --weights random:18446744073709551615 --layers 4 --dry-run").status, 0);
}

TEST_F(CliTest, RunScenarioTheEngineCannotRunNamesTheKey) {
  const CommandResult r = run("run " + kScenario + " --weights random");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("key 'parallelism.attention_dp': 2: the engine emulates one attention group"),
            std::string::npos)
      << r.output;
  // The same scenario edited to one GPU plans, with the scenario's own prediction.
  const CommandResult one = run("run " + kScenario +
                                " --weights random --set parallelism.tp=1 --set parallelism.ep=1 "
                                "--set parallelism.attention_dp=1 --set gpus=1 --layers 2 --dry-run");
  EXPECT_EQ(one.status, 0) << one.output;
  EXPECT_NE(one.output.find("kimi-k3 (2 layers), decode scenario"), std::string::npos) << one.output;
}

// `plan` without a serving file: the flags are the question and the header echoes it; a question missing its parts
// names them; a search with nothing feasible says why and which limit binds.
TEST_F(CliTest, PlanFromFlagsEchoesTheQuestionAndExplainsRefusals) {
  const std::string one_layout =
      " --set plan.attention_dp=[2] --set plan.ep=[16] --set plan.max_sequences=[64] --set "
      "plan.max_batched_tokens=[8192]"
      " --set plan.modes=[aggregated] --set plan.kv_cache=[bf16] --quiet";
  const std::string question = "plan --model kimi-k3 --hardware h200-sxm --isl 4000 --osl 200 --ttft-ms 3000";
  CommandResult r = run(question + " --rate 1 --tpot-ms 80 --prefix-hit 0.5" + one_layout);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"plan       kimi-k3 on h200-sxm\n",
                           "  workload   1 requests/s of 4000-token prompts (2000 cached) and 200-token answers\n",
                           "  SLOs       p90 TTFT <= 3000 ms, TPOT <= 80 ms\n",
                           "1 configurations at 1 requests/s: 1 meet the SLOs (p90), 0 do not\n",
                           "  h200-sxm tp8 dp2 ep16 b64 t8192 agg  "}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
  // Not a terminal (a pipe here): one line when the search is done, no progress redrawn with '\r'.
  r = run(question + " --rate 1 --tpot-ms 80" + one_layout.substr(0, one_layout.find(" --quiet")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("plan: 1 configurations searched\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  r = run("plan --isl 4000 --rate 1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("(missing: --osl, --ttft-ms or --tpot-ms)"), std::string::npos) << r.output;
  r = run(question + " --rate 1 --prefix-hit 1.5");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--prefix-hit"), std::string::npos) << r.output;
  // 40 requests/s need more than the two 16-GPU replicas 32 GPUs allow: refused before any simulation.
  r = run(question + " --rate 40 --gpus-max 32" + one_layout);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("0 meet the SLOs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("      1  first estimate > max_gpus"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("binding limit: the first estimate needs "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GPUs > plan.max_gpus 32"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("SLOs missed"), std::string::npos) << r.output;
}

double step_us_of(const fs::path& prediction_json) {
  return nlohmann::json::parse(slurp(prediction_json))["step"]["step_time_us"].get<double>();
}

// --baseline-set and --compare print both predictions and their deltas; the numbers are those of the two
// predictions run alone (their JSON), per op kind summed from their ops.
TEST_F(CliTest, PredictWhatIfsPrintBothAndTheDeltas) {
  const fs::path a = dir_ / "a.json", b = dir_ / "b.json", diff = dir_ / "diff.json", csv = dir_ / "diff.csv";
  ASSERT_EQ(run("predict " + kScenario + " --set workload.batch=4 --top 0 --json " + a.string()).status, 0);
  ASSERT_EQ(run("predict " + kScenario + " --set workload.batch=2 --top 0 --json " + b.string()).status, 0);
  const CommandResult r =
      run("predict " + kScenario + " --set workload.batch=4 --baseline-set workload.batch=2 --json " + diff.string() +
          " --csv " + csv.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("baseline   " + kScenario + " --set workload.batch=4 --set workload.batch=2\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  step time  "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  memory per GPU  "), std::string::npos) << r.output;
  const nlohmann::json d = nlohmann::json::parse(slurp(diff));
  EXPECT_EQ(d["format"], "k3perf-prediction-diff");
  std::map<std::string, nlohmann::json> rows;
  for (const auto& row : d["rows"]) rows[row["quantity"].get<std::string>()] = row;
  EXPECT_DOUBLE_EQ(rows.at("step_time")["baseline"].get<double>(), step_us_of(b) / 1000);
  EXPECT_DOUBLE_EQ(rows.at("step_time")["scenario"].get<double>(), step_us_of(a) / 1000);
  double experts_us = 0;
  const nlohmann::json scenario = nlohmann::json::parse(slurp(a));
  for (const auto& op : scenario["ops"]) {
    if (op["kind"] == "moe_experts") experts_us += op["exposed_us"].get<double>();
  }
  EXPECT_NEAR(rows.at("moe_experts")["scenario"].get<double>(), experts_us / 1000, 1e-9);
  EXPECT_NE(slurp(csv).find("quantity,unit,baseline,scenario,delta\nstep_time,ms,"), std::string::npos) << slurp(csv);
  // --compare: another file is the baseline.
  const std::string other = std::string(K3PERF_SOURCE_DIR) + "/scenarios/k3-gb300-tp8-decode-128k.yaml";
  const fs::path c = dir_ / "c.json", o = dir_ / "o.json";
  ASSERT_EQ(run("predict " + other + " --top 0 --json " + o.string()).status, 0);
  const CommandResult cmp = run("predict " + kScenario + " --compare " + other + " --json " + c.string());
  ASSERT_EQ(cmp.status, 0) << cmp.output;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(slurp(c))["rows"][0]["baseline"].get<double>(), step_us_of(o) / 1000);
  EXPECT_EQ(run("predict " + kScenario + " --compare " + other + " --baseline-set workload.batch=2").status, 2);
}

// --sweep: one row per point of the cross product, first axis slowest; each row is the prediction of its point.
TEST_F(CliTest, PredictSweepOneRowPerPoint) {
  const fs::path csv = dir_ / "sweep.csv", json = dir_ / "sweep.json";
  const CommandResult r =
      run("predict " + kScenario + " --sweep workload.batch=2,4 --sweep workload.context_tokens=8192,131072 --csv " +
          csv.string() + " --json " + json.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("sweep over 4 points"), std::string::npos) << r.output;
  std::stringstream lines(slurp(csv));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line,
            "workload.batch,workload.context_tokens,step_time_ms,tokens_per_s,tokens_per_s_per_gpu,memory_per_gpu_gib,"
            "usable_per_gpu_gib,fits");
  const std::vector<std::pair<int, int>> points = {{2, 8192}, {2, 131072}, {4, 8192}, {4, 131072}};
  for (const auto& [batch, context] : points) {
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_EQ(line.rfind(fmt::format("{},{},", batch, context), 0), 0u) << line;
    const fs::path one = dir_ / "one.json";
    ASSERT_EQ(run(fmt::format("predict {} --set workload.batch={} --set workload.context_tokens={} --top 0 --json {}",
                              kScenario, batch, context, one.string()))
                  .status,
              0);
    const std::string rest = line.substr(fmt::format("{},{},", batch, context).size());
    EXPECT_NEAR(std::stod(rest), step_us_of(one) / 1000, 1e-6) << line;
  }
  EXPECT_EQ(nlohmann::json::parse(slurp(json))["points"].size(), 4u);
  CommandResult bad = run("predict " + kScenario + " --sweep workload.batch=");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--sweep 'workload.batch=': an empty value"), std::string::npos) << bad.output;
  bad = run("predict " + kScenario + " --sweep workload.bach=1,2");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("sweep point workload.bach=1"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("unknown key"), std::string::npos) << bad.output;
}

// compare refuses a prediction and a trace of different shapes (the committed H200 runs at 8 K and 128 K context)
// unless --force; the matching pair compares, with the step and its idle time.
TEST_F(CliTest, CompareRefusesDifferentShapesUnlessForced) {
  const std::string runs = std::string(K3PERF_SOURCE_DIR) + "/bench/results/2026-12-01-h200-engine-traces-9/";
  const std::string trace = " --trace " + runs + "trace_decode_b1_ctx131072.json.gz --top 3";
  CommandResult r = run("compare --prediction " + runs + "pred_decode_b1_ctx8192.json" + trace);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("are of different shapes:\n  context: the prediction has 8192, the trace 131072"),
            std::string::npos)
      << r.output;
  r = run("compare --prediction " + runs + "pred_decode_b1_ctx8192.json" + trace + " --force");
  EXPECT_EQ(r.status, 0) << r.output;
  r = run("compare --prediction " + runs + "pred_decode_b1_ctx131072.json" + trace);
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* needle : {"step on the GPU ", "us predicted (", "GPU idle inside steps ",
                             "3 largest errors (by |predicted - measured| us"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
  EXPECT_EQ(run("compare --prediction " + runs + "pred_decode_b1_ctx131072.json" + trace + " --by fraction").status, 2);
}

// A usage error exits 2 and names what is nearest: a verb, or an option of the verb reached; --help shows defaults.
// predict --trace and serve --trace: whole traces (nothing Perfetto drops), gzip by the name, the format checked.
TEST_F(CliTest, PredictAndServeWriteTracesThatOpenWhole) {
  const fs::path pred = dir_ / "pred.json", kineto = dir_ / "pred_kineto.json", gz = dir_ / "pred.json.gz";
  CommandResult r = run(fmt::format("predict {} --set workload.batch=2 --set overrides.layers=4 --top 0 --trace {}",
                                    kScenario, pred.string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + pred.string()), std::string::npos) << r.output;
  const std::string text = slurp(pred);
  EXPECT_TRUE(k3::test::perfetto_would_drop(text).empty());
  const nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc.at("k3perf").at("source"), "k3perf predict");
  std::size_t ops = 0, spans = 0;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ops += e.at("cat") == "kernel";
    spans += e.at("cat") == "gpu_user_annotation";
  }
  EXPECT_EQ(ops, doc.at("k3perf").at("ops").get<std::size_t>());
  EXPECT_EQ(spans, ops);
  r = run(fmt::format("predict {} --set overrides.layers=4 --top 0 --trace {} --trace-format kineto", kScenario,
                      kineto.string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(nlohmann::json::parse(slurp(kineto)).contains("distributedInfo"));
  r = run(fmt::format("predict {} --set overrides.layers=4 --top 0 --trace {}", kScenario, gz.string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp(gz).substr(0, 2), "\x1f\x8b");
  r = run(fmt::format("predict {} --trace {} --trace-format nsys", kScenario, pred.string()));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--trace-format"), std::string::npos) << r.output;
  r = run(fmt::format("predict {} --sweep workload.batch=1,2 --trace {}", kScenario, pred.string()));
  EXPECT_EQ(r.status, 2) << r.output;

  const fs::path serve = dir_ / "serve.json";
  r = run(fmt::format("serve {}/scenarios/serving/k3-h200x16-chat.yaml --trace {}", K3PERF_SOURCE_DIR, serve.string()));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string served = slurp(serve);
  EXPECT_TRUE(k3::test::perfetto_would_drop(served).empty());
  const nlohmann::json sdoc = nlohmann::json::parse(served);
  std::size_t requests = 0, iterations = 0;
  for (const nlohmann::json& e : sdoc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    requests += e.at("cat") == "request";
    iterations += e.at("cat") == "iteration";
  }
  EXPECT_EQ(requests, sdoc.at("k3perf").at("completed").get<std::size_t>());
  EXPECT_EQ(iterations, sdoc.at("k3perf").at("iterations").get<std::size_t>());
  EXPECT_GT(iterations, 0u);
}

TEST_F(CliTest, UnknownVerbsAndOptionsSayDidYouMean) {
  CommandResult r = run("predikt");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("'predikt': did you mean 'predict'?"), std::string::npos) << r.output;
  r = run("predict " + kScenario + " --topp 3");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("'--topp': did you mean '--top'?"), std::string::npos) << r.output;
  r = run("xyzzyplugh");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << "nothing is near:\n" << r.output;
  r = run("predict --help");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--top INT:NONNEGATIVE=15"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("=[]"), std::string::npos) << "no empty list shown as a default:\n" << r.output;
}

}  // namespace

#ifdef K3PERF_TEST_GUI_BUILT
// `k3perf gui` hands its files and flags to k3perf-gui: a file that is no k3perf file is refused by name
// (exit 2, nothing rendered).
TEST_F(CliTest, GuiVerbStartsTheGuiWithItsArguments) {
  setenv("QT_QPA_PLATFORM", "offscreen", 1);  // no display here
  const fs::path readme = fs::path(K3PERF_SOURCE_DIR) / "README.md";
  CommandResult r = run("gui " + readme.string() + " --screenshot " + (dir_ / "refused").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("README.md: not a scenario"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "refused" / "whatif.png"));
}
#endif

namespace {

// Starts `k3perf args` (stdout and stderr to /dev/null) and kills it with SIGKILL after `delay_s`; true when the
// kill came first (the command was still running).
bool killed_after(const std::vector<std::string>& args, double delay_s) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv{const_cast<char*>(K3PERF_CLI_PATH)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    ::execv(K3PERF_CLI_PATH, argv.data());
    ::_exit(127);
  }
  ::usleep(static_cast<useconds_t>(delay_s * 1e6));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status);
}

double seconds_to_run(const std::vector<std::string>& args) {
  const auto start = std::chrono::steady_clock::now();
  std::string command = K3PERF_CLI_PATH;
  for (const std::string& a : args) command += " " + a;
  EXPECT_EQ(std::system((command + " >/dev/null 2>&1").c_str()), 0) << command;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every file of a folder (names and bytes), or of one file, as one text to compare.
std::string contents_of(const fs::path& p) {
  if (!fs::exists(p)) return "<none>";
  if (!fs::is_directory(p)) return slurp(p);
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(p)) files[e.path().filename().string()] = slurp(e.path());
  std::string all;
  for (const auto& [name, bytes] : files) all += name + "\n" + bytes + "\n";
  return all;
}

// Temporaries (".<name>.tmp.<pid>.<n>") in a folder.
int temporaries_in(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

}  // namespace

// SIGKILL at ten points of a write over an existing output leaves the old output whole (never a mix of old and
// new shards, never a partial file); the next run removes the killed runs' temporaries. make-checkpoint writes
// many small shards here so that the run lasts long enough to be cut.
TEST_F(CliTest, SigkillDuringAWriteLeavesTheOldOutput) {
  const std::string twin = std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/k3-twin.json";
  const fs::path ckpt = dir_ / "ckpt";
  auto make = [&](const char* seed) {
    return std::vector<std::string>{"make-checkpoint", "--config", twin,    "--shard-gb", "0.00002",
                                    "--seed",          seed,       "--out", ckpt.string()};
  };
  seconds_to_run(make("1"));
  const std::string old_checkpoint = contents_of(ckpt);
  ASSERT_NE(old_checkpoint.find("model-00002-of-"), std::string::npos);
  const double full_s = seconds_to_run(make("2"));
  const std::string new_checkpoint = contents_of(ckpt);
  ASSERT_NE(new_checkpoint, old_checkpoint);
  seconds_to_run(make("1"));
  int cut = 0;
  for (int i = 0; i < 10; ++i) {
    cut += killed_after(make("2"), full_s * (0.05 + 0.1 * i));
    const std::string now = contents_of(ckpt);
    EXPECT_TRUE(now == old_checkpoint || now == new_checkpoint) << "killed at point " << i;
    if (now == new_checkpoint) seconds_to_run(make("1"));  // the run finished first: start from the old again
  }
  EXPECT_GE(cut, 3) << "the runs ended before they could be killed (" << full_s << " s each)";
  EXPECT_EQ(run("inspect " + ckpt.string()).status, 0);
  seconds_to_run(make("2"));
  EXPECT_EQ(contents_of(ckpt), new_checkpoint);
  EXPECT_EQ(temporaries_in(dir_), 0);
  EXPECT_EQ(temporaries_in(ckpt), 0);

  // A folder that holds anything else is not replaced.
  fs::create_directories(dir_ / "mine");
  std::ofstream(dir_ / "mine" / "notes.txt") << "keep";
  const CommandResult refused = run("make-checkpoint --config " + twin + " --out " + (dir_ / "mine").string());
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("holds 'notes.txt'"), std::string::npos) << refused.output;
  EXPECT_EQ(slurp(dir_ / "mine" / "notes.txt"), "keep");

  // plan --csv: one file, the old one or the new one.
  const fs::path csv = dir_ / "plan.csv";
  std::ofstream(csv) << "old\n";
  std::vector<std::string> plan{"plan", "--model", "kimi-k3", "--hardware", "h200-sxm", "--isl",
                                "4000", "--osl",   "200",     "--ttft-ms",  "3000",     "--rate",
                                "1",    "--quiet", "--csv",   csv.string()};
  for (const char* set : {"plan.attention_dp=[2]", "plan.ep=[16]", "plan.max_sequences=[64,128]",
                          "plan.max_batched_tokens=[8192]", "plan.modes=[aggregated]", "plan.kv_cache=[bf16]"}) {
    plan.insert(plan.end(), {"--set", set});
  }
  const double plan_s = seconds_to_run(plan);
  const std::string new_csv = slurp(csv);
  std::ofstream(csv) << "old\n";
  for (int i = 0; i < 5; ++i) {
    killed_after(plan, plan_s * (0.1 + 0.2 * i));
    const std::string now = slurp(csv);
    EXPECT_TRUE(now == "old\n" || now == new_csv) << "killed at point " << i;
  }
  seconds_to_run(plan);
  EXPECT_EQ(slurp(csv), new_csv);
  EXPECT_EQ(temporaries_in(dir_), 0);
}

// An output path that is a link: the link is replaced by the file, the file it pointed to is left as it was.
TEST_F(CliTest, AnOutputLinkIsReplacedNotWrittenThrough) {
  const fs::path elsewhere = dir_ / "elsewhere.json";
  std::ofstream(elsewhere) << "untouched";
  const fs::path out = dir_ / "out.json";
  fs::create_symlink(elsewhere, out);
  const CommandResult r = run("predict " + kScenario + " --json " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp(elsewhere), "untouched");
  EXPECT_FALSE(fs::is_symlink(out));
  EXPECT_NE(slurp(out).find("\"step\""), std::string::npos);
}
