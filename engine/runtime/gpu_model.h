// The forward pass of a K3-family model (K3, Kimi Linear) on one GPU, op by op as the op graph names them
// (core/op_graph.h): every op runs inside an NVTX range "L004.mla.attn_decode", "head.lm_head", … so Nsight Systems and
// the profiler attribute its kernels. Two entry points:
//   prefill(sequence, tokens, start)  one sequence's prompt after `start` cached tokens, in chunks of
//                                     max_chunk_tokens (KDA chunked kernel, MLA expanded attention over
//                                     the cached prefix and the chunk); leaves the last token's logits and
//                                     its greedy next token in slot `sequence`. A chunk long enough for
//                                     dequantised MXFP4 experts (dequantized_experts) copies each MoE layer's
//                                     expert offsets to the host (one sync per layer);
//   decode_step(batch)                one token for each of the sequences in slots [0, batch) (absorbed
//                                     MLA over the paged cache, recurrent KDA), reading the tokens that
//                                     next_tokens() holds and writing the next ones there — device-driven
//                                     throughout, so capture_decode() records it once as a CUDA graph and
//                                     launch_decode() replays it. Kimi Linear's bf16 routed experts are the
//                                     exception: each MoE layer copies the expert offsets to the host (one
//                                     sync) and runs one GEMM per active expert, so such models decode eager
//                                     and capture_decode() refuses them (decode_capturable()).
// Residuals: Block AttnRes (K3: mixer fused with the norm) or plain x + f(x) (Kimi Linear: RMSNorm before
// each sublayer, an add after).
// Activations are bf16 between ops; KDA, router, MoE accumulation and logits fp32 (as the reference).
// A tap (eager runs only) receives each layer's attention/MLP inputs and outputs and the final hidden
// state, for the layer-by-layer comparison with the CPU reference.
#pragma once

#include "engine/runtime/device_arena.h"
#include "engine/runtime/device_weights.h"
#include "engine/runtime/gemm_cublaslt.h"
#include "engine/runtime/gpu_cache.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace k3::runtime {

struct ModelRunShape {
  int max_batch = 1;                   // decode sequences per step
  int max_chunk_tokens = 4096;         // prefill tokens per forward call
  int64_t max_prefill_context = 4096;  // prefix + chunk tokens an MLA prefill attends (expanded K/V buffers)
  int page_tokens = 64;                // the cache's (CacheShape)
  int64_t max_context_tokens = 4096;   // the cache's
};

// what: "attention_in", "attention_out", "mlp_in", "mlp_out" (layer ≥ 0) or "final_hidden" (layer −1);
// rows × cols bf16 on the device, valid during the call.
using ForwardTap =
    std::function<void(const std::string& what, int layer, const bf16* device, int64_t rows, int64_t cols)>;

class GpuModel {
 public:
  GpuModel(const DeviceWeights& weights, GpuCache& cache, const ModelRunShape& shape);
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;
  static uint64_t workspace_bytes(const ModelConfig& config, const ModelRunShape& shape);
  // False when a decode step synchronises with the host (MoE layers with bf16 routed experts).
  static bool decode_capturable(const ModelConfig& config);
  // True when a prefill call of `tokens` tokens runs the MXFP4 routed experts by dequantising each active expert to
  // bf16 and one cuBLASLt GEMM per expert (kernels/mxfp4_grouped_dequantized.h; one host sync per MoE layer): the
  // slots average at least kMxfp4DequantizedMinAverageSlots per expert.
  static bool dequantized_experts(const ModelConfig& config, int64_t tokens);

  void prefill(int sequence, const std::vector<int32_t>& tokens, int64_t start);
  // Sets the device positions of slots [0, batch) to their cached lengths before the first decode step.
  void begin_decode(const std::vector<int64_t>& cached_tokens);
  void decode_step(int batch);
  void capture_decode(int batch);
  void launch_decode();  // the captured graph, on stream()

  int32_t* next_tokens() const;  // device [max_batch]
  float* logits() const;         // device [max_batch, vocab]
  cudaStream_t stream() const { return stream_; }
  // `synchronize` (the default): the stream is synchronised before each call, so the tap may read the device
  // buffer from the host. Otherwise the tap is called as the forward is enqueued and may only enqueue
  // stream-ordered work on stream() (a device-to-device copy): the forward then runs with no host
  // synchronisation between sublayers, as untapped, and is still checked sublayer by sublayer.
  void set_tap(ForwardTap tap, bool synchronize = true) {
    tap_ = std::move(tap);
    tap_synchronizes_ = synchronize;
  }

  struct Workspace;  // the activation buffers (gpu_model.cpp)

 private:
  struct Pass;  // one forward call: T tokens of a prefill chunk or a decode batch
  void forward(const Pass& pass);
  void forward_plain(const Pass& pass);  // plain residuals (Kimi Linear)
  // Sublayers write out = f(x), or out += f(x) when `accumulate` (their last GEMM's beta = 1: the residual add).
  void attention_sublayer(const Pass& pass, int layer, bf16* out, bool accumulate);
  void mlp_sublayer(const Pass& pass, int layer, bf16* out, bool accumulate);
  void kda_layer(const Pass& pass, int layer, const bf16* x, bf16* out, bool accumulate);
  void mla_layer(const Pass& pass, int layer, const bf16* x, bf16* out, bool accumulate);
  void moe_mlp(const Pass& pass, int layer, const bf16* x, bf16* out, bool accumulate);
  void bf16_experts(const Pass& pass, int layer, const bf16* x);  // routed experts → ws combined [T, h] fp32
  void mxfp4_experts_dequantized(const Pass& pass, int layer);      // routed experts → ws expert_out, per slot
  // The routing's expert offsets [E + 1], copied to the host (a stream sync) and checked to cover the slots.
  const std::vector<int32_t>& expert_offsets_on_host(int layer, int64_t slots);
  void glu(const float* gate_up, int64_t stride, bf16* out, int64_t rows, int64_t intermediate, const char* what);
  void dense_mlp(const Pass& pass, int layer, const bf16* x, bf16* out, bool accumulate);
  void head(const Pass& pass, int blocks);
  void gemm(const bf16* x, int64_t x_stride, const bf16* w, bf16* y, int64_t y_stride, int64_t m, int64_t n, int64_t k,
            float beta = 0.0f);
  void gemm_f32(const bf16* x, int64_t x_stride, const bf16* w, float* y, int64_t y_stride, int64_t m, int64_t n,
                int64_t k);
  void tap(const char* what, int layer, const bf16* device, int64_t rows) const;

  const DeviceWeights& weights_;
  const ModelConfig& config_;
  GpuCache& cache_;
  ModelRunShape shape_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GemmRunner> gemm_;
  DeviceArena arena_;
  std::unique_ptr<Workspace> ws_;
  ForwardTap tap_;
  bool tap_synchronizes_ = true;
  std::vector<int32_t> host_expert_offsets_;  // bf16 experts: the routing's offsets, copied per MoE layer
  cudaGraphExec_t decode_graph_ = nullptr;
  int captured_batch_ = 0;
};

}  // namespace k3::runtime
