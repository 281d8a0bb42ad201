// What every part of the forward (gpu_model.h, kda_layer.h, mla_layer.h, moe_layer.h, dense_mlp.h) runs
// against: the model's weights and cache, the stream, the cuBLASLt GEMMs, and the NVTX range each op of
// the schedule (forward_schedule.h) runs in.
#pragma once

#include "core/op_names.h"
#include "engine/parallel/communicator.h"
#include "engine/parallel/uniform_routing.h"
#include "engine/runtime/device_weights.h"
#include "engine/runtime/gemm_cublaslt.h"
#include "engine/runtime/gpu_cache.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace k3::runtime {

class OpRangeListener;

// Throws k3::Error "<what>: <CUDA error>" unless `status` is cudaSuccess.
void check(cudaError_t status, const char* what);

// An NVTX range named as the op graph names the op ("L004.mla.attn_decode", "head.lm_head"), also reported
// to the op range listener (op_range_listener.h) when one is set.
class OpRange {
 public:
  explicit OpRange(const OpRef& op);
  ~OpRange();
  OpRange(const OpRange&) = delete;
  OpRange& operator=(const OpRange&) = delete;

 private:
  OpRangeListener* listener_;
};

// A sublayer's input and output: out = f(x), or out += f(x) when `accumulate` (the last GEMM's beta = 1).
struct SublayerIo {
  const bf16* x = nullptr;
  bf16* out = nullptr;
  bool accumulate = false;
};

// The groups one rank of a TP/EP layout talks to (null on one GPU): the attention group (embedding, attention, MLP and
// lm_head collectives) and the expert-parallel group (dispatch and combine), and the seeded uniform router that
// assigns the routed rows of an expert-parallel dispatch (moe_layer.h).
struct RankComms {
  parallel::Communicator* tp = nullptr;
  parallel::Communicator* ep = nullptr;
  parallel::UniformRouting routing;
};

struct ForwardContext {
  const DeviceWeights& weights;
  const ModelConfig& config;
  GpuCache& cache;
  cudaStream_t stream;
  GemmRunner& gemm_runner;
  RankComms comms;

  const parallel::RankShape& rank() const { return weights.rank(); }

  // y[m, n] = x[m, k] · w[n, k]ᵀ (+ beta · y), bf16 out.
  void gemm(const bf16* x, int64_t x_stride, const bf16* w, bf16* y, int64_t y_stride, int64_t m, int64_t n, int64_t k,
            float beta = 0.0f) const;
  // The same with fp32 out, beta = 0.
  void gemm_f32(const bf16* x, int64_t x_stride, const bf16* w, float* y, int64_t y_stride, int64_t m, int64_t n,
                int64_t k) const;
  // The model's gated activation (SiTU or SiLU) of gate|up rows [rows, 2·intermediate] fp32 → bf16.
  void glu(const float* gate_up, int64_t stride, bf16* out, int64_t rows, int64_t intermediate, const char* what) const;
};

}  // namespace k3::runtime
