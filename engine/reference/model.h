// The whole K3-family model on the CPU: embedding, every layer (KDA or MLA attention; dense MLP or
// MoE) joined by Block Attention Residuals (K3) or plain residuals (Kimi Linear), final norm and
// lm_head. Prefill and decode share one forward: the state carries KDA states and MLA latent caches
// across calls, so N single-token calls equal one N-token call.
#pragma once

#include "core/model_config.h"
#include "engine/reference/attnres.h"
#include "engine/reference/kda.h"
#include "engine/reference/mla.h"
#include "engine/reference/moe.h"
#include "engine/reference/tensor.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace k3::ref {

struct DenseMlpWeights {
  Matrix gate, up, down;  // [I, h], [I, h], [h, I]
};

struct LayerWeights {
  Vector input_norm, post_norm;    // [h]
  AttnResMixer attn_res, mlp_res;  // Block AttnRes mixers (empty for plain residuals)
  std::optional<KdaWeights> kda;   // exactly one of kda / mla
  std::optional<MlaWeights> mla;
  std::optional<DenseMlpWeights> dense;  // exactly one of dense / moe
  std::optional<MoeWeights> moe;
};

struct ModelWeights {
  Matrix embed;            // [V, h]
  Matrix lm_head;          // [V, h]
  Vector final_norm;       // [h]
  AttnResMixer final_res;  // the mixer before the final norm (K3)
  std::vector<LayerWeights> layers;
};

struct LayerState {
  KdaState kda;  // KDA layers
  MlaCache mla;  // MLA layers
};

struct ModelState {
  std::vector<LayerState> layers;
  int64_t tokens = 0;  // tokens processed so far
  static ModelState empty(const ModelConfig& config);
};

// Per-layer activations of one forward call, for golden dumps and layer-by-layer comparison.
struct ForwardTrace {
  std::vector<Matrix> attention_in;   // [layers] input of the attention block after RMSNorm_in, [T, h]
  std::vector<Matrix> attention_out;  // [layers] attention block output, [T, h]
  std::vector<Matrix> mlp_in;         // [layers] input of the MLP after RMSNorm_post, [T, h]
  std::vector<Matrix> mlp_out;        // [layers] MLP output, [T, h]
  Matrix final_hidden;                // after the final norm, [T, h]
};

class ReferenceModel {
 public:
  // Checks that the weights match the config's layer schedule and shapes.
  ReferenceModel(ModelConfig config, ModelWeights weights);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // Logits [T, V] for `tokens` appended to `state`. KDA runs chunked for T > 1 and recurrent for T = 1.
  Matrix forward(const std::vector<int32_t>& tokens, ModelState& state, ForwardTrace* trace = nullptr) const;
  // Greedy generation: prefill the prompt, then decode one token at a time. Returns the new tokens.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int max_new_tokens) const;

 private:
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace k3::ref
