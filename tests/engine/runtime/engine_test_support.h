// What the GPU engine's end-to-end tests share (engine_twin_gpu_test.cpp, engine_kimi_linear_gpu_test.cpp):
// the taps that collect each sublayer's input and output from the GPU, the head check, and the whole
// prefill-in-chunks + batched-decode comparison against the CPU reference run sublayer by sublayer on the
// GPU's own inputs (IsolatedReference).
#pragma once

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
#include "kernels/gpu_harness.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace k3::gpu_test {

// A make-checkpoint checkpoint of `config_path` in a fresh temporary directory (returned); the caller removes it.
inline std::string write_test_checkpoint(const std::string& config_path, const std::string& name, uint64_t seed) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("k3perf-{}-{}", name, ::getpid())).string();
  weights::SyntheticCheckpointOptions o;
  o.config_path = config_path;
  o.out_dir = dir;
  o.seed = seed;
  weights::write_synthetic_checkpoint(o);
  return dir;
}

// One sublayer with bf16 inputs and outputs (TF32 inside the KDA chunk kernel) against the fp32/fp64
// reference on the same inputs.
constexpr double kSublayerTolerance = 2e-2;
// Logits after the whole model, against the reference's own forward: with every sublayer within
// kSublayerTolerance on identical inputs, the bf16 roundings still compound through 9 random-weight
// layers (AttnRes softmaxes, near-tied expert choices), measured at 0.18-0.54 for the prompts on an H200;
// unrelated logits would be near √2. This holds for a prompt's logits only: past it the twin is chaotic, and
// rounding the reference's own sublayer boundaries to bf16, with no other change, moves its logits by 1.02 at
// the second decode step (EndToEndSensitivity.*, tests/engine). So decode steps are checked sublayer by
// sublayer and through the head, and end to end only where nothing else is (TapMode::none).
constexpr double kEndToEndLogitsTolerance = 0.6;

struct Taps {
  std::map<std::string, ref::Matrix> m;  // "L3.mlp_out" -> [rows, h]
};

inline std::string key(const std::string& what, int layer) { return fmt::format("{}.{}", what, layer); }

// How a forward is checked: `synchronous` taps (the stream synchronised at every tap, host copies),
// `stream_ordered` taps (device-to-device copies enqueued on the model's stream as the forward is: no host
// synchronisation between sublayers, the forward `k3perf run` executes; downloaded after the step), or `none`
// (logits only: the one way to run Kimi Linear's untapped path, whose residual adds are folded into GEMMs).
enum class TapMode { synchronous, stream_ordered, none };

