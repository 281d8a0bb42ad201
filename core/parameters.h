// Exact parameter counts from a ModelConfig, by tensor as stored in the published checkpoint.
// The whole-model sizes (claims, memory::weight_bytes) and the op graph's expert sizes use these.
#pragma once

#include "core/model_config.h"

namespace k3 {

// Parameters of one block, split by what storage format applies to them.
struct BlockParams {
  long long linear = 0;  // matrices that a checkpoint may quantise (projections, MLP weights)
  long long other = 0;   // norms, biases, conv weights, A_log, router: always kept in high precision
  long long total() const { return linear + other; }
};

BlockParams kda_layer_params(const ModelConfig& m);
BlockParams mla_layer_params(const ModelConfig& m);
BlockParams dense_mlp_params(const ModelConfig& m);
BlockParams routed_expert_params(const ModelConfig& m);  // one expert
BlockParams moe_shared_params(const ModelConfig& m);     // all shared experts, fused
BlockParams moe_latent_params(const ModelConfig& m);     // latent down + up + latent norm
BlockParams moe_router_params(const ModelConfig& m);     // router weight + correction bias
long long layer_norm_params(const ModelConfig& m);       // per layer: 2 RMSNorms + AttnRes mixers
long long final_norm_params(const ModelConfig& m);       // final RMSNorm + final AttnRes mixer
long long embedding_params(const ModelConfig& m);
long long lm_head_params(const ModelConfig& m);  // 0 when tied

struct ParameterCounts {
  long long embedding = 0;
  long long lm_head = 0;
  long long attention_mla = 0;   // all MLA layers
  long long attention_kda = 0;   // all KDA layers
  long long dense_mlp = 0;       // all dense MLP layers
  long long moe_routed = 0;      // all routed experts of all MoE layers
  long long moe_non_routed = 0;  // router, bias, shared experts, latent projections and norm
  long long norms = 0;           // per-layer and final norms and AttnRes mixers

  long long total() const;
  // Parameters used for one token: all but the unselected routed experts, without the input
  // embedding (a gather, not a matrix product).
  long long active_per_token = 0;
};

ParameterCounts count_parameters(const ModelConfig& m);

}  // namespace k3
