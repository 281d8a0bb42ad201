// The GPU engine on Kimi Linear (plain residuals, SiLU, low-rank KDA output gate and softplus forget gate,
// MLA with a direct q_proj and no output gate, MoE at hidden width with bf16 routed experts):
//   1. against the CPU reference, layer by layer, on the wide Kimi Linear twin
//      (scenarios/models/kimi-linear-twin-wide.json: the kernels' per-head widths, 5 small layers) written by
//      make-checkpoint — a prompt prefilled in chunks, then decode steps of two sequences of different lengths
//      batched together, every sublayer checked on the GPU's own inputs (as engine_twin_gpu_test.cpp does for
//      K3; with plain residuals the mixer check becomes the norm of the GPU's residual stream);
//   2. against transformers, when tests/data/kimi_linear_oracle_wide/ exists (scripts/make-oracle-wide.sh
//      writes it): the logits of the prompt and of greedy decode steps of a random model that transformers'
//      own Kimi Linear implementation built and ran.
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
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

namespace k3::gpu_test {
namespace {

namespace fs = std::filesystem;

// Against transformers (fp32 weights and activations there; bf16 weights and activations here), per row of
// logits (normalised error):
//   - most rows: bf16 keeps 8 significant bits (unit roundoff u = 2^-9 ≈ 2e-3); a token passes ≈ 12 bf16
//     roundings per layer (weights and activations of each projection, the residual stream) over 5 layers,
//     which add up like a random walk to ≈ √60 · u ≈ 1.5e-2; the median row must stay within 3× that;
//   - single rows can be far off: a near-tied top-4 expert choice that the bf16 router logits flip swaps an
//     expert for that token and layer and moves the row's logits wholesale, and the change carries into the
//     next layers. On an H200 (2026-11-30) the median row was within the bound and the worst of 44 rows
//     reached 0.68, so no per-row bound is asserted; the rows are recorded. Each sublayer is pinned on
//     identical inputs by EngineKimiLinear.PrefillAndBatchedDecodeMatchTheReferenceLayerByLayer, and the CPU
//     reference matches transformers to 1e-5 (OracleKimiLinear).
// A layout or semantic error (a transposed gate, a wrong A_log, a missing scaling) moves every row by O(1),
// which the median catches.
constexpr double kOracleMedianRowTolerance = 5e-2;

const std::string kWideTwin = std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/kimi-linear-twin-wide.json";

class EngineKimiLinear : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = write_test_checkpoint(kWideTwin, "engine-kimi-linear", 2027); }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string dir_;
};
std::string EngineKimiLinear::dir_;