// Stream-ordered taps: each tapped buffer copied on `stream` into memory allocated on it, nothing synchronised.
class StreamOrderedTaps {
 public:
  explicit StreamOrderedTaps(cudaStream_t stream) : stream_(stream) {}
  StreamOrderedTaps(const StreamOrderedTaps&) = delete;
  StreamOrderedTaps& operator=(const StreamOrderedTaps&) = delete;
  ~StreamOrderedTaps() {
    for (Copy& c : copies_) cudaFreeAsync(c.device, stream_);
    cudaStreamSynchronize(stream_);
  }
  runtime::ForwardTap tap() {
    return [this](const std::string& what, int layer, const runtime::bf16* device, int64_t rows, int64_t cols) {
      Copy c{key(what, layer), nullptr, rows, cols};
      const size_t bytes = size_t(rows * cols) * sizeof(__nv_bfloat16);
      CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&c.device), bytes, stream_));
      CUDA_CHECK(cudaMemcpyAsync(c.device, device, bytes, cudaMemcpyDeviceToDevice, stream_));
      copies_.push_back(c);
    };
  }
  // After the stream has finished the forward: every tap on the host.
  Taps download() const {
    Taps taps;
    for (const Copy& c : copies_) {
      std::vector<__nv_bfloat16> host(c.rows * c.cols);
      CUDA_CHECK(cudaMemcpy(host.data(), c.device, host.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
      taps.m[c.key] = from_bf16(host, c.rows, c.cols);
    }
    return taps;
  }

 private:
  struct Copy {
    std::string key;
    __nv_bfloat16* device;
    int64_t rows, cols;
  };
  cudaStream_t stream_;
  std::vector<Copy> copies_;
};

inline runtime::ForwardTap collector(Taps& taps) {
  return [&taps](const std::string& what, int layer, const runtime::bf16* device, int64_t rows, int64_t cols) {
    std::vector<__nv_bfloat16> host(rows * cols);
    CUDA_CHECK(cudaMemcpy(host.data(), device, host.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
    taps.m[key(what, layer)] = from_bf16(host, rows, cols);
  };
}

// The head on the GPU's own final hidden state: logits = final_hidden · lm_headᵀ.
inline void expect_head_matches(const Taps& gpu, int64_t row, const ref::Matrix& gpu_logits, const ref::ModelWeights& w,
                                const std::string& label) {
  const auto it = gpu.m.find(key("final_hidden", -1));
  ASSERT_NE(it, gpu.m.end());
  const ref::Matrix hidden = it->second.row(row);
  const ref::Matrix expected = hidden * w.lm_head.transpose();
  EXPECT_LE(normalized_error(gpu_logits, expected), 1e-2) << label << ": lm_head";
}

inline ref::Matrix download_logits(const runtime::GpuModel& model, int row, int vocab) {
  std::vector<float> host(vocab);
  CUDA_CHECK(
      cudaMemcpy(host.data(), model.logits() + int64_t(row) * vocab, vocab * sizeof(float), cudaMemcpyDeviceToHost));
  return from_f32(host, 1, vocab);
}

inline int32_t argmax_of_last_row(const ref::Matrix& logits) {
  Eigen::Index best = 0;
  logits.row(logits.rows() - 1).maxCoeff(&best);
  return int32_t(best);
}

// The reference run on the GPU's own inputs, sublayer by sublayer (either residual form: AttnResStack follows
// the config), its states (KDA, MLA cache) carried
// across calls: each GPU sublayer is checked on identical inputs (so one bf16 rounding cannot cascade
// through the layers), and each AttnRes mixer + norm on the GPU's own residual stream.
class IsolatedReference {
 public:
  explicit IsolatedReference(const ref::ReferenceModel& model)
      : model_(model), state_(ref::ModelState::empty(model.config())) {}

  // GPU taps rows [row0, row0 + n) are this sequence's `tokens`.
  void check(const Taps& gpu, int64_t row0, const std::vector<int32_t>& tokens, const std::string& label) {
    const ModelConfig& m = model_.config();
    const ref::ModelWeights& w = model_.weights();
    const int64_t n = int64_t(tokens.size());
    auto rows = [&](const std::string& what, int layer) -> ref::Matrix {
      const auto it = gpu.m.find(key(what, layer));
      EXPECT_NE(it, gpu.m.end()) << label << ": no GPU tap " << key(what, layer);
      return it == gpu.m.end() ? ref::Matrix::Zero(n, m.hidden_size) : ref::Matrix(it->second.middleRows(row0, n));
    };
    auto expect_close = [&](const ref::Matrix& g, const ref::Matrix& r, const char* what, int layer) {
      EXPECT_LE(normalized_error(g, r), kSublayerTolerance) << label << ": " << what << " of layer " << layer + 1;
    };
    ref::Matrix x(n, m.hidden_size);
    for (int64_t t = 0; t < n; ++t) x.row(t) = w.embed.row(tokens[t]);
    ref::AttnResStack stack(m);
    stack.begin(x);
    for (int l = 0; l < m.num_layers; ++l) {
      const ref::LayerWeights& L = w.layers[l];
      ref::LayerState& s = state_.layers[l];
      const ref::Matrix a_in = rows("attention_in", l), a_out = rows("attention_out", l);
      expect_close(a_in, ref::rmsnorm(stack.attention_input(l, L.attn_res), L.input_norm, m.rms_norm_eps),
                   "attention input (residual mixer + norm)", l);
      const ref::Matrix a_ref = L.kda ? ref::kda_layer(*m.kda, m.rms_norm_eps, *L.kda, a_in, s.kda,
                                                       n > 1 ? ref::KdaMode::chunked : ref::KdaMode::recurrent)
                                      : ref::mla_absorbed(m.mla, 1e-6, *L.mla, a_in, s.mla);
      expect_close(a_out, a_ref, L.kda ? "KDA output" : "MLA output", l);
      stack.add_attention_output(l, a_out);
      const ref::Matrix m_in = rows("mlp_in", l), m_out = rows("mlp_out", l);
      expect_close(m_in, ref::rmsnorm(stack.mlp_input(l, L.mlp_res), L.post_norm, m.rms_norm_eps),
                   "MLP input (residual mixer + norm)", l);
      const ref::Matrix m_ref =
          !L.dense ? ref::moe_forward(m, *L.moe, m_in)
          : m.activation == Activation::situ
              ? ref::glu_mlp_situ(m_in, L.dense->gate, L.dense->up, L.dense->down, m.situ_beta, m.situ_linear_beta)
              : ref::glu_mlp_silu(m_in, L.dense->gate, L.dense->up, L.dense->down);
      expect_close(m_out, m_ref, L.dense ? "dense MLP output" : "MoE output", l);
      stack.add_mlp_output(m_out);
    }
    expect_close(rows("final_hidden", -1), ref::rmsnorm(stack.final_input(w.final_res), w.final_norm, m.rms_norm_eps),
                 "final hidden state", -1);
  }

 private:
  const ref::ReferenceModel& model_;
  ref::ModelState state_;
};

// Runs `forward` (one prefill chunk or decode step) on `model` with taps as `mode` says and returns them once
// the stream is done (none: empty).
template <typename Forward>
Taps run_tapped(runtime::GpuModel& model, TapMode mode, Forward forward) {
  Taps taps;
  if (mode == TapMode::stream_ordered) {
    StreamOrderedTaps copies(model.stream());
    model.set_tap(copies.tap(), /*synchronize=*/false);
    forward();
    model.set_tap(nullptr);
    CUDA_CHECK(cudaStreamSynchronize(model.stream()));
    return copies.download();
  }
  if (mode == TapMode::synchronous) model.set_tap(collector(taps));
  forward();
  model.set_tap(nullptr);
  CUDA_CHECK(cudaStreamSynchronize(model.stream()));
  return taps;
}

// A 19-token prompt prefilled in chunks of 8 and a 9-token one, then three decode steps of both together
// (contexts 19 and 9), each fed the same token on both sides: with taps (either TapMode), every sublayer checked by
// Isolated and the head on the GPU's own final hidden state; the prompts' logits end to end against the reference's
// own forward; the decode steps' logits end to end only without taps (TapMode::none, see kEndToEndLogitsTolerance).
// tile_experts: the MXFP4 experts in the tiled layout (DeviceWeights::tile_experts), which the config must allow.
inline void check_prefill_and_batched_decode(const ref::LoadedModel& loaded, const std::string& checkpoint_dir,
                                             TapMode mode = TapMode::synchronous, bool tile_experts = false) {
  const ModelConfig& config = loaded.config;
  const int vocab = config.vocab_size;
  const std::vector<int32_t> prompt_a = {5, 17, 300, 42, 7, 99, 1, 511, 256, 3, 64, 65, 200, 13, 8, 21, 34, 55, 89};
  const std::vector<int32_t> prompt_b = {400, 2, 9, 77, 130, 6, 250, 11, 480};  // 9 tokens: chunks of 8 and 1

  runtime::DeviceWeights weights(config);
  weights.load(weights::Checkpoint::open(checkpoint_dir));
  if (tile_experts) {
    EXPECT_EQ(weights.tile_experts(), config.count_layers(MlpKind::moe));
  }
  runtime::CacheShape cache_shape{2, 64, 16};
  runtime::GpuCache cache(config, cache_shape);
  runtime::ModelRunShape shape;
  shape.max_batch = 2;
  shape.max_chunk_tokens = 8;  // the 19-token prompt runs as chunks of 8, 8 and 3
  shape.max_prefill_context = 32;
  shape.page_tokens = cache_shape.page_tokens;
  shape.max_context_tokens = cache_shape.max_context_tokens;
  runtime::GpuModel model(weights, cache, shape);
  cache.admit(0, 64);
  cache.admit(1, 64);

  // Prefill in chunks of 8: every sublayer on the GPU's inputs, state carried from chunk to chunk.
  IsolatedReference isolated_a(loaded.model), isolated_b(loaded.model);
  auto prefill_in_chunks = [&](int sequence, const std::vector<int32_t>& prompt, IsolatedReference& isolated) {
    for (size_t start = 0; start < prompt.size(); start += 8) {
      const size_t n = std::min<size_t>(8, prompt.size() - start);
      const std::vector<int32_t> chunk(prompt.begin() + start, prompt.begin() + start + n);
      const Taps taps = run_tapped(model, mode, [&] { model.prefill(sequence, chunk, int64_t(start)); });
      if (mode != TapMode::none) {
        isolated.check(taps, 0, chunk, fmt::format("sequence {}: prefill chunk at {}", sequence, start));
      }
    }
  };
  prefill_in_chunks(0, prompt_a, isolated_a);
  prefill_in_chunks(1, prompt_b, isolated_b);
  // End to end: the prompts' last logits against the reference's own forward.
  ref::ModelState state_a = ref::ModelState::empty(config), state_b = ref::ModelState::empty(config);
  const ref::Matrix logits_a = loaded.model.forward(prompt_a, state_a);
  const ref::Matrix logits_b = loaded.model.forward(prompt_b, state_b);
  EXPECT_LE(normalized_error(download_logits(model, 0, vocab), logits_a.bottomRows(1)), kEndToEndLogitsTolerance);
  EXPECT_LE(normalized_error(download_logits(model, 1, vocab), logits_b.bottomRows(1)), kEndToEndLogitsTolerance);

  // Decode: three steps of both sequences together (contexts 19 and 9), each fed the same token on both sides.
  model.begin_decode({int64_t(prompt_a.size()), int64_t(prompt_b.size())});
  int32_t next_a = argmax_of_last_row(logits_a), next_b = argmax_of_last_row(logits_b);
  for (int step = 0; step < 3; ++step) {
    const int32_t tokens[2] = {next_a, next_b};
    CUDA_CHECK(cudaMemcpy(model.next_tokens(), tokens, sizeof(tokens), cudaMemcpyHostToDevice));
    const Taps taps = run_tapped(model, mode, [&] { model.decode_step(2); });
    if (mode != TapMode::none) {
      isolated_a.check(taps, 0, {next_a}, fmt::format("decode step {} of sequence A", step));
      isolated_b.check(taps, 1, {next_b}, fmt::format("decode step {} of sequence B", step));
      expect_head_matches(taps, 0, download_logits(model, 0, vocab), loaded.model.weights(), "decode A");
      expect_head_matches(taps, 1, download_logits(model, 1, vocab), loaded.model.weights(), "decode B");
    }
    const ref::Matrix la = loaded.model.forward({next_a}, state_a);
    const ref::Matrix lb = loaded.model.forward({next_b}, state_b);
    if (mode == TapMode::none) {
      EXPECT_LE(normalized_error(download_logits(model, 0, vocab), la), kEndToEndLogitsTolerance) << "step " << step;
      EXPECT_LE(normalized_error(download_logits(model, 1, vocab), lb), kEndToEndLogitsTolerance) << "step " << step;
    }
    next_a = argmax_of_last_row(la);
    next_b = argmax_of_last_row(lb);
  }
}

}  // namespace k3::gpu_test
