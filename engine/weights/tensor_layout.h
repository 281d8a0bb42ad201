// The tensors a checkpoint of a given config holds, by name, storage dtype and shape, as published:
//   K3 (nested text_config): "language_model.model.layers.N.…", "language_model.lm_head.weight";
//     routed experts compressed-tensors MXFP4 (w1/w2/w3 .weight_packed U8 [out, in/2] and
//     .weight_scale U8 [out, in/32]); A_log F32 [128] (96 heads + 32 zero pads); conv, dt_bias,
//     o_norm and the router's correction bias F32; everything else BF16.
//   Kimi Linear (flat): "model.layers.N.…", "lm_head.weight"; A_log [1, 1, H, 1]; BF16 experts.
// Sources: the K3 and Kimi Linear safetensors headers as read by public ports (docs/checkpoints.md).
#pragma once

#include "core/model_config.h"
#include "engine/weights/checkpoint.h"
#include "engine/weights/tensor_dtype.h"

#include <cstdint>
#include <string>
#include <vector>

namespace k3::weights {

// What a tensor is, for parameter counts by kind and for synthetic initialisation.
enum class TensorRole {
  embedding,
  lm_head,
  norm,           // RMSNorm weights (incl. the KDA gated output norm and the MoE latent norm)
  attnres_query,  // *_res_proj [1, h]
  attention,      // KDA and MLA projections
  conv,           // KDA short conv [P, 1, K]
  a_log,          // KDA decay rate (log), padded in K3
  dt_bias,        // KDA gate bias
  dense_mlp,
  router,
  router_bias,
  shared_expert,
  latent,         // LatentMoE down/up projections
  expert,         // routed expert weight (bf16 or fp8)
  expert_packed,  // MXFP4 elements, 2 per byte
  expert_scale,   // MXFP4 E8M0 block scales
};
std::string to_string(TensorRole role);

struct TensorSpec {
  std::string name;
  TensorDtype dtype;
  std::vector<int64_t> shape;  // as stored
  TensorRole role;
  int64_t fan_in = 0;  // input width of a matrix (logical, for packed experts)
  int layer = -1;      // 0-based; -1 for embedding, head and final norms
  // Parameters the tensor holds: elements, 2 per byte for packed MXFP4, 0 for block scales.
  int64_t parameters() const;
};

struct CheckpointLayout {
  std::string prefix;  // "language_model.model." (K3) or "model." (Kimi Linear)
  std::vector<TensorSpec> tensors;
  const TensorSpec* find(const std::string& name) const;
  int64_t parameters() const;
};

CheckpointLayout checkpoint_layout(const ModelConfig& config);

// Every difference between a checkpoint and the layout, all at once.
struct LayoutProblems {
  std::vector<std::string> missing;     // in the layout, not in the checkpoint
  std::vector<std::string> unexpected;  // in the checkpoint, not in the layout
  std::vector<std::string> misshaped;   // "name: [a, b] F32, expected [c, d] BF16"
  bool ok() const { return missing.empty() && unexpected.empty() && misshaped.empty(); }
  std::string describe() const;  // one line per problem
};

// Float dtypes (BF16, F16, F32) are interchangeable for a float tensor; packed and scale tensors
// must be U8.
LayoutProblems check_layout(const CheckpointLayout& layout, const Checkpoint& checkpoint);

}  // namespace k3::weights
