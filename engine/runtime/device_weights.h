// A K3-family model's weights on the GPU, laid out for the engine's kernels rather than as stored:
//   - projections that read the same input and feed the same kernel are adjacent rows of one matrix,
//     so one GEMM computes them: KDA q|k|v ([3P, h], the conv input), MLA q_a|kv_a ([q_lora + 576, h];
//     without q_lora just kv_a, with q_proj on its own), a dense or shared MLP's gate|up ([2I, h]);
//   - routed experts of a layer are stacked by expert, and each expert's w1 (gate) and w3 (up) are one
//     [2I, z] matrix — MXFP4 (K3: one grouped launch computes gate|up for every routed token) or bf16
//     (Kimi Linear: one GEMM per active expert);
//   - KDA conv weights q|k|v are one [3P, K] fp32 matrix; A_log keeps its first H values;
//   - after tile_experts, each MXFP4 expert's bytes in the tiled layout of kernels/mxfp4_tiled.h (the same bytes
//     permuted: the decode GEMV reads them faster, the prefill GEMM and the dequantised path read them as well).
// Filled from a checkpoint (any float dtype converted to the device dtype; MXFP4 copied packed) or
// from seeded random values generated on the GPU (kernels/random_fill.h: make-checkpoint's
// distributions and scaling).
// One rank of a TP/EP layout (engine/parallel/rank_shape.h) holds its shards only, laid out as above for its local
// model (its heads, columns and routed experts; embedding and lm_head its vocabulary rows); random shards are the
// whole tensors' values at their indices, so the ranks' pieces are those of one model. The GPU runtime runs K3 (Block
// AttnRes, SiTU, full-rank KDA output gate, MLA with q_lora and output gate, latent MoE with MXFP4 experts) and Kimi
// Linear (plain residuals, SiLU, low-rank KDA output gate, MLA with a direct q_proj, MoE at hidden width with bf16
// experts) at the kernels' per-head widths; other configs are refused with the reason.
#pragma once

#include "core/model_config.h"
#include "engine/parallel/rank_shape.h"
#include "engine/runtime/device_arena.h"
#include "engine/weights/checkpoint.h"
#include "engine/weights/tensor_layout.h"
#include "kernels/mxfp4_grouped.h"
#include "kernels/random_fill.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace k3::runtime {

using bf16 = __nv_bfloat16;

struct AttnResDeviceWeights {
  bf16* query = nullptr;     // *_res_proj [h]
  bf16* key_norm = nullptr;  // *_res_norm [h]
};

struct KdaDeviceWeights {
  bf16* qkv_proj = nullptr;  // [3P, h]
  bf16* g_proj = nullptr;    // [P, h] (full-rank output gate), or null
  bf16* g_a = nullptr;       // [r, h] (low-rank output gate: g_b · g_a), or null
  bf16* g_b = nullptr;       // [P, r]
  bf16* f_a = nullptr;       // [r, h]
  bf16* f_b = nullptr;       // [P, r]
  bf16* b_proj = nullptr;    // [H, h]
  float* conv = nullptr;     // [3P, K]
  float* a_log = nullptr;    // [H]
  float* dt_bias = nullptr;  // [P]
  float* o_norm = nullptr;   // [d]
  bf16* o_proj = nullptr;    // [h, P]
};

struct MlaDeviceWeights {
  bf16* qkv_a = nullptr;      // q_a | kv_a_proj_with_mqa: [q_lora + r + dr, h] (q_lora may be 0)
  bf16* q_a_norm = nullptr;   // [q_lora]
  bf16* q_b = nullptr;        // [H·(dn+dr), q_lora]
  bf16* q_proj = nullptr;     // [H·(dn+dr), h] when q_lora is 0 (Kimi Linear), else null
  bf16* kv_a_norm = nullptr;  // [r]
  bf16* kv_b = nullptr;       // [H·(dn+dv), r]
  bf16* g_proj = nullptr;     // [H·dv, h]
  bf16* o_proj = nullptr;     // [h, H·dv]
};

struct GluDeviceWeights {
  bf16* gate_up = nullptr;  // [2I, h]
  bf16* down = nullptr;     // [h, I]
};

