// The GPU engine end to end against the CPU reference, layer by layer, on the wide K3 twin
// (scenarios/models/k3-twin-wide.json: K3's per-head widths, small everything else; the CPU reference
// is itself pinned to golden data in CI by GoldenTwin.*). Checked, per layer: the attention and MLP
// inputs (after their AttnRes mixers and norms) and outputs, then the final hidden state and logits —
// for a prompt prefilled in chunks (KDA chunked kernel, MLA expanded attention over the cached prefix)
// and for decode steps of two sequences of different lengths batched together (recurrent KDA,
// absorbed MLA over the paged cache), each token fed to both sides alike; and a prompt long enough for the MXFP4
// experts' dequantised prefill path, in one chunk.
#include "engine/reference/attnres.h"
#include "engine/reference/basic_ops.h"
#include "engine/reference/checkpoint_loader.h"
#include "engine/reference/kda.h"
#include "engine/reference/mla.h"
#include "engine/reference/model.h"
#include "engine/reference/moe.h"
#include "engine/runtime/device_weights.h"
#include "engine/runtime/gpu_cache.h"
#include "engine/runtime/gpu_model.h"
#include "engine/weights/checkpoint.h"
#include "engine/weights/synthetic_checkpoint.h"
#include "engine_test_support.h"
#include "kernels/gpu_harness.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>

