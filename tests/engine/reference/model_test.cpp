// Whole-model reference on synthetic checkpoints of the twins: loading, parameter counts,
// determinism, prefill = decode steps, and the twin's 512-token prefill time.
#include "core/error.h"
#include "core/parameters.h"
#include "engine/reference/checkpoint_loader.h"
#include "engine/weights/checkpoint.h"
#include "engine/weights/synthetic_checkpoint.h"
#include "engine/weights/tensor_layout.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace k3::ref {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/";

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / fmt::format("k3perf_model_test_{}_{}", ::getpid(), counter_++)) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

weights::SyntheticCheckpointSummary make(const std::string& model, const std::string& out, uint64_t seed,
                                         int layers = 0) {
  weights::SyntheticCheckpointOptions o;
  o.config_path = kModels + model + ".json";
  o.out_dir = out;
  o.seed = seed;
  o.layers = layers;
  return weights::write_synthetic_checkpoint(o);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double max_relative(const Matrix& a, const Matrix& b) {
  return (a - b).cwiseAbs().maxCoeff() / std::max(1e-30f, b.cwiseAbs().maxCoeff());
}

TEST(SyntheticCheckpoint, LoadsWithTheFoundationParameterCounts) {
  for (const char* model : {"k3-twin", "kimi-linear-twin"}) {
    TempDir dir;
    const auto summary = make(model, dir.path(), 3);
    const ModelConfig config = load_model_config(kModels + std::string(model) + ".json");
    EXPECT_EQ(summary.parameters, count_parameters(config).total()) << model;
    const weights::Checkpoint ckpt = weights::Checkpoint::open(dir.path());
    const weights::LayoutProblems problems = weights::check_layout(weights::checkpoint_layout(config), ckpt);
    EXPECT_TRUE(problems.ok()) << problems.describe();
    int64_t stored = 0;  // what the files hold: MXFP4 bytes count two parameters, scales none
    for (const auto& t : weights::checkpoint_layout(config).tensors) stored += t.parameters();
    EXPECT_EQ(stored, count_parameters(config).total());
    const LoadedModel loaded = load_reference_model(dir.path());
    EXPECT_EQ(loaded.config.num_layers, config.num_layers);
  }
}

TEST(SyntheticCheckpoint, SameSeedSameBytesOtherSeedOtherBytes) {
  TempDir a, b, c;
  make("k3-twin", a.path(), 11);
  make("k3-twin", b.path(), 11);
  make("k3-twin", c.path(), 12);
  const std::string shard = "model-00001-of-00001.safetensors";
  EXPECT_EQ(slurp(fs::path(a.path()) / shard), slurp(fs::path(b.path()) / shard));
  EXPECT_NE(slurp(fs::path(a.path()) / shard), slurp(fs::path(c.path()) / shard));
  EXPECT_EQ(slurp(fs::path(a.path()) / "config.json"), slurp(kModels + "k3-twin.json"));
}

TEST(SyntheticCheckpoint, SliceKeepsTheFirstLayersAndShardsStream) {
  TempDir dir;
  weights::SyntheticCheckpointOptions o;
  o.config_path = kModels + "k3-twin.json";
  o.out_dir = dir.path();
  o.layers = 5;
  o.shard_bytes = 100'000;  // force several shards
  int progress_lines = 0;
  o.progress = [&](const std::string&) { ++progress_lines; };
  const auto s = weights::write_synthetic_checkpoint(o);
  EXPECT_EQ(s.config.num_layers, 5);
  EXPECT_EQ(s.config.count_layers(AttentionKind::mla), 1);  // 1-based layer 4 only
  EXPECT_GT(s.shards, 2);
  EXPECT_EQ(progress_lines, s.shards);
  const LoadedModel loaded = load_reference_model(dir.path());
  EXPECT_EQ(loaded.model.generate({5, 6, 7}, 3).size(), 3u);
  EXPECT_THROW(weights::slice_config_json(slurp(kModels + "k3-twin.json"), "x.json", 10), InputError);
  EXPECT_THROW(weights::slice_config_json(slurp(kModels + "deepseek-v3.json"), "x.json", 2), InputError);
}

TEST(SyntheticCheckpoint, MismatchedCheckpointReportsEveryProblemAtOnce) {
  TempDir dir;
  make("k3-twin", dir.path(), 1);
  const ModelConfig other = load_model_config(kModels + "kimi-linear-twin.json");
  try {
    load_model_weights(other, weights::Checkpoint::open(dir.path()));
    ADD_FAILURE() << "loaded a K3 twin checkpoint as Kimi Linear";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing tensor model.embed_tokens.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected tensor language_model.lm_head.weight"), std::string::npos);
  }
}

TEST(ReferenceModel, PrefillEqualsOneTokenAtATime) {
  for (const char* model : {"k3-twin", "kimi-linear-twin"}) {
    TempDir dir;
    make(model, dir.path(), 5);
    const LoadedModel loaded = load_reference_model(dir.path());
    std::mt19937 rng(99);
    std::vector<int32_t> tokens(37);
    for (auto& t : tokens) t = static_cast<int32_t>(rng() % loaded.config.vocab_size);
    ModelState whole = ModelState::empty(loaded.config), steps = ModelState::empty(loaded.config);
    const Matrix prefill = loaded.model.forward(tokens, whole);
    // Both paths are exact; they differ by fp32 rounding only (Eigen sums one-row and many-row
    // products in different orders), which grows through the layers to ~2e-5 here.
    constexpr double kTolerance = 1e-4;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const Matrix one = loaded.model.forward({tokens[i]}, steps);
      EXPECT_LE(max_relative(one, prefill.row(i)), kTolerance) << model << " token " << i;
    }
    for (int l = 0; l < loaded.config.num_layers; ++l) {
      if (loaded.config.layer_attention[l] == AttentionKind::kda) {
        for (size_t h = 0; h < whole.layers[l].kda.S.size(); ++h) {
          const double scale = whole.layers[l].kda.S[h].cwiseAbs().maxCoeff();
          EXPECT_LE((whole.layers[l].kda.S[h] - steps.layers[l].kda.S[h]).cwiseAbs().maxCoeff(), kTolerance * scale);
        }
      } else {
        EXPECT_LE(max_relative(steps.layers[l].mla.latent, whole.layers[l].mla.latent), kTolerance);
      }
    }
  }
}

// Its time is bench/reference_bench.cpp's (BM_TwinPrefill512), not asserted here: a timed test fails on a loaded
// machine, not on a slow reference.
TEST(ReferenceModel, TwinPrefillOf512Tokens) {
  TempDir dir;
  make("k3-twin", dir.path(), 2);
  const LoadedModel loaded = load_reference_model(dir.path());
  std::vector<int32_t> tokens(512);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37) % loaded.config.vocab_size);
  ModelState state = ModelState::empty(loaded.config);
  const auto start = std::chrono::steady_clock::now();
  const Matrix logits = loaded.model.forward(tokens, state);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("prefill_512_seconds", std::to_string(seconds));
  EXPECT_TRUE(logits.allFinite());
  EXPECT_GT(logits.cwiseAbs().maxCoeff(), 0.1f);  // informative, not collapsed
}

}  // namespace
}  // namespace k3::ref