TEST_F(EngineKimiLinear, ReferenceRunsTheWideTwinAndTheRuntimeAcceptsIt) {
  // The CPU side: the wide twin is Kimi Linear in every feature the runtime must handle, loads and runs in
  // the reference (what the GPU side compares with), and the runtime accepts it but refuses graph capture.
  const ref::LoadedModel loaded = ref::load_reference_model(dir_);
  const ModelConfig& c = loaded.config;
  EXPECT_EQ(c.residual, ResidualKind::plain);
  EXPECT_EQ(c.activation, Activation::silu);
  EXPECT_EQ(c.kda->gate_form, KdaGateForm::softplus);
  EXPECT_FALSE(c.kda->full_rank_output_gate);
  EXPECT_EQ(c.mla.q_lora_rank, 0);
  EXPECT_FALSE(c.mla.output_gate);
  EXPECT_EQ(c.moe->latent_dim, 0);
  EXPECT_EQ(c.routed_expert_format, StorageFormat::bf16);
  EXPECT_DOUBLE_EQ(c.moe->routed_scaling_factor, 2.446);
  EXPECT_GT(c.moe->shared_intermediate, 0);
  ref::ModelState state = ref::ModelState::empty(c);
  const ref::Matrix logits = loaded.model.forward({5, 17, 300, 42, 7}, state);
  EXPECT_EQ(logits.rows(), 5);
  EXPECT_EQ(logits.cols(), 512);
  EXPECT_TRUE(logits.allFinite());
  EXPECT_GT(logits.norm(), 0.0f);
  EXPECT_NO_THROW(runtime::DeviceWeights::check_supported(c));
  EXPECT_FALSE(runtime::GpuModel::decode_capturable(c));
  EXPECT_TRUE(runtime::GpuModel::decode_capturable(
      load_model_config(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/k3-twin-wide.json")));
}

TEST(EngineKimiLinearWeights, AcceptsThePublishedModelAndRefusesOtherWidths) {
  // The published Kimi-Linear-48B-A3B has the kernels' per-head widths; the narrow twin does not.
  EXPECT_NO_THROW(runtime::DeviceWeights::check_supported(
      load_model_config(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/kimi-linear-48b-a3b.json")));
  try {
    runtime::DeviceWeights::check_supported(
        load_model_config(std::string(K3PERF_SOURCE_DIR) + "/scenarios/models/kimi-linear-twin.json"));
    FAIL() << "the narrow Kimi Linear twin (KDA head_dim 16) was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 128"), std::string::npos) << e.what();
  }
}

TEST(EngineKimiLinearWeights, DeviceLayoutHoldsExactlyTheStoredBytes) {
  // Every tensor of the Kimi Linear layout has one place; the device size is the stored bytes plus at most
  // one 256-byte alignment per buffer.
  const ModelConfig config = load_model_config(kWideTwin);
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

TEST_F(EngineKimiLinear, PrefillAndBatchedDecodeMatchTheReferenceLayerByLayer) {
  K3_REQUIRE_GPU();
  check_prefill_and_batched_decode(ref::load_reference_model(dir_), dir_);
}

TEST_F(EngineKimiLinear, UntappedForwardWithFoldedResidualsMatchesTheReference) {
  K3_REQUIRE_GPU();
  check_prefill_and_batched_decode(ref::load_reference_model(dir_), dir_, TapMode::none);
}

TEST_F(EngineKimiLinear, EagerDecodeRunsAndCaptureIsRefused) {
  K3_REQUIRE_GPU();
  const ref::LoadedModel loaded = ref::load_reference_model(dir_);
  const ModelConfig& config = loaded.config;
  runtime::DeviceWeights weights(config);
  weights.load(weights::Checkpoint::open(dir_));
  const std::vector<int32_t> prompt = {5, 17, 300, 42, 7, 99, 1, 511, 256, 3};
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
  // Greedy eager decode gives the reference's greedy tokens while no choice is near-tied (the first steps).
  std::vector<int32_t> gpu_tokens;
  int32_t t = 0;
  CUDA_CHECK(cudaMemcpy(&t, model.next_tokens(), sizeof(t), cudaMemcpyDeviceToHost));
  gpu_tokens.push_back(t);
  model.decode_step(1);
  CUDA_CHECK(cudaStreamSynchronize(model.stream()));
  CUDA_CHECK(cudaMemcpy(&t, model.next_tokens(), sizeof(t), cudaMemcpyDeviceToHost));
  gpu_tokens.push_back(t);
  EXPECT_EQ(gpu_tokens, loaded.model.generate(prompt, 2));
  try {
    model.capture_decode(1);
    FAIL() << "a decode step with bf16 experts (host sync per MoE layer) was captured";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--eager"), std::string::npos) << e.what();
  }
  // The refused capture left the stream usable: another eager step runs.
  EXPECT_NO_THROW(model.decode_step(1));
  CUDA_CHECK(cudaStreamSynchronize(model.stream()));
}

// transformers' logits (tests/data/kimi_linear_oracle_wide/expected_logits.json) for the rows the GPU gave.
struct OracleRows {
  std::vector<double> errors;  // normalised error per row
  void add(const ref::Matrix& gpu, const std::vector<double>& theirs) {
    ref::Matrix expected(1, Eigen::Index(theirs.size()));
    for (size_t i = 0; i < theirs.size(); ++i) expected(0, Eigen::Index(i)) = float(theirs[i]);
    errors.push_back(normalized_error(gpu, expected));
  }
  double median() const {
    std::vector<double> v = errors;
    std::sort(v.begin(), v.end());
    return v.empty() ? INFINITY : v[v.size() / 2];
  }
  double worst() const { return errors.empty() ? INFINITY : *std::max_element(errors.begin(), errors.end()); }
};

TEST(EngineKimiLinearOracle, PromptAndDecodeLogitsMatchTransformers) {
  const std::string dir = std::string(K3PERF_SOURCE_DIR) + "/tests/data/kimi_linear_oracle_wide";
  if (!fs::exists(dir + "/expected_logits.json")) {
    GTEST_SKIP() << dir << " is absent: scripts/make-oracle-wide.sh writes it on a machine with PyTorch and "
                 << "transformers";
  }
  // The CPU side: the oracle's files load (config, weights in the published layout, expected logits).
  std::ifstream in(dir + "/expected_logits.json");
  const nlohmann::json e = nlohmann::json::parse(in);
  const std::vector<int32_t> prompt = e["prompt"].get<std::vector<int32_t>>();
  const auto prefill = e["prefill_logits"].get<std::vector<std::vector<double>>>();
  const auto tokens = e["decode_tokens"].get<std::vector<int32_t>>();
  const auto steps = e["decode_logits"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(prefill.size(), prompt.size());
  ASSERT_EQ(steps.size(), tokens.size());
  const ref::LoadedModel loaded = ref::load_reference_model(dir);
  const ModelConfig& config = loaded.config;
  ASSERT_NO_THROW(runtime::DeviceWeights::check_supported(config));
  K3_REQUIRE_GPU();

  runtime::DeviceWeights weights(config);
  weights.load(weights::Checkpoint::open(dir));
  const int64_t context = int64_t(prompt.size() + tokens.size());
  runtime::GpuCache cache(config, {1, context, 16});
  runtime::ModelRunShape shape;
  shape.max_chunk_tokens = 16;  // the prompt runs in chunks of 16, state carried
  shape.max_prefill_context = int64_t(prompt.size());
  shape.page_tokens = 16;
  shape.max_context_tokens = context;
  runtime::GpuModel model(weights, cache, shape);
  cache.admit(0, context);

  // Every prompt row's logits: the GPU's final hidden states (tapped per chunk) through lm_head on the host
  // (bf16 weights as on the GPU); the GPU's own head is checked on the last row.
  std::vector<ref::Matrix> hidden_chunks;
  model.set_tap([&](const std::string& what, int, const runtime::bf16* device, int64_t rows, int64_t cols) {
    if (what != "final_hidden") return;
    std::vector<__nv_bfloat16> host(rows * cols);
    CUDA_CHECK(cudaMemcpy(host.data(), device, host.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
    hidden_chunks.push_back(from_bf16(host, rows, cols));
  });
  model.prefill(0, prompt, 0);
  model.set_tap(nullptr);
  const ref::Matrix lm_head = round_to_bf16(loaded.model.weights().lm_head);
  OracleRows rows;
  int64_t row = 0;
  ref::Matrix last_logits;
  for (const ref::Matrix& hidden : hidden_chunks) {
    const ref::Matrix logits = hidden * lm_head.transpose();
    for (Eigen::Index r = 0; r < logits.rows(); ++r, ++row) {
      ASSERT_LT(row, int64_t(prefill.size()));
      rows.add(logits.row(r), prefill[size_t(row)]);
    }
    last_logits = logits.bottomRows(1);
  }
  ASSERT_EQ(row, int64_t(prompt.size()));
  EXPECT_LE(normalized_error(download_logits(model, 0, config.vocab_size), last_logits), 1e-2) << "prompt lm_head";

  // Decode steps fed transformers' greedy tokens.
  model.begin_decode({int64_t(prompt.size())});
  for (size_t i = 0; i < tokens.size(); ++i) {
    CUDA_CHECK(cudaMemcpy(model.next_tokens(), &tokens[i], sizeof(int32_t), cudaMemcpyHostToDevice));
    model.decode_step(1);
    CUDA_CHECK(cudaStreamSynchronize(model.stream()));
    rows.add(download_logits(model, 0, config.vocab_size), steps[i]);
  }
  ::testing::Test::RecordProperty("median_row_error", std::to_string(rows.median()));
  ::testing::Test::RecordProperty("worst_row_error", std::to_string(rows.worst()));
  EXPECT_LE(rows.median(), kOracleMedianRowTolerance) << "over " << rows.errors.size() << " rows";
}

}  // namespace
}  // namespace k3::gpu_test