namespace k3::gpu_test {
namespace {

namespace fs = std::filesystem;

class EngineTwin : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = write_test_checkpoint(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/k3-twin-wide.json", "engine-twin",
                                 2026);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string dir_;
};
std::string EngineTwin::dir_;

TEST_F(EngineTwin, ReferenceRunsTheWideTwin) {
  // The CPU side: the wide twin loads and runs in the reference (what the GPU side compares with).
  const ref::LoadedModel loaded = ref::load_reference_model(dir_);
  ref::ModelState state = ref::ModelState::empty(loaded.config);
  ref::ForwardTrace trace;
  const ref::Matrix logits = loaded.model.forward({5, 17, 300, 42, 7}, state, &trace);
  EXPECT_EQ(logits.rows(), 5);
  EXPECT_EQ(logits.cols(), 512);
  EXPECT_TRUE(logits.allFinite());
  EXPECT_GT(logits.norm(), 0.0f);
  EXPECT_NO_THROW(runtime::DeviceWeights::check_supported(loaded.config));
}

TEST_F(EngineTwin, PrefillAndBatchedDecodeMatchTheReferenceLayerByLayer) {
  K3_REQUIRE_GPU();
  check_prefill_and_batched_decode(ref::load_reference_model(dir_), dir_);
}

// The forward `k3perf run` executes, with no host synchronisation between sublayers, checked sublayer by sublayer
// through stream-ordered copies of the taps.
TEST_F(EngineTwin, UnsynchronisedForwardMatchesTheReferenceLayerByLayer) {
  K3_REQUIRE_GPU();
  check_prefill_and_batched_decode(ref::load_reference_model(dir_), dir_, TapMode::stream_ordered);
}

// The same with the MXFP4 experts in the tiled layout (the GEMV and the pipelined GEMM read it).
TEST_F(EngineTwin, TiledExpertsMatchTheReferenceLayerByLayer) {
  K3_REQUIRE_GPU();
  check_prefill_and_batched_decode(ref::load_reference_model(dir_), dir_, TapMode::synchronous, true);
}

// A 520-token prompt in one chunk: 2080 routed slots over 16 experts, enough for the MXFP4 experts' dequantise-then-
// cuBLASLt path (GpuModel::dequantized_experts), every sublayer checked against the reference on the GPU's inputs;
// with the experts as stored (that path), then tiled (on compute capability 9.0 the wgmma grouped GEMM instead).
TEST_F(EngineTwin, LongPrefillChunkMatchesTheReferenceLayerByLayer) {
  K3_REQUIRE_GPU();
  const ref::LoadedModel loaded = ref::load_reference_model(dir_);
  const ModelConfig& config = loaded.config;
  constexpr int kTokens = 520;
  ASSERT_TRUE(runtime::GpuModel::dequantized_experts(config, kTokens));
  ASSERT_FALSE(runtime::GpuModel::dequantized_experts(config, 8));  // the other tests' chunks take the kernels
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int32_t> token(3, config.vocab_size - 1);
  std::vector<int32_t> prompt;
  for (int i = 0; i < kTokens; ++i) prompt.push_back(token(rng));
  for (const bool tiled : {false, true}) {  // the experts as the checkpoint orders them, then tiled
    runtime::DeviceWeights weights(config);
    weights.load(weights::Checkpoint::open(dir_));
    if (tiled) {
      ASSERT_EQ(weights.tile_experts(), config.count_layers(MlpKind::moe));
    }
    runtime::GpuCache cache(config, {1, 528, 16});
    runtime::ModelRunShape shape;
    shape.max_chunk_tokens = kTokens;
    shape.max_prefill_context = 528;
    shape.page_tokens = 16;
    shape.max_context_tokens = 528;
    runtime::GpuModel model(weights, cache, shape);
    cache.admit(0, 528);
    const Taps taps = run_tapped(model, TapMode::synchronous, [&] { model.prefill(0, prompt, 0); });
    IsolatedReference isolated(loaded.model);  // it keeps the sequence's state: one per run
    isolated.check(taps, 0, prompt, tiled ? "520-token prefill chunk, tiled experts" : "520-token prefill chunk");
  }
}

TEST_F(EngineTwin, CapturedDecodeEqualsEagerDecode) {
  K3_REQUIRE_GPU();
  const ref::LoadedModel loaded = ref::load_reference_model(dir_);
  const ModelConfig& config = loaded.config;
  runtime::DeviceWeights weights(config);
  weights.load(weights::Checkpoint::open(dir_));
  const std::vector<int32_t> prompt = {5, 17, 300, 42, 7, 99, 1, 511, 256, 3};
  auto run = [&](bool graph) {
    runtime::GpuCache cache(config, {1, 64, 16});
    runtime::ModelRunShape shape;
    shape.max_chunk_tokens = 16;
    shape.max_prefill_context = 16;
    shape.page_tokens = 16;
    shape.max_context_tokens = 64;
    runtime::GpuModel model(weights, cache, shape);
    cache.admit(0, 64);
    model.prefill(0, prompt, 0);
    model.begin_decode({int64_t(prompt.size())});
    std::vector<int32_t> out;
    model.decode_step(1);  // eager first step (warms the GEMM plans), as k3perf run does
    if (graph) model.capture_decode(1);
    for (int i = 0; i < 6; ++i) {
      if (graph) {
        model.launch_decode();
      } else {
        model.decode_step(1);
      }
      int32_t t = 0;
      CUDA_CHECK(cudaMemcpyAsync(&t, model.next_tokens(), sizeof(t), cudaMemcpyDeviceToHost, model.stream()));
      CUDA_CHECK(cudaStreamSynchronize(model.stream()));
      out.push_back(t);
    }
    return out;
  };
  EXPECT_EQ(run(false), run(true));
}

TEST(EngineWeights, RefusesWhatTheRuntimeDoesNotRun) {
  // The kernels are specialised to K3's per-head widths: the narrow Kimi Linear twin (KDA head_dim 16)
  // and a model with no KDA layers are refused, naming the reason.
  const std::string models = std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/";
  const std::pair<const char*, const char*> cases[] = {{"kimi-linear-twin.json", "head_dim"},
                                                       {"deepseek-v3.json", "KDA"}};
  for (const auto& [file, reason] : cases) {
    try {
      runtime::DeviceWeights::check_supported(load_model_config(models + file));
      ADD_FAILURE() << file << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << file << ": " << e.what();
    }
  }
}

TEST(EngineWeights, DeviceLayoutHoldsExactlyTheStoredBytes) {
  // The device layout places every tensor of the checkpoint layout once; its size is the stored bytes
  // plus at most one 256-byte alignment per buffer.
  const ModelConfig config = load_model_config(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/k3-twin-wide.json");
  uint64_t stored = 0, tensors = 0;
  for (const weights::TensorSpec& t : weights::checkpoint_layout(config).tensors) {
    uint64_t n = weights::element_size_bytes(t.dtype);
    for (int64_t d : t.shape) n *= uint64_t(d);
    stored += n;
    ++tensors;
  }
  const uint64_t device = runtime::DeviceWeights::device_bytes(config);
  EXPECT_GE(device, stored);
  EXPECT_LE(device, stored + 256 * tensors);
}

}  // namespace
}  // namespace k3::gpu_test