struct MoeDeviceWeights {
  bf16* router = nullptr;            // [E, h]
  float* correction_bias = nullptr;  // [E]
  bf16* latent_down = nullptr;       // [z, h]; null without a latent (z = h)
  bf16* latent_up = nullptr;         // [h, z]
  bf16* latent_norm = nullptr;       // [z]
  GluDeviceWeights shared;           // [2S, h], [h, S]
  uint8_t* w13_packed = nullptr;     // [E, 2I, z/2]
  uint8_t* w13_scales = nullptr;     // [E, 2I, z/32]
  uint8_t* w2_packed = nullptr;      // [E, z, I/2]
  uint8_t* w2_scales = nullptr;      // [E, z, I/32]
  bf16* w13 = nullptr;               // bf16 experts: [E, 2I, z] (w1 rows then w3 rows per expert)
  bf16* w2 = nullptr;                // bf16 experts: [E, z, I]
  // The order of the MXFP4 experts' bytes: the checkpoint's, or tiled by DeviceWeights::tile_experts.
  kernels::Mxfp4Layout expert_layout = kernels::Mxfp4Layout::canonical;
};

struct LayerDeviceWeights {
  bf16* input_norm = nullptr;              // [h]
  bf16* post_norm = nullptr;               // [h]
  AttnResDeviceWeights attn_res, mlp_res;  // Block AttnRes only
  KdaDeviceWeights kda;                    // KDA layers
  MlaDeviceWeights mla;                    // MLA layers
  GluDeviceWeights dense;                  // dense-MLP layers
  MoeDeviceWeights moe;                    // MoE layers
};

class DeviceWeights {
 public:
  // Refuses (InputError naming the config) what the GPU runtime does not run.
  static void check_supported(const ModelConfig& config);
  // Bytes of device memory the layout needs (a measuring pass of the same code).
  static uint64_t device_bytes(const ModelConfig& config);
  static uint64_t device_bytes(const ModelConfig& model, const parallel::RankShape& rank);

  explicit DeviceWeights(const ModelConfig& config);  // allocates; values are undefined until filled
  DeviceWeights(const ModelConfig& model, const parallel::RankShape& rank);  // rank r's shards of `model`
  void fill_random(uint64_t seed);
  // Every tensor of the layout must be present with its shape (check_layout's problems otherwise); a rank reads
  // only its pieces' bytes from the mapped shards (one strided copy per tensor).
  void load(const weights::Checkpoint& checkpoint, const std::function<void(const std::string&)>& progress = {});
  // After fill_random or load: the MXFP4 experts of every MoE layer whose shapes allow it (kernels/mxfp4_tiled.h)
  // permuted in place into the tiled layout, which the decode GEMV reads faster; returns the layers tiled.
  int tile_experts();

  const ModelConfig& config() const { return config_; }  // the rank's local model (rank_shape.h)
  const parallel::RankShape& rank() const { return rank_; }
  bf16* embed = nullptr;           // [V, h]: the rank's rows [first_vocab_row, + vocab_rows)
  bf16* lm_head = nullptr;         // [V, h]: the same rows
  bf16* final_norm = nullptr;      // [h]
  AttnResDeviceWeights final_res;  // Block AttnRes only
  std::vector<LayerDeviceWeights> layers;
  uint64_t bytes() const { return arena_.used_bytes(); }

 private:
  // Where a stored tensor goes: `ptr` (device), its device dtype, its element count (packed bytes for
  // MXFP4), for A_log how many leading values are kept, and the tensor's indices of its elements.
  struct Slot {
    const weights::TensorSpec* spec = nullptr;
    void* ptr = nullptr;
    weights::TensorDtype device_dtype = weights::TensorDtype::bf16;
    int64_t elements = 0;
    kernels::RandomWindow window;  // block = elements: the whole tensor
  };
  DeviceWeights(const ModelConfig& model, const parallel::RankShape& rank, bool allocate);
  void lay_out(DeviceArena& arena);

  ModelConfig config_;
  parallel::RankShape rank_;
  weights::CheckpointLayout layout_;                    // the whole model's
  std::vector<const parallel::TensorShard*> shard_of_;  // per layout tensor: this rank's piece, or null
  parallel::RankShards shards_;
  DeviceArena arena_;
  std::vector<Slot> slots_;
};

}  // namespace k3::runtime
