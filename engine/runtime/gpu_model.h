// The forward pass of a K3-family model (K3, Kimi Linear) on one GPU, op by op as the op graph names them
// (core/op_graph.h): the forward is the op list of forward_schedule.h, and every op runs inside an NVTX range
// named from core/op_names.h ("L004.mla.attn_decode", "head.lm_head", …) so Nsight Systems and the profiler
// attribute its kernels. This file is the pass structure — the embedding, the residual stream (Block AttnRes
// or plain), the head, prefill chunks, the decode step and its CUDA-graph capture — and dispatches each
// sublayer op to its part: kda_layer.h, mla_layer.h, moe_layer.h, dense_mlp.h, each with its own workspace.
// Two entry points:
//   prefill(sequence, tokens, start)  one sequence's prompt after `start` cached tokens, in chunks of
//                                     max_chunk_tokens (KDA chunked kernel, MLA expanded attention over
//                                     the cached prefix and the chunk); leaves the last token's logits and
//                                     its greedy next token in slot `sequence`. A chunk long enough for
//                                     dequantised MXFP4 experts (dequantized_experts) copies each MoE layer's
//                                     expert offsets to the host (one sync per layer) unless the wgmma
//                                     grouped GEMM runs them (tiled experts on compute capability 9.0, up
//                                     to 292 slots per expert);
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
#include "engine/runtime/forward_context.h"
#include "engine/runtime/forward_schedule.h"
#include "engine/runtime/gpu_cache.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace k3::runtime {

// what: "attention_in", "attention_out", "mlp_in", "mlp_out" (layer ≥ 0) or "final_hidden" (layer −1);
// rows × cols bf16 on the device, valid during the call.
using ForwardTap =
    std::function<void(const std::string& what, int layer, const bf16* device, int64_t rows, int64_t cols)>;

class GpuModel {
 public:
  // One rank of a TP/EP layout (weights.rank()) issues the schedule's collectives through `comms`.
  GpuModel(const DeviceWeights& weights, GpuCache& cache, const ModelRunShape& shape, RankComms comms = {});
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;
  static uint64_t workspace_bytes(const ModelConfig& config, const ModelRunShape& shape);
  static uint64_t workspace_bytes(const ModelConfig& config, const parallel::RankShape& rank,
                                  const ModelRunShape& shape);
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

 private:
  struct Workspace;  // the pass structure's buffers and every part's workspace (gpu_model.cpp)
  struct Parts;      // the KDA, MLA, dense MLP and MoE parts (gpu_model.cpp)
  struct ResidualStream;
  void forward(const ForwardPass& pass);
  // Runs one op of the schedule, in its range.
  void run(const ForwardPass& pass, const OpRef& op, ResidualStream& stream);
  SublayerIo sublayer_io(int layer, Sublayer sublayer) const;
  // The AttnRes mixer over pool[0 ..= blocks] fused with the RMSNorm after it: w.mix and w.normed.
  void mixer(const AttnResDeviceWeights& mix, const bf16* norm, int blocks, int64_t tokens, const char* what);
  void head(const ForwardPass& pass, OpId op, int blocks);
  void tap(const char* what, int layer, const bf16* device, int64_t rows) const;

  const DeviceWeights& weights_;
  const ModelConfig& config_;
  GpuCache& cache_;
  ModelRunShape shape_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GemmRunner> gemm_;
  DeviceArena arena_;
  std::unique_ptr<Workspace> ws_;
  std::unique_ptr<ForwardContext> context_;
  std::unique_ptr<Parts> parts_;
  ForwardTap tap_;
  bool tap_synchronizes_ = true;
  cudaGraphExec_t decode_graph_ = nullptr;
  int captured_batch_ = 0;
};

}  // namespace k3::runtime
